#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/topcdf.hpp"

namespace spattn::test {
namespace {

using V = std::vector<int>;

TEST_CASE("TopCdf hand-computed cases, both crossing modes") {
  const std::vector<float> p = {0.1f, 0.4f, 0.2f, 0.3f};  // order: 1, 3, 2, 0; c = .4 .7 .9 1
  CHECK(top_cdf(p, {0.5f, 1, false}) == V{1});
  CHECK(top_cdf(p, {0.5f, 1, true}) == V{1, 3});
  CHECK(top_cdf(p, {0.75f, 1, false}) == V{1, 3});
  CHECK(top_cdf(p, {0.75f, 1, true}) == V{1, 2, 3});
  CHECK(top_cdf(p, {1.0f, 1, false}) == V{0, 1, 2, 3});
  CHECK(top_cdf(p, {2.0f, 1, true}) == V{0, 1, 2, 3});
}

TEST_CASE("TopCdf ties go to the lower index; mass is relative to the row sum") {
  const std::vector<float> p = {0.25f, 0.25f, 0.25f, 0.25f};
  CHECK(top_cdf(p, {0.5f, 1, false}) == V{0, 1});
  CHECK(top_cdf(p, {0.3f, 1, true}) == V{0, 1});
  const std::vector<float> w = {2.0f, 6.0f, 2.0f};  // unnormalised: Z = 10
  CHECK(top_cdf(w, {0.6f, 1, false}) == V{1});
  CHECK(top_cdf(w, {0.8f, 1, false}) == V{0, 1});
  CHECK(top_cdf(w, {0.61f, 1, true}) == V{0, 1});
}

TEST_CASE("TopCdf min_keep, validity and limits") {
  const std::vector<float> p = {0.5f, 0.3f, 0.2f};
  CHECK(top_cdf(p, {0.0f, 1, false}) == V{0});
  CHECK(top_cdf(p, {0.0f, 0, false}) == V{});
  CHECK(top_cdf(p, {0.0f, 2, false}) == V{0, 1});
  CHECK(top_cdf(p, {0.0f, 9, false}) == V{0, 1, 2});
  const std::vector<std::uint8_t> valid = {0, 1, 1};
  CHECK(top_cdf(p, {1.0f, 1, false}, &valid) == V{1, 2});
  CHECK(top_cdf(p, {0.5f, 5, true}, &valid) == V{1, 2});
  const std::vector<std::uint8_t> none = {0, 0, 0};
  CHECK(top_cdf(p, {0.9f, 3, true}, &none) == V{});
  const std::vector<float> bad = {0.5f, NAN};
  CHECK_THROWS_AS(top_cdf(bad, {0.5f, 1, false}), Error);
  CHECK_THROWS_AS(top_cdf(p, {0.5f, -1, false}), Error);
}

TEST_CASE("TopCdf on random rows: the kept set is the defined prefix") {
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(uniform(0, 300));
    std::vector<float> p(static_cast<std::size_t>(n));
    for (auto& x : p) x = static_cast<float>(std::pow(uniform(0, 1), 4.0));  // skewed, with near-ties
    const float tau = static_cast<float>(uniform(0.0, 1.0));
    for (bool inclusive : {false, true}) {
      const V kept = top_cdf(p, {tau, 1, inclusive});
      REQUIRE(!kept.empty());
      // Every kept value >= every dropped value.
      float min_kept = INFINITY, max_dropped = -INFINITY;
      std::vector<bool> is_kept(static_cast<std::size_t>(n));
      for (int i : kept) is_kept[static_cast<std::size_t>(i)] = true, min_kept = std::min(min_kept, p[i]);
      for (int i = 0; i < n; ++i)
        if (!is_kept[static_cast<std::size_t>(i)]) max_dropped = std::max(max_dropped, p[i]);
      REQUIRE(min_kept >= max_dropped);
      // Mass condition in double (the fp32 definition can differ from it only by rounding).
      double total = std::accumulate(p.begin(), p.end(), 0.0), mass = 0.0;
      for (int i : kept) mass += p[i];
      const double slack = 1e-5 * total;
      if (inclusive) {
        CHECK(mass >= tau * total - slack);
        CHECK(mass - min_kept < tau * total + slack);  // minimal: dropping the smallest kept falls short
      } else if (kept.size() > 1) {
        CHECK(mass <= tau * total + slack);
        if (static_cast<int>(kept.size()) < n) CHECK(mass + max_dropped > tau * total - slack);  // maximal
      }
    }
  }
}

// An independent statement of steps 2, 4-6 (topcdf.hpp) in double and 128-bit integers: the weights by frexp/ldexp
// and floor, the limit by cross-multiplying (c_t >= τ·Z  <=>  c_t · 2^k >= s·Z for τ = s · 2^-k).
int oracle_keep(const std::vector<float>& sorted, float tau, int min_keep, bool inclusive) {
  __extension__ using u128 = unsigned __int128;
  const int n = static_cast<int>(sorted.size());
  if (n == 0) return 0;
  if (tau >= 1.0f) return n;
  int e = 0;
  std::frexp(static_cast<double>(sorted[0]), &e);  // max = f · 2^e, f in [0.5, 1): its leading bit is 2^(e − 1)
  const int scale = sorted[0] == 0.0f ? 0 : 41 - e;
  int k = 0;
  const double f = std::frexp(static_cast<double>(tau), &k);
  const auto s = static_cast<u128>(std::ldexp(f, 24));  // τ = s · 2^(k − 24)
  const int down = 24 - k;
  REQUIRE(down <= 60);
  std::vector<u128> w(sorted.size());
  u128 z = 0;
  for (int t = 0; t < n; ++t) z += w[t] = static_cast<u128>(std::floor(std::ldexp(static_cast<double>(sorted[t]), scale)));
  u128 c = 0;
  for (int t = 0; t < n; ++t) {
    c += w[t];
    const u128 lhs = c << down, rhs = s * z;
    if (inclusive ? lhs >= rhs : lhs > rhs) return clamp_keep(inclusive ? t + 1 : t, n, min_keep);
  }
  return clamp_keep(n, n, min_keep);
}

TEST_CASE("top_cdf_count is the exact fixed-point rule: an independent oracle in double and 128-bit integers") {
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = static_cast<int>(uniform(0, 600));
    std::vector<float> sorted(static_cast<std::size_t>(n));
    // skewed; many exact ties; zeros in the tail; huge and tiny; subnormal; one entry far above the rest
    const int kind = trial % 6;
    for (auto& x : sorted)
      x = kind == 0   ? static_cast<float>(std::pow(uniform(0, 1), 6.0))
          : kind == 1 ? static_cast<float>(std::floor(uniform(0, 4))) / 4.0f
          : kind == 2 ? (uniform(0, 1) < 0.3 ? 0.0f : static_cast<float>(uniform(0, 1)))
          : kind == 3 ? (uniform(0, 1) < 0.05 ? 1.0f : static_cast<float>(uniform(0, 1e-7)))
          : kind == 4 ? static_cast<float>(uniform(0, 1)) * 1e-40f
                      : static_cast<float>(uniform(0, 1)) * (uniform(0, 1) < 0.01 ? 3e5f : 1e-9f);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    for (float tau : {0.0f, static_cast<float>(uniform(1e-6, 1)), 0.5f, 0.9f, 0.999999f, 1.0f, -0.5f})
      for (bool inclusive : {false, true})
        for (int min_keep : {0, 1, 5}) {
          const int want = tau < 0.0f ? clamp_keep(inclusive ? (n > 0 ? 1 : 0) : 0, n, min_keep)
                                      : oracle_keep(sorted, tau, min_keep, inclusive);
          REQUIRE_MESSAGE(top_cdf_count(sorted.data(), n, tau, min_keep, inclusive) == want,
                          "n " << n << " kind " << kind << " tau " << tau << " inclusive " << inclusive);
          ++checked;
        }
  }
  CHECK(checked == 3000 * 7 * 2 * 3);
}

