// fp16/bf16 conversions against independent oracles (the compiler's _Float16, a double-precision
// nearest-value search for bf16), and exp2/log2 against libm in double.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common.hpp"
#include "spattn/numerics.hpp"

namespace spattn::test {
namespace {

float f16_oracle(std::uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

std::uint16_t f16_round_oracle(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  std::uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

/// Nearest bf16 of x by exhaustive comparison of the two bracketing candidates in double, ties to even.
std::uint16_t bf16_round_oracle(float x) {
  const std::uint32_t u = float_to_bits(x);
  const auto lo = static_cast<std::uint16_t>(u >> 16);
  const auto hi = static_cast<std::uint16_t>(lo + 1);
  const double dx = x, dlo = bf16_bits_to_f32(lo);
  const double dhi = (hi & 0x7f80) == 0x7f80 && (lo & 0x7fff) == 0x7f7f
                         ? std::ldexp(1.0, 128) * (x < 0 ? -1 : 1)  // rounding up overflows to inf
                         : static_cast<double>(bf16_bits_to_f32(hi));
  const double elo = std::fabs(dx - dlo), ehi = std::fabs(dhi - dx);
  if (elo < ehi) return lo;
  if (ehi < elo) return hi;
  return (lo & 1) == 0 ? lo : hi;
}

std::uint32_t random_bits() { return static_cast<std::uint32_t>(rng()()); }

TEST_CASE("fp16 -> fp32 is exact for all 65536 patterns") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float got = f16_bits_to_f32(h), want = f16_oracle(h);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
      CHECK(f32_to_f16_bits(got) == (h | 0x200));  // quiet NaN, payload kept
    } else {
      REQUIRE(float_to_bits(got) == float_to_bits(want));
      REQUIRE(f32_to_f16_bits(got) == h);  // round trip
    }
  }
}

TEST_CASE("fp32 -> fp16 rounds to nearest even like the hardware conversion") {
  const float edges[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f, 2.98023224e-8f,
                         2.98023259e-8f, 5.96046448e-8f, 6.10351562e-5f, 6.1e-5f, 1.0f + 0x1p-11f,
                         1.0f + 0x1p-11f + 0x1p-23f, INFINITY, -INFINITY, 3e38f, -1e-45f};
  for (float x : edges) {
    CAPTURE(x);
    CHECK(f32_to_f16_bits(x) == f16_round_oracle(x));
  }
  for (int i = 0; i < 2000000; ++i) {
    const float x = bits_to_float(random_bits());
    if (std::isnan(x)) {
      CHECK(std::isnan(f16_bits_to_f32(f32_to_f16_bits(x))));
      continue;
    }
    const std::uint16_t got = f32_to_f16_bits(x), want = f16_round_oracle(x);
    if (got != want) {
      CAPTURE(x);
      REQUIRE(got == want);
    }
  }
  // Dense sweep over the fp16 subnormal and small-normal range, where the rounding code branches.
  for (std::uint32_t u = 0x32000000u; u < 0x39000000u; u += 37) {
    const float x = bits_to_float(u);
    REQUIRE(f32_to_f16_bits(x) == f16_round_oracle(x));
  }
}

TEST_CASE("fp32 -> bf16 rounds to nearest even; bf16 -> fp32 is exact") {
  CHECK(f32_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(f32_to_bf16_bits(bits_to_float(0x3f808000u)) == 0x3f80);  // tie -> even
  CHECK(f32_to_bf16_bits(bits_to_float(0x3f818000u)) == 0x3f82);  // tie -> even (up)
  CHECK(f32_to_bf16_bits(bits_to_float(0x7f7fffffu)) == 0x7f80);  // overflow -> inf
  CHECK(f32_to_bf16_bits(-INFINITY) == 0xff80);
  CHECK(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(NAN))));
  CHECK(f32_to_bf16_bits(bits_to_float(0x00000001u)) == 0x0000);  // smallest subnormal rounds to 0
  for (int i = 0; i < 2000000; ++i) {
    const float x = bits_to_float(random_bits());
    if (std::isnan(x)) continue;
    const std::uint16_t got = f32_to_bf16_bits(x);
    if (got != bf16_round_oracle(x)) {
      CAPTURE(x);
      REQUIRE(got == bf16_round_oracle(x));
    }
  }
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float x = bf16_bits_to_f32(static_cast<std::uint16_t>(b));
    REQUIRE(float_to_bits(x) == (b << 16));
  }
}

double ulp_of(double value) {
  const float f = static_cast<float>(value);
  const float next = std::nextafter(std::fabs(f), std::numeric_limits<float>::infinity());
  return static_cast<double>(next) - std::fabs(static_cast<double>(f));
}

TEST_CASE("exp2_det is within 1 ulp of 2^x and exact on integers and special values") {
  for (int k = -149; k <= 127; ++k) REQUIRE(exp2_det(static_cast<float>(k)) == static_cast<float>(std::ldexp(1.0, k)));
  CHECK(exp2_det(-INFINITY) == 0.0f);
  CHECK(exp2_det(-151.5f) == 0.0f);
  CHECK(exp2_det(INFINITY) == INFINITY);
  CHECK(exp2_det(128.0f) == INFINITY);
  CHECK(std::isnan(exp2_det(NAN)));
  double worst = 0.0;
  for (int i = 0; i < 1000000; ++i) {
    const float x = static_cast<float>(uniform(-149.0, 127.9));
    const double want = std::exp2(static_cast<double>(x));
    worst = std::max(worst, std::fabs(exp2_det(x) - want) / ulp_of(want));
  }
  CAPTURE(worst);
  CHECK(worst <= 1.0);
}

TEST_CASE("log2_det is within 3 ulp of log2 x and exact on powers of two") {
  for (int k = -149; k <= 127; ++k) REQUIRE(log2_det(static_cast<float>(std::ldexp(1.0, k))) == static_cast<float>(k));
  CHECK(log2_det(0.0f) == -INFINITY);
  CHECK(log2_det(INFINITY) == INFINITY);
  CHECK(std::isnan(log2_det(-1.0f)));
  CHECK(std::isnan(log2_det(NAN)));
  double worst = 0.0;
  for (int i = 0; i < 1000000; ++i) {
    const float x = static_cast<float>(std::exp2(uniform(-140.0, 127.0)));
    const double want = std::log2(static_cast<double>(x));
    if (want == 0.0) continue;
    worst = std::max(worst, std::fabs(log2_det(x) - want) / ulp_of(want));
  }
  CAPTURE(worst);
  CHECK(worst <= 3.0);
}

TEST_CASE("fixed-order sums follow their documented order") {
  const float x[] = {1e8f, 1.0f, -1e8f, 1.0f};
  CHECK(sum_sequential(x, 4) == 1.0f);  // ((1e8 + 1) - 1e8) + 1: the first 1 is absorbed
  // Lanes: l0 = 1e8, l1 = 1, l2 = -1e8, l3 = 1 -> (1e8 + 1) + (-1e8 + 1) = 1e8 - 1e8 = 0 in fp32.
  CHECK(sum_lanes8(x, 4) == 0.0f);
  float y[20];
  for (int i = 0; i < 20; ++i) y[i] = static_cast<float>(i + 1);
  CHECK(sum_lanes8(y, 20) == 210.0f);
  const float a[] = {1.0f, 2.0f, 3.0f}, b[] = {4.0f, 5.0f, 6.0f};
  CHECK(dot_sequential(a, b, 3) == 32.0f);
}

}  // namespace
}  // namespace spattn::test
