// spattn/metrics.hpp: rel L1 and max abs of an output against a reference, on values whose sums are exact in fp64
// (so the expected numbers are exact), the order of the fp64 sums (bit-identical to the loops the callers wrote by hand
// before), an all-zero reference, and NaN / infinity, which must never hide.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common.hpp"
#include "spattn/metrics.hpp"

namespace spattn::test {
namespace {

TEST_CASE("metrics: rel L1 = Σ|got − want| / Σ|want|, max abs, on exact values") {
  const std::vector<float> want = {1.0f, -2.0f, 4.0f, 0.5f}, got = {1.5f, -2.0f, 3.0f, -0.5f};
  const OutputError e = output_error(got, want);
  CHECK(e.l1 == 2.5);            // 0.5 + 0 + 1 + 1
  CHECK(e.reference_l1 == 7.5);  // 1 + 2 + 4 + 0.5
  CHECK(e.rel_l1 == 2.5 / 7.5);
  CHECK(e.max_abs == 1.0);
  CHECK(e.first_non_finite == -1);
  CHECK(rel_l1(got, want) == e.rel_l1);
  CHECK(output_error(want, want).rel_l1 == 0.0);
}

TEST_CASE("metrics: an all-zero reference gives the absolute error; sizes must match") {
  const std::vector<float> zero(3, 0.0f), got = {0.25f, -0.5f, 0.0f};
  const OutputError e = output_error(got, zero);
  CHECK(e.reference_l1 == 0.0);
  CHECK(e.rel_l1 == 0.75);
  CHECK(e.max_abs == 0.5);
  CHECK(output_error(zero, zero).rel_l1 == 0.0);
  CHECK_THROWS_AS(output_error(got, std::vector<float>(2, 0.0f)), Error);
}

TEST_CASE("metrics: NaN and infinity are never hidden") {
  const std::vector<float> want = {1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> got = want;
  got[1] = NAN;
  got[2] = 100.0f;  // a larger finite error after the NaN must not replace it in max_abs
  OutputError e = output_error(got, want);
  CHECK(std::isnan(e.l1));
  CHECK(std::isnan(e.rel_l1));
  CHECK(std::isnan(e.max_abs));
  CHECK(e.first_non_finite == 1);
  CHECK_FALSE(e.rel_l1 < 1.0);  // a threshold check fails
  got = want;
  got[3] = INFINITY;
  got[0] = NAN;  // the first non-finite element is reported
  e = output_error(got, want);
  CHECK(e.first_non_finite == 0);
  CHECK(std::isnan(e.max_abs));
  got = want;
  got[2] = -INFINITY;
  e = output_error(got, want);
  CHECK(std::isinf(e.l1));
  CHECK(std::isinf(e.max_abs));
  CHECK(e.first_non_finite == 2);
}

// The definition's order: one sequential fp64 sum of each quantity in element order. On random fp32 values of
// magnitudes 1e-6 … 1e3 (where the fp64 sums round) the results are the bits of the loop the callers wrote by hand.
TEST_CASE("metrics: fp64 sums in element order (the callers' loops, bit for bit)") {
  std::vector<float> got(100003), want(got.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    want[i] = static_cast<float>(uniform(-1.0, 1.0) * std::pow(10.0, uniform(-6.0, 3.0)));
    got[i] = want[i] + static_cast<float>(uniform(-1e-2, 1e-2));
  }
  double diff = 0, norm = 0, max_abs = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(double(got[i]) - want[i]);
    diff += d;
    norm += std::fabs(double(want[i]));
    max_abs = std::max(max_abs, d);
  }
  const OutputError e = output_error(got, want);
  const double want_rel = diff / norm;
  CHECK(std::memcmp(&e.l1, &diff, sizeof(double)) == 0);
  CHECK(std::memcmp(&e.reference_l1, &norm, sizeof(double)) == 0);
  CHECK(std::memcmp(&e.rel_l1, &want_rel, sizeof(double)) == 0);
  CHECK(e.max_abs == max_abs);
}

}  // namespace
}  // namespace spattn::test