TEST_CASE("TopCdf's fixed-point weights and target on hand-computed values") {
  CHECK(top_cdf_scale(1.0f) == 40);
  CHECK(top_cdf_scale(0.75f) == 41);  // leading bit 2^-1
  CHECK(top_cdf_scale(0.0f) == 0);
  CHECK(top_cdf_weight(1.0f, 40) == (std::uint64_t{1} << 40));
  CHECK(top_cdf_weight(0.75f, 41) == (std::uint64_t{3} << 39));
  CHECK(top_cdf_weight(std::ldexp(1.0f, -41), 40) == 0);  // below the last fraction bit: floor
  CHECK(top_cdf_weight(std::ldexp(3.0f, -41), 40) == 1);
  CHECK(top_cdf_weight(std::numeric_limits<float>::denorm_min(), 40) == 0);
  CHECK(top_cdf_weight(std::numeric_limits<float>::denorm_min(), 149) == 1);
  CHECK(top_cdf_target(0.5f, 10, true) == 5);   // ⌈5⌉
  CHECK(top_cdf_target(0.5f, 10, false) == 6);  // ⌊5⌋ + 1
  CHECK(top_cdf_target(0.5f, 11, true) == 6);   // ⌈5.5⌉
  CHECK(top_cdf_target(0.5f, 11, false) == 6);  // ⌊5.5⌋ + 1
  CHECK(top_cdf_target(0.0f, 11, true) == 0);
  CHECK(top_cdf_target(0.0f, 11, false) == 1);
  CHECK(top_cdf_target(-1.0f, 11, false) == 0);
  CHECK(top_cdf_target(1e-40f, 11, true) == 1);  // τ subnormal: τZ tiny but positive
  const std::uint64_t big = ~std::uint64_t{0} >> 1;
  CHECK(top_cdf_target(0.5f, big, true) == (big >> 1) + 1);
  const std::vector<float> far = {1.0f, std::ldexp(1.0f, -45), std::ldexp(1.0f, -45)};  // weight 0 below 2^-40
  CHECK(top_cdf(far, {0.999999f, 1, true}) == V{0});
  const std::vector<float> bad = {0.5f, INFINITY}, negative = {0.5f, -0.1f};
  CHECK_THROWS_AS(top_cdf(bad, {0.5f, 1, false}), Error);
  CHECK_THROWS_AS(top_cdf(negative, {0.5f, 1, false}), Error);
}

