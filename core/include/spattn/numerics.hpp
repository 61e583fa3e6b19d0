// Numerics shared by every backend: fp16/bf16 <-> fp32 with exact round-to-nearest-even, exp2/log2 that
// give identical bits on CPU and GPU, and fixed-order sums.
//
// Why our own exp2/log2: libm, CUDA's exp2f and HIP's differ in the last bits, so a threshold decision
// (TopCdf, SALE's τ test) could flip between backends. These use only IEEE add/sub/mul/div and explicit
// fma — operations that are correctly rounded everywhere — so every backend gets the same bits. Build
// host code with -ffp-contract=off (CMake does) so no other a*b+c is fused.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "spattn/config.hpp"

namespace spattn {

SPATTN_INLINE std::uint32_t float_to_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

SPATTN_INLINE float bits_to_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// Rounding to the nearest integer (ties to even) by the magic number 1.5·2²³: for |x| < 2²², x + kRoundMagic lies in
/// [2²³, 2²⁴), where the float spacing is 1, so its rounded sum is RNE(x) + 1.5·2²³ exactly; RNE(x) is that sum minus
/// kRoundMagic (exact), and magic_int reads it from the sum's bits. The one definition of the trick: exp2_det's
/// exponent, SALE's certified rounding (round_certified) and its folded bias.
inline constexpr float kRoundMagic = 12582912.0f;
SPATTN_INLINE std::int32_t magic_int(float sum) {
  return static_cast<std::int32_t>(float_to_bits(sum) - 0x4B400000u);
}

/// Set bits of a 64-bit word (a bitset row's popcount, FG-Attn's XOR distance).
SPATTN_INLINE int popcount64(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __popcll(x);
#else
  return __builtin_popcountll(x);  // GCC and Clang, host and HIP device code
#endif
}

/// IEEE binary16 stored as its bit pattern.
struct half_t {
  std::uint16_t bits;
};
/// bfloat16 (the top 16 bits of a binary32) stored as its bit pattern.
struct bfloat16_t {
  std::uint16_t bits;
};

/// fp32 -> fp16, round to nearest even; overflow -> ±inf, NaN stays NaN (quiet, payload kept where it fits).
SPATTN_INLINE std::uint16_t f32_to_f16_bits(float f) {
  const std::uint32_t x = float_to_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u |
                                      (ax > 0x7f800000u ? (0x200u | ((ax >> 13) & 0x3ffu)) : 0u));
  }
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {  // normal fp16 (>= 2^-14): drop 13 mantissa bits with RNE, rebias 127 -> 15
    const std::uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (ax <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25 rounds to ±0 (tie to even)
  // fp16 subnormal: value = m * 2^(e-150); in units of 2^-24 that is m >> (126 - e), rounded to even.
  const std::uint32_t e = ax >> 23;
  const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - e;  // 14 ... 24
  std::uint32_t q = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

/// fp16 -> fp32, exact (every fp16 value, subnormals, inf and NaN included, is representable).
SPATTN_INLINE float f16_bits_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t e = (h >> 10) & 0x1fu;
  std::uint32_t m = h & 0x3ffu;
  if (e == 0x1fu) return bits_to_float(sign | 0x7f800000u | (m << 13));
  if (e == 0u) {
    if (m == 0u) return bits_to_float(sign);
    e = 113u;  // normalise the subnormal: value = m * 2^-24
    while ((m & 0x400u) == 0u) {
      m <<= 1;
      --e;
    }
    return bits_to_float(sign | (e << 23) | ((m & 0x3ffu) << 13));
  }
  return bits_to_float(sign | ((e + 112u) << 23) | (m << 13));
}

/// fp32 -> bf16, round to nearest even; NaN stays a quiet NaN.
SPATTN_INLINE std::uint16_t f32_to_bf16_bits(float f) {
  const std::uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

SPATTN_INLINE float bf16_bits_to_f32(std::uint16_t b) {
  return bits_to_float(static_cast<std::uint32_t>(b) << 16);
}

SPATTN_INLINE float to_float(float x) { return x; }
SPATTN_INLINE float to_float(half_t x) { return f16_bits_to_f32(x.bits); }
SPATTN_INLINE float to_float(bfloat16_t x) { return bf16_bits_to_f32(x.bits); }

template <class T>
SPATTN_INLINE T from_float(float x);
template <>
SPATTN_INLINE float from_float<float>(float x) {
  return x;
}
template <>
SPATTN_INLINE half_t from_float<half_t>(float x) {
  return half_t{f32_to_f16_bits(x)};
}
template <>
SPATTN_INLINE bfloat16_t from_float<bfloat16_t>(float x) {
  return bfloat16_t{f32_to_bf16_bits(x)};
}

/// Rounds an fp32 value to the nearest value of T and back (what storing in T does to it).
template <class T>
SPATTN_INLINE float round_to(float x) {
  return to_float(from_float<T>(x));
}

SPATTN_INLINE float fma_f32(float a, float b, float c) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// 2^x in fp32 with identical bits on every backend (max error ≈ 1 ulp against the exact value).
/// 2^x = 2^n · 2^r with n = rint(x), r ∈ [-0.5, 0.5], 2^r by a degree-7 Taylor polynomial in r·ln2
/// (truncation 5e-9 relative) evaluated by fma Horner, then 2^n applied as two exact power-of-two
/// factors (so subnormal results are rounded once). Written with selects only, no branches, so a CPU
/// compiler vectorizes loops over it; x < -151 gives 0, x >= 128 gives +inf, NaN stays NaN.
SPATTN_INLINE float exp2_det(float x) {
  float xc = x < -151.0f ? -151.0f : x;
  xc = xc > 128.0f ? 128.0f : xc;
  const float t = xc + kRoundMagic;  // n = RNE(xc)
  const float n = t - kRoundMagic;
  const float r = xc - n;  // exact, in [-0.5, 0.5]
  // c_k = ln2^k / k!
  float p = 1.52527338e-5f;
  p = fma_f32(p, r, 1.54035304e-4f);
  p = fma_f32(p, r, 1.33335581e-3f);
  p = fma_f32(p, r, 9.61812911e-3f);
  p = fma_f32(p, r, 5.55041087e-2f);
  p = fma_f32(p, r, 2.40226507e-1f);
  p = fma_f32(p, r, 6.93147181e-1f);
  p = fma_f32(p, r, 1.0f);
  // n read from t's mantissa (no float -> int conversion, which is undefined for NaN).
  const std::int32_t ni = magic_int(t);
  const std::int32_t a = ni >> 1;  // ni ∈ [-151, 128] → a, ni - a ∈ [-76, 64]: both normal powers of two
  const std::int32_t b = ni - a;
  const float result = (p * bits_to_float(static_cast<std::uint32_t>(a + 127) << 23)) *
                       bits_to_float(static_cast<std::uint32_t>(b + 127) << 23);
  const float out = x < -151.0f ? 0.0f : result;
  return x != x ? x : out;
}

/// 2^x for the executor's softmax weights only — never for a decision. Executor outputs are compared
/// across backends with a tolerance (DESIGN.md §5.4), and there the exponential is the hot spot: on a GPU
/// this is the hardware approximation (ex2.approx.ftz, ≤ 2 ulp, subnormal results flushed to 0), 1.5× the
/// executor throughput of exp2_det on an H100 (bench/results/cuda-executor.md); on the host it is exp2_det.
SPATTN_INLINE float exp2_fast(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2_det(x);
#endif
}

/// The two exponentials as policy types, for code that is written once for both.
struct Exp2Det {
  SPATTN_HD float operator()(float x) const { return exp2_det(x); }
};
struct Exp2Fast {
  SPATTN_HD float operator()(float x) const { return exp2_fast(x); }
};

/// log2(x) in fp32 with identical bits on every backend (max error ≈ 3 ulp, measured near x = 1).
/// x = 2^e · m with m ∈ [√½, √2); log2 m = (2/ln2)·atanh(s), s = (m-1)/(m+1), odd series up to s^9.
SPATTN_INLINE float log2_det(float x) {
  if (!(x == x)) return x;
  if (x < 0.0f) return bits_to_float(0x7fc00000u);
  if (x == 0.0f) return bits_to_float(0xff800000u);  // -inf
  std::uint32_t u = float_to_bits(x);
  if (u == 0x7f800000u) return x;  // +inf
  int e = 0;
  if (u < 0x00800000u) {  // subnormal: scale into the normal range (exact)
    u = float_to_bits(x * 0x1p23f);
    e = -23;
  }
  e += static_cast<int>(u >> 23) - 127;
  float m = bits_to_float((u & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m *= 0.5f;
    ++e;
  }
  const float s = (m - 1.0f) / (m + 1.0f);
  const float z = s * s;
  // c_k = 2 / (k ln2), k = 1, 3, ..., 9
  float p = 3.20598898e-1f;
  p = fma_f32(p, z, 4.12198583e-1f);
  p = fma_f32(p, z, 5.77078016e-1f);
  p = fma_f32(p, z, 9.61796694e-1f);
  p = fma_f32(p, z, 2.88539008e+0f);
  return fma_f32(s, p, static_cast<float>(e));
}

/// Left-to-right fp32 sum: the order every backend uses where a sum feeds a decision.
SPATTN_INLINE float sum_sequential(const float* x, long long n) {
  float s = 0.0f;
  for (long long i = 0; i < n; ++i) s += x[i];
  return s;
}

/// Fixed-order fp32 sum that vectorizes: eight interleaved running sums (lane j takes x[j], x[j+8], …),
/// combined as ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)). Used where a sum is hot and feeds no decision.
SPATTN_INLINE float sum_lanes8(const float* x, int n) {
  float lane[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int k = 0;
  for (; k + 8 <= n; k += 8)
    for (int j = 0; j < 8; ++j) lane[j] += x[k + j];
  for (int j = 0; j < 8 && k < n; ++k, ++j) lane[j] += x[k];  // at most 7: k + 8 > n here
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/// Lane j (0 <= j < 8) of dot_lanes8: the fma chain over a[k]·b[k] for k ≡ j (mod 8), k < n, k increasing. b's
/// entries lie ldb floats apart (a GPU reading many b vectors stored column-wise).
SPATTN_INLINE float dot_lane(const float* a, const float* b, int n, int j, long long ldb = 1) {
  float s = 0.0f;
  for (int k = j; k < n; k += 8) s = fma_f32(a[k], b[k * ldb], s);
  return s;
}
/// How dot_lanes8 combines its lanes: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) (a GPU: three xor-shuffle
/// adds over 8 lanes, bitwise the same since fp32 addition commutes).
SPATTN_INLINE float combine_lanes8(const float* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
/// Fixed-order fp32 dot product: 8 dot_lane chains combined by combine_lanes8. For estimator scores, where every
/// backend must use the same order.
SPATTN_INLINE float dot_lanes8(const float* a, const float* b, int n, long long ldb = 1) {
  float lane[8];
  for (int j = 0; j < 8; ++j) lane[j] = dot_lane(a, b, n, j, ldb);
  return combine_lanes8(lane);
}

/// R × K left-to-right fp32 dot products with fma, out[r][k] = a_r · b_k with a_r = a + r·lda, b_k = b + k·ldb:
/// s = fma(a_r[i], b_k[i], s) for i = 0 … n-1 (b_k's entries b_step floats apart). Each chain is dot_sequential's (the
/// same bits); a GPU runs R·K of them in lockstep so that one load of a_r[i] / b_k[i] serves K / R chains and their
/// latencies overlap.
template <int R, int K>
SPATTN_INLINE void dot_sequential_block(const float* a, long long lda, const float* b, long long ldb, long long n,
                                        float (&out)[R][K], long long b_step = 1) {
  for (int r = 0; r < R; ++r)
    for (int k = 0; k < K; ++k) out[r][k] = 0.0f;
  for (long long i = 0; i < n; ++i) {
    float av[R], bv[K];
    for (int r = 0; r < R; ++r) av[r] = a[r * lda + i];
    for (int k = 0; k < K; ++k) bv[k] = b[k * ldb + i * b_step];
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < K; ++k) out[r][k] = fma_f32(av[r], bv[k], out[r][k]);
  }
}

/// Left-to-right fp32 dot product with fma: s = fma(a[i], b[i], s) for i = 0 … n-1 (b's entries b_step floats apart).
SPATTN_INLINE float dot_sequential(const float* a, const float* b, long long n, long long b_step = 1) {
  float s[1][1];
  dot_sequential_block<1, 1>(a, 0, b, 0, n, s, b_step);
  return s[0][0];
}

}  // namespace spattn
