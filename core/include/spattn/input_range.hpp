// The input values the library computes on: finite, and small enough that nothing a backend computes from them
// leaves the fp32 range, in any summation order. attend() and estimate() check it for host tensors before a
// backend runs, so inputs that would overflow are reported as an input problem, never as a non-finite output.
//
// The rule (bounds on magnitudes, so it holds for every backend, method and order of summation):
//   scores  S = head_dim · max|q| · max|k| · max(scale, 1) ≤ 2^100: every dot product q·k, before and after the
//           scale, and every partial sum of one is at most S; 2^100 leaves 2^28 of headroom below fp32's 2^128 for
//           what the methods build on them (base-2 units, differences in the online softmax, int8 products,
//           BFLA's sums over ≤ 4096 logits);
//   sums    seqlen · max|x| ≤ 2^100 for each of q, k, v: every sum over a sequence — means (pooling, K
//           smoothing), the P·V accumulator of weights ≤ 1 times values — is at most that.
// Real activations are many orders of magnitude inside (|x| ≈ 1e14 with head_dim 128 reaches the score bound).
#pragma once

#include "spattn/problem.hpp"

namespace spattn {

/// log2 of the bound on S and on the sums.
inline constexpr int kInputRangeLog2 = 100;

/// What the rule needs of one tensor, over every element a call reads (sequences' real rows): the largest |x| and
/// the first place it occurs, the first non-finite element, in (batch, head, row, dim) order. A backend whose
/// memory the host cannot read computes it on its device (Backend::input_range) and the rule below is the same.
struct TensorRange {
  double max_abs = 0.0;
  std::int64_t max_at[4] = {0, 0, 0, 0};  ///< batch, head, row, dim
  bool finite = true;
  float bad = 0.0f;  ///< the first non-finite value (when !finite)
  std::int64_t bad_at[4] = {0, 0, 0, 0};
};

/// The summary of a host tensor: q (is_q) or k/v of the problem, `heads` heads of `dim` elements.
TensorRange scan_range(const Problem& problem, const TensorView& t, bool is_q, std::int64_t heads, std::int64_t dim);

/// The rule on summaries: throws spattn::Error for the first failure in the order q finite, k finite, the score
/// bound, the q and k sums, v finite, the v sum (v may be null).
void check_input_range(const Problem& problem, const TensorRange& q, const TensorRange& k, const TensorRange* v);

/// Throws spattn::Error naming the tensor and the first offending element ("q: not finite (nan) at batch 0,
/// head 1, row 5, dim 3"), or the bound that fails ("scores overflow fp32: …"). Host-memory views only; `v`
/// may be null (an estimate reads q and k). The problem and views must be valid.
void check_input_range(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView* v);

}  // namespace spattn