TEST_CASE("selection keys order exactly as selection_before, and give back their weight and index") {
  // Weights with ties, zeros, subnormals, large values and infinity; signed values with ±0 and both signs.
  std::vector<float> w = {0.0f, 0.0f, 1.0f, 1.0f, 0.5f, 1e-40f, 3e38f, INFINITY, 2.0f, 0.25f};
  for (int i = 0; i < 300; ++i) w.push_back(static_cast<float>(std::pow(uniform(0, 1), 3.0)));
  std::vector<float> sv = {0.0f, -0.0f, -1.0f, 1.0f, -1.0f, -INFINITY, INFINITY, -3e38f, -1e-40f, 1e-40f};
  for (int i = 0; i < 300; ++i) sv.push_back(static_cast<float>(uniform(-4, 4)));
  for (std::size_t a = 0; a < w.size(); ++a)
    for (std::size_t b = 0; b < w.size(); ++b) {
      const int ia = static_cast<int>(a), ib = static_cast<int>(b);
      REQUIRE((selection_key(w[a], ia) < selection_key(w[b], ib)) == selection_before(w[a], ia, w[b], ib));
      REQUIRE(selection_key(w[a], ia) < kNoSelectionKey);
      REQUIRE((signed_selection_key(sv[a], ia) < signed_selection_key(sv[b], ib)) == selection_before(sv[a], ia, sv[b], ib));
      REQUIRE(signed_selection_key(sv[a], ia) < kNoSelectionKey);
    }
  for (std::size_t a = 0; a < w.size(); ++a) {
    const std::uint64_t key = selection_key(w[a], static_cast<int>(a));
    CHECK(float_to_bits(selection_key_weight(key)) == float_to_bits(w[a]));
    CHECK(selection_key_index(key) == static_cast<int>(a));
  }
}

}  // namespace
}  // namespace spattn::test
