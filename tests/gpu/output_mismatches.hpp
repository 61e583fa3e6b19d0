// Outputs of a GPU kernel against the reference's, element by element, within the tolerance of the input dtype (the
// GPU tests outside the shared tables: PV-skip cases, plans, graphs, sparse_attention on device tensors).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "spattn/tensor.hpp"

namespace spattn::test {

/// Output elements of `got` outside the dtype tolerance of `want` (NaN counts: outputs are poisoned first);
/// `worst` receives the largest finite error. P is rounded to the input dtype before P·V on the GPU (as
/// every flash kernel does): the tolerance is that rounding's.
inline std::int64_t mismatches(const HostTensor& got, const HostTensor& want, DType input, double& worst) {
  const double tol = input == DType::bf16 ? 2e-2 : 3e-3;
  std::int64_t bad = 0;
  worst = 0;
  const auto a = got.to_float(), b = want.to_float();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(double(a[i]) - double(b[i]));
    if (!(err <= tol * (1.0 + std::fabs(double(b[i]))))) ++bad;
    if (std::isfinite(err)) worst = std::max(worst, err);
  }
  return bad;
}

}  // namespace spattn::test
