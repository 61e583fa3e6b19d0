// Online softmax in base 2: the state (m, l, acc) of one query row, and the three operations every backend
// performs on it. One definition: the reference, Kokkos and CUDA code call these same inline functions, so
// the per-element arithmetic (which exp2, which fma, which order) is the same everywhere.
//
// Scores enter in base 2: x = s · scale · log2(e), formed as s * scale_log2(scale) (one fp32 multiply
// with the constant below), so exp(scale·s) = 2^x. A masked score is -inf and contributes exactly 0.
#pragma once

#include <cmath>

#include "spattn/config.hpp"
#include "spattn/numerics.hpp"

namespace spattn {

inline constexpr float kLog2e = 1.44269504088896340736f;
inline constexpr float kLn2 = 0.69314718055994530942f;

/// The base-2 score multiplier of a softmax scale.
SPATTN_INLINE float scale_log2(float softmax_scale) { return softmax_scale * kLog2e; }

/// Running max m (base 2) and running sum l = Σ 2^(x - m) of one row; acc (Σ 2^(x - m)·v) lives with the
/// caller, who rescales it by the factor update() returns.
struct SoftmaxState {
  float m = -INFINITY;
  float l = 0.0f;
};

/// 2^(m_old - m_new), defined as 1 when the max did not move (which covers m_old = m_new = -inf).
/// Exp2 is Exp2Det (the default, bit-identical everywhere) or Exp2Fast (GPU executors, numerics.hpp).
template <class Exp2 = Exp2Det>
SPATTN_INLINE float softmax_rescale(float m_old, float m_new, Exp2 exp2 = {}) {
  return m_old == m_new ? 1.0f : exp2(m_old - m_new);
}

/// 2^(x - m) for a score under running max m; a masked score (-inf) gives exactly 0.
template <class Exp2 = Exp2Det>
SPATTN_INLINE float softmax_weight(float x, float m, Exp2 exp2 = {}) {
  return x == -INFINITY ? 0.0f : exp2(x - m);
}

struct OnlineSoftmax {
  /// Folds n base-2 scores x[0..n) into the state. Writes the weights p[k] = 2^(x[k] - m_new) and returns
  /// the factor alpha by which the caller must scale acc before adding Σ p[k]·v[k]:
  ///   m_new = max(m, max_k x[k]);  alpha = 2^(m - m_new);  l = fma(l, alpha, sum_lanes8(p)).
  /// Exp2 as softmax_rescale's: Exp2Det (default) or Exp2Fast (a GPU executor's weights, never a decision).
  template <class Exp2 = Exp2Det>
  SPATTN_HD static float update(SoftmaxState& state, const float* x, int n, float* p, Exp2 exp2 = {}) {
    float tile_max = -INFINITY;
    for (int k = 0; k < n; ++k) tile_max = x[k] > tile_max ? x[k] : tile_max;
    const float m_new = tile_max > state.m ? tile_max : state.m;
    const float alpha = softmax_rescale(state.m, m_new, exp2);
    for (int k = 0; k < n; ++k) p[k] = softmax_weight(x[k], m_new, exp2);
    state.l = fma_f32(state.l, alpha, sum_lanes8(p, n));
    state.m = m_new;
    return alpha;
  }

  /// Merges state b (with accumulator acc_b) into a (acc_a), both of length dv:
  ///   m = max(m_a, m_b); l = fma(l_a, α_a, l_b·α_b); acc_a[d] = fma(acc_a[d], α_a, acc_b[d]·α_b).
  SPATTN_HD static void merge(SoftmaxState& a, float* acc_a, const SoftmaxState& b, const float* acc_b,
                              int dv) {
    const float m = a.m > b.m ? a.m : b.m;
    const float alpha_a = softmax_rescale(a.m, m);
    const float alpha_b = softmax_rescale(b.m, m);
    a.l = fma_f32(a.l, alpha_a, b.l * alpha_b);
    for (int d = 0; d < dv; ++d) acc_a[d] = fma_f32(acc_a[d], alpha_a, acc_b[d] * alpha_b);
    a.m = m;
  }

  /// out[d] = acc[d] · (1 / l); a row that saw no key (l = 0) outputs zeros. Returns the row's log-sum-exp
  /// in base 2 (m + log2 l; -inf for an empty row): natural LSE = returned value · ln 2.
  SPATTN_HD static float finalize(const SoftmaxState& state, const float* acc, int dv, float* out) {
    if (!(state.l > 0.0f)) {
      for (int d = 0; d < dv; ++d) out[d] = state.l == state.l ? 0.0f : state.l;  // NaN propagates
      return state.l == state.l ? -INFINITY : state.l;
    }
    const float inv_l = 1.0f / state.l;
    for (int d = 0; d < dv; ++d) out[d] = acc[d] * inv_l;
    return state.m + log2_det(state.l);
  }
};

}  // namespace spattn
