// How far an attention output is from a reference output (a sparse method's against dense attention's): rel L1 and
// max abs, defined once for calibrate(), the `spattn` program (run, demo, frontier) and the benchmarks. Host only
// (std::span; the device kernels never compute a metric).
//
// The exact definition, for outputs got and want of n elements (fp32, the same flattened order):
//   d_i          = |double(got_i) − double(want_i)|           (the difference in fp64: exact for fp32 inputs)
//   l1           = Σ_i d_i                                    fp64, one sequential sum in element order i = 0 … n−1
//   reference_l1 = Σ_i |double(want_i)|                       fp64, one sequential sum in element order
//   rel_l1       = l1 / reference_l1 when reference_l1 > 0, else l1 (an all-zero reference: the absolute error)
//   max_abs      = max_i d_i
// The order is fixed so that a result's bits never depend on how it is computed (the callers did these loops by hand
// before, all in this order and precision; results are bit-identical to theirs).
//
// NaN and infinity are never hidden: a non-finite d_i (a NaN or infinite element on either side, or an overflowing
// difference) makes l1, rel_l1 and max_abs NaN or infinite (max_abs keeps a NaN once it has seen one), so that a check
// `rel_l1 < bound` fails; first_non_finite names the first such element (−1: none) for callers that report it.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "spattn/error.hpp"

namespace spattn {

struct OutputError {
  double l1 = 0.0;                     ///< Σ|got − want|
  double reference_l1 = 0.0;           ///< Σ|want|
  double rel_l1 = 0.0;                 ///< l1 / reference_l1 (l1 when reference_l1 is 0)
  double max_abs = 0.0;                ///< max |got − want|
  std::int64_t first_non_finite = -1;  ///< the first element whose |got − want| is not finite; −1: none
};

/// got against want, element by element (the header's definition). Throws spattn::Error if their sizes differ.
inline OutputError output_error(std::span<const float> got, std::span<const float> want) {
  require(got.size() == want.size(), "output_error: got has ", got.size(), " elements, want ", want.size());
  OutputError e;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    e.l1 += d;
    e.reference_l1 += std::fabs(static_cast<double>(want[i]));
    if (!std::isnan(e.max_abs) && (std::isnan(d) || d > e.max_abs)) e.max_abs = d;
    if (!std::isfinite(d) && e.first_non_finite < 0) e.first_non_finite = static_cast<std::int64_t>(i);
  }
  e.rel_l1 = e.reference_l1 > 0 ? e.l1 / e.reference_l1 : e.l1;
  return e;
}

/// Σ|got − want| / Σ|want| (output_error's rel_l1).
inline double rel_l1(std::span<const float> got, std::span<const float> want) { return output_error(got, want).rel_l1; }

}  // namespace spattn
