// The arrays of one call: how they are read (layout, DLPack stream) and the Problem their shapes
// describe. TensorView carries no extents, so the agreement of the arrays' shapes is checked here;
// everything else by Problem::validate.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlpack_tensor.hpp"
#include "spattn/problem.hpp"

namespace spattn::python {

struct Call {
  Call() = default;
  Call(std::string layout_, std::int64_t stream_) : layout(std::move(layout_)), stream(stream_) {}

  std::string layout = "bhnd";
  std::int64_t stream =
      1;  ///< DLPack stream of CUDA arrays (1: the legacy default stream the public API runs on)
  /// A variable-length batch (both or neither): B+1 offsets into the packed rows of q and of k/v, which come as
  /// [1, total, H, D] ("bnhd": the packed [total, H, D] arrays of FlashAttention's varlen functions with a unit batch).
  std::vector<std::int64_t> cu_seqlens_q, cu_seqlens_kv;
  std::int64_t max_seqlen_q = 0, max_seqlen_kv = 0;  ///< 0: the longest sequence of the offsets
  /// None, or the fp32 [B, Hq, Nq, 1] array (on q's device, contiguous) that receives each row's natural-log LSE
  /// (AttendOptions::lse: row n of sequence b at (b·Hq + h)·Nq + n; −inf for a row that sees no key).
  pybind11::object lse = pybind11::none();
};

DlpackTensor import_array(pybind11::handle object, const char* name, const Call& call);

/// Throws spattn::Error unless `t` (argument `name`) is on q's device.
void require_same_device(const DlpackTensor& t, const char* name, const DlpackTensor& q);

/// The problem of q [B, Hq, Nq, D], k [B, Hkv, Nkv, D] and (when given) v [B, Hkv, Nkv, Dv]; with the call's
/// cu_seqlens, the variable-length batch of packed q [1, Hq, total_q, D] and k, v [1, Hkv, total_kv, ·].
Problem problem_of(const DlpackTensor& q, const DlpackTensor& k, const DlpackTensor* v, bool causal,
                   std::optional<float> scale, const Call& call = {});

/// The call's LSE output (nullptr when it has none), checked against the problem: fp32 [B, Hq, Nq, 1], contiguous,
/// on q's device.
float* lse_of(const Call& call, const DlpackTensor& q, const Problem& p);

/// Throws spattn::Error unless out is [B, Hq, Nq, Dv] of the problem ([1, Hq, total_q, Dv] for a variable-length
/// batch), on q's device.
void check_out(const DlpackTensor& o, const DlpackTensor& q, const Problem& p);

}  // namespace spattn::python
