// Where AnchorAttention's Kokkos kernels (anchor_attn.hpp, anchor_mma.hpp) find a group of query rows: its sequence's
// lengths, its rows and its key partition (anchor_attn::group_keys), from plain values a kernel copies.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>

#include "kernel_args.hpp"
#include "spattn/methods/anchor_attn.hpp"

namespace spattn::kokkos::detail {

struct AnchorGeometry {
  DeviceShape s;
  std::int64_t n_sink = 0, local_lead = 0, group = 0, groups = 0, block = 0, step = 0;

  /// Group t of sequence b: rows [first, last] (valid: it starts inside the sequence) and its keys.
  struct Group {
    std::int64_t nq = 0, nkv = 0, first = 0, last = 0;
    bool valid = false;
    anchor_attn::GroupKeys keys;
    /// Pooled blocks of `rows` rows (the last one partial).
    KOKKOS_INLINE_FUNCTION std::int64_t blocks(std::int64_t rows) const { return (last - first + rows) / rows; }
  };
  KOKKOS_INLINE_FUNCTION Group at(std::int64_t b, std::int64_t t) const {
    Group g;
    g.nq = s.nq(b);
    g.nkv = s.nkv(b);
    g.first = t * group;
    g.valid = g.first < g.nq;
    if (!g.valid) return g;
    g.last = (g.first + group < g.nq ? g.first + group : g.nq) - 1;
    g.keys = anchor_attn::group_keys(n_sink, local_lead, group, g.first, g.last, g.nq, g.nkv, s.causal);
    return g;
  }
};

}  // namespace spattn::kokkos::detail
