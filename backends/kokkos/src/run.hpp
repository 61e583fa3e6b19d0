// The Kokkos kernels' entry points as plain functions (no Kokkos header): each runs on the execution space that
// serves its tensors' memory (host memory: the default host space; CUDA memory: Kokkos::Cuda). Inputs validated and
// covered (backend.cpp). attend.cpp holds the executor, estimate.cpp the estimators (compiled without fused
// multiply-adds on a GPU: their fp32 rules must round as on the host).
#pragma once

#include <vector>

#include "spattn/attend_options.hpp"
#include "spattn/mask.hpp"
#include "spattn/anchor.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/methods/bfla.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/methods/sale.hpp"
#include "spattn/methods/sparge.hpp"

namespace spattn::kokkos {

inline constexpr int kRowBlock = 128;  ///< executor rows per team: the reference's row block

/// Whether this build has a Kokkos execution space for `memory`.
bool serves(Memory memory);

AttendStats run_attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                       const TileMask& mask, const TensorView& o, const AttendOptions& options);
TileMask run_sparge(const Problem& problem, const TensorView& q, const TensorView& k, const sparge::Config& config);
/// FG-Attn's estimated mask (per query tile, before merging: the caller applies the union semantics).
TileMask run_fg_attn(const Problem& problem, const TensorView& q, const TensorView& k, const fg_attn::Config& config);
/// AnchorAttention's mask; `anchors` receives each row's (m, l) over its anchor region, `counts` the candidate and
/// selected (group, key) pairs.
TileMask run_anchor_attn(const Problem& problem, const TensorView& q, const TensorView& k,
                         const anchor_attn::Config& config, std::vector<AnchorStats>& anchors, std::int64_t counts[2]);
/// SALE's mask; `margins` and `sink_local` as reference::SaleEstimate's, `counts` the candidate and selected blocks.
TileMask run_sale(const Problem& problem, const TensorView& q, const TensorView& k, const sale::Config& config,
                  std::vector<float>& margins, std::vector<SoftmaxState>& sink_local, std::int64_t counts[2]);
TileMask run_bfla(const Problem& problem, const TensorView& q, const TensorView& k, const bfla::Config& config,
                  std::vector<std::vector<float>>* scores);

}  // namespace spattn::kokkos
