// Checking another kernel's attention output against spattn's definitions (DESIGN.md §5 item 4; the checker of
// spattn.testing.check_attention and `spattn check`). Host only.
//
// The rule is the one FlashAttention's tests use: a low-precision kernel is as good as a plain attention in its
// precision when its error against a float64 attention is at most twice that attention's error, plus a small
// absolute term for outputs where that error is 0:
//
//   ref64   = softmax(scale · q kᵀ over the mask) v in float64     (reference/exact_attention.hpp)
//   ref_low = spattn's reference executor on the same inputs and mask, written in out's dtype
//             (fp32 accumulate over inputs in their own dtype: bf16/fp16/fp32)
//   bound   = factor · max |ref_low − ref64| + atol                 (factor 2; atol by dtype, CheckOptions)
//   passed  ⇔ |out − ref64| ≤ bound for every element              (NaN or infinity in out never passes)
//
// One bound for the whole output, as FlashAttention's tests (per-head bounds would make a head whose outputs are
// small stricter than the others); the report still gives every (batch, head)'s maximum errors and the first
// failing (batch, head, row) in row-major order.
//
// The mask is a TileMask (DESIGN.md §3) or an element mask (any boolean [B or 1, H or 1, Nq, Nkv] pattern; the
// causal rule is applied on top of either). An element mask that no TileMask expresses still gets spattn's reference
// as ref_low: each query row is run as its own 16-row tile (the smallest tile_q) with 1-key tiles, so rows are
// computed exactly as the executor computes them, at 16 times the query rows' memory and work.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spattn/mask.hpp"
#include "spattn/problem.hpp"

namespace spattn {

/// A boolean element mask [batch][heads][Nq][Nkv], C order, nonzero = key visible. batch is 1 (all sequences) or
/// the problem's B; heads is 1 (all heads), Hkv (a mask per KV head) or Hq.
struct ElementMask {
  const std::uint8_t* allowed = nullptr;
  std::int64_t batch = 1;
  std::int64_t heads = 1;
};

struct CheckOptions {
  double factor = 2.0;          ///< the multiple of ref_low's error allowed; >= 1
  std::optional<double> atol;   ///< the absolute term; unset: default_atol(out dtype, input dtype); >= 0
};

/// The absolute term by precision (the coarser of the output's and the inputs' dtypes): 1e-5 for fp32, 1e-4 for
/// fp16 and bf16 — far below one ulp of a typical output (bf16 at 0.1: 4.9e-4), there so that outputs whose ref_low
/// is exact (a row of one key) do not fail on their last bit.
double default_atol(DType out, DType inputs);

struct CheckReport {
  struct Failure {
    std::int64_t batch = -1, head = -1, row = -1, column = -1;
    double got = 0.0, want = 0.0;  ///< out and ref64 at that element
  };
  bool passed = false;
  std::string mask_kind;        ///< "tile mask" or "element mask"
  DType out_dtype = DType::f32, input_dtype = DType::f32;
  std::int64_t batch = 0, heads = 0, seqlen_q = 0, dim_v = 0;
  double factor = 2.0, atol = 0.0;
  double reference_error = 0.0;  ///< max |ref_low − ref64|
  double bound = 0.0;            ///< factor · reference_error + atol
  double max_error = 0.0;        ///< max |out − ref64| (NaN once any element's is NaN)
  std::vector<double> head_error;            ///< [B·Hq]: max |out − ref64| of each (batch, head)
  std::vector<double> head_reference_error;  ///< [B·Hq]: max |ref_low − ref64|
  std::int64_t failing_rows = 0;             ///< rows with an element over the bound
  std::int64_t non_finite = 0;               ///< elements of out that are NaN or infinite
  Failure first_failure;                     ///< batch −1: none

  /// The report as text: verdict, rule with its numbers, first failure, per-head maxima.
  std::string text() const;
};

/// out [B, Hq, Nq, Dv] against the definitions above. q, k, v, out: host memory, any dtype and strides attend()
/// takes, no variable-length batch. Throws spattn::Error on inconsistent arguments (those of attend(), an element
/// mask's extents, options out of range).
CheckReport check_attention(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                            const TensorView& out, const TileMask& mask, const CheckOptions& options = {});
CheckReport check_attention(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                            const TensorView& out, const ElementMask& mask, const CheckOptions& options = {});

}  // namespace spattn
