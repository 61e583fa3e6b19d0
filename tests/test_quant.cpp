// INT8 quantization (core/include/spattn/quant.hpp) and the executor's quantized compute mode, checked
// against integer arithmetic done independently in the test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "common.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"
#include "spattn/quant.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace spattn::test {
namespace {

// The tests' own int8 operands from the core's primitives (int8_block_scale, int8_code), independent of the
// reference's make_quant. Rows are [n × d] floats.

/// The rows of head h of t as [n × d] floats.
std::vector<float> head_rows(const HostTensor& t, std::int64_t h) {
  const std::int64_t d = t.dim();
  std::vector<float> r(static_cast<std::size_t>(t.seqlen() * d));
  for (std::int64_t i = 0; i < t.seqlen(); ++i)
    for (std::int64_t e = 0; e < d; ++e) r[static_cast<std::size_t>(i * d + e)] = t.get(0, h, i, e);
  return r;
}

/// Per row of x: the scale of its block of `block` rows (the last block may be shorter), int8_block_scale of its amax.
std::vector<float> block_scales(const std::vector<float>& x, std::int64_t d, std::int64_t block) {
  const auto n = static_cast<std::int64_t>(x.size()) / d;
  std::vector<float> scale(static_cast<std::size_t>(n));
  for (std::int64_t b0 = 0; b0 < n; b0 += block) {
    const std::int64_t b1 = std::min(b0 + block, n);
    float amax = 0;
    for (auto i = static_cast<std::size_t>(b0 * d); i < static_cast<std::size_t>(b1 * d); ++i) amax = std::max(amax, std::fabs(x[i]));
    std::fill(scale.begin() + b0, scale.begin() + b1, int8_block_scale(amax));
  }
  return scale;
}

/// The codes of x, row i under scale[i].
std::vector<std::int32_t> int8_codes(const std::vector<float>& x, std::int64_t d, const std::vector<float>& scale) {
  std::vector<std::int32_t> c(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) c[i] = int8_code(x[i], scale[i / static_cast<std::size_t>(d)]);
  return c;
}

TEST_CASE("int8 codes: round half away from zero, clamp, exact near .5, NaN to 0") {
  CHECK(int8_code(2.5f, 1.0f) == 3);
  CHECK(int8_code(-2.5f, 1.0f) == -3);
  CHECK(int8_code(0.49999997f, 1.0f) == 0);  // floor(t + 0.5) would give 1
  CHECK(int8_code(1000.0f, 1.0f) == 127);
  CHECK(int8_code(-1000.0f, 1.0f) == -127);
  CHECK(int8_code(NAN, 1.0f) == 0);
  const float delta = int8_block_scale(2.54f);  // 0.02 + 1e-7
  CHECK(delta == 2.54f / 127.0f + 1e-7f);
  CHECK(int8_code(2.54f, delta) == 127);  // |x / δ| < 127 thanks to the 1e-7
  CHECK(int8_code(-2.54f, delta) == -127);
  CHECK(int8_code(1.27f, delta) == 63);   // 63.4997…
  CHECK(int8_code(0.0f, int8_block_scale(0.0f)) == 0);
}

TEST_CASE("int8 mode = softmax of the exactly dequantized integer scores (fp64 reference)") {
  Problem p;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.seqlen_q = 150;
  p.seqlen_kv = 200;
  p.head_dim = 64;
  p.causal = true;
  HostTensor q(DType::f32, 1, 2, 150, 64), k(DType::f32, 1, 1, 200, 64), v(DType::f32, 1, 1, 200, 64);
  fill_random(q, 2.0);
  fill_random(k, 2.0);
  fill_random(v);
  for (std::int64_t j = 0; j < 200; ++j) k.set(0, 0, j, 5, k.get(0, 0, j, 5) + 3.0f);  // a mean to smooth away
  AttendOptions opt;
  opt.qk_int8 = true;
  opt.quant_block_q = 64;
  opt.quant_block_k = 32;
  HostTensor o(DType::f32, 1, 2, 150, 64);
  o.poison();
  const TileMask mask = TileMask::dense(MaskShape::of(p, 64, 32));
  attend(p, q.view(), k.view(), v.view(), mask, o.view(), opt);

  // Independent construction: K' = K − mean (f32), block amax scales, codes, int64 dot products.
  std::vector<float> mean(64, 0.0f);
  for (std::int64_t j = 0; j < 200; ++j)
    for (int e = 0; e < 64; ++e) mean[static_cast<std::size_t>(e)] += k.get(0, 0, j, e);
  for (auto& m : mean) m /= 200.0f;
  std::vector<float> ks = head_rows(k, 0);
  for (std::size_t i = 0; i < ks.size(); ++i) ks[i] -= mean[i % 64];
  const std::vector<float> dk = block_scales(ks, 64, 32);
  const std::vector<std::int32_t> ck = int8_codes(ks, 64, dk);
  const double c0 = double(scale_log2(p.softmax_scale()));
  for (std::int64_t h = 0; h < 2; ++h) {
    const std::vector<float> qs = head_rows(q, h), dq = block_scales(qs, 64, 64);
    const std::vector<std::int32_t> cq = int8_codes(qs, 64, dq);
    for (std::int64_t i = 0; i < 150; i += 7) {
      std::vector<double> x;
      const std::int64_t visible = i + 50 + 1;
      for (std::int64_t j = 0; j < visible; ++j) {
        std::int64_t acc = 0;
        for (int e = 0; e < 64; ++e) acc += std::int64_t{cq[static_cast<std::size_t>(i * 64 + e)]} * ck[static_cast<std::size_t>(j * 64 + e)];
        const auto si = static_cast<std::size_t>(i), sj = static_cast<std::size_t>(j);
        x.push_back(double(acc) * double(float(c0) * (dq[si] * dk[sj])));
      }
      const double mx = *std::max_element(x.begin(), x.end());
      double l = 0;
      std::vector<double> out(64, 0.0);
      for (std::int64_t j = 0; j < visible; ++j) {
        const double w = std::exp2(x[static_cast<std::size_t>(j)] - mx);
        l += w;
        for (int e = 0; e < 64; ++e) out[static_cast<std::size_t>(e)] += w * v.get(0, 0, j, e);
      }
      for (int e = 0; e < 64; ++e) REQUIRE(std::fabs(o.get(0, h, i, e) - out[static_cast<std::size_t>(e)] / l) < 2e-5);
    }
  }
}

// The int8 path on the llm workload (causal, N = 700) in `dtype`, by no bound fitted to observed seeds: (1) against an
// fp64 oracle of its definition (the softmax of the dequantized integer scores, codes and scales from the core's
// primitives) within its rounding error, and (2) against the exact path within the quantization's error bound per row.
void check_int8_on_llm(DType dtype) {
  CAPTURE(to_string(dtype));
  WorkloadSpec s;
  s.seqlen = 700;
  s.heads_q = 2;
  s.heads_kv = 1;
  s.head_dim = 128;
  s.dtype = dtype;
  s.seed = test_seed();
  const Workload w = make_workload(s);
  const Problem& p = w.problem;
  HostTensor exact(DType::f32, 1, 2, 700, 128), quant = exact;
  attend_dense(p, w.q.view(), w.k.view(), w.v.view(), exact.view());
  AttendOptions opt;
  opt.qk_int8 = true;
  attend_dense(p, w.q.view(), w.k.view(), w.v.view(), quant.view(), opt);

  // make_quant's operands from the core's definitions (spattn/quant.hpp, pooling.hpp): the keys smoothed by their
  // sequence mean (rounded to the dtype), per-block amax scales, codes. Rows [n × d] as floats.
  const std::int64_t d = p.head_dim;
  auto at = [d](std::int64_t row, std::int64_t e) { return static_cast<std::size_t>(row * d + e); };
  const std::int64_t n = p.seqlen_kv;
  const std::vector<float> k = head_rows(w.k, 0), v = head_rows(w.v, 0);
  std::vector<float> mean(static_cast<std::size_t>(d)), smoothed(k.size());
  sequence_mean_rows(k.data(), n, d, mean.data());
  for (float& m : mean) m = round_to_dtype(m, p.dtype);
  for (std::size_t i = 0; i < k.size(); ++i) smoothed[i] = int8_smoothed_key(k[i], mean[i % mean.size()], p.dtype);
  const std::vector<float> k_scale = block_scales(smoothed, d, opt.quant_block_k);
  const std::vector<std::int32_t> ck = int8_codes(smoothed, d, k_scale);

  // (1) Tolerance, relative to S' = Σ_j p'_j |v_j,c| (p' the oracle's softmax). The int8 path multiplies P rounded to
  // the dtype by V (the denominator keeps the fp32 weights): ≤ u_p·S' (bf16: 2^-8; f32: no rounding). Its fp32
  // roundings, first order (u = 2^-24, L = the row's max |logit|): a logit is off by ≤ 5uL (log2 e and four products;
  // the integer dot is exact), x − m adds 2uL, exp2_det 2u, each of ≤ 3 rescales of the running max 2uL + 3u (the
  // max's own error cancels between numerator and denominator); twice that (numerator and denominator), plus n·u for
  // each sum of n terms and 2u for 1/l: u(26L + 2n + 24) ≤ fp_int8 = u(32L + 2n + 32). The exact path's logit is off
  // by ≤ d·uA + 3uL instead (A = the row's max scale·Σ_e |q_e k_j,e|: its fp32 dot), so fp_exact = fp_int8 + 2d·uA.
  //
  // (2) Row i: exact logits z_j = scale·q·k_j from the inputs as the exact path reads them (not from the smoothed
  // keys: their rounding to the dtype is part of the int8 path's error), dequantized ones z_j + e_j; the smoothing's
  // row constant scale·q·μ cancels in Δ = max_j e_j − min_j e_j as in the softmax. With p ∝ e^z: p'_j = p_j r_j,
  // r_j = e^{e_j} / Σ_k p_k e^{e_k} ∈ [e^{−Δ}, e^{Δ}], so |r_j − 1| ≤ e^Δ − 1; Σ_j p_j (r_j − 1) = 0, so
  // o'_c − o_c = Σ_j p_j (r_j − 1)(v_j,c − o_c) and |o'_c − o_c| ≤ (e^Δ − 1) Σ_j p_j |v_j,c − o_c|. The outputs'
  // difference adds (1)'s tolerance and the exact path's fp32 error, fp_exact·S. (fp64's own error: below 2^-40·S.)
  const double scale = p.softmax_scale(), u = 0x1p-24, u_p = dtype == DType::bf16 ? 0x1p-8 : 0.0;
  auto softmax = [](std::vector<double>& z) {
    const double mx = *std::max_element(z.begin(), z.end());
    double l = 0;
    for (double& t : z) l += (t = std::exp(t - mx));
    for (double& t : z) t /= l;
  };
  std::int64_t bad_oracle = 0, bad_bound = 0;
  double worst_oracle = 0, worst_bound = 0, diff = 0, norm = 0;
  std::vector<double> pq, pe;  // logits, then softmax: int8 (the oracle's), exact
  for (std::int64_t h = 0; h < p.heads_q; ++h) {
    const std::vector<float> q = head_rows(w.q, h), q_scale = block_scales(q, d, opt.quant_block_q);
    const std::vector<std::int32_t> cq = int8_codes(q, d, q_scale);
    for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
      const std::int64_t keys = p.causal ? i + 1 + (n - p.seqlen_q) : n;  // attend_dense: causal bottom-right
      pq.resize(static_cast<std::size_t>(keys)), pe.resize(pq.size());
      double lo = INFINITY, hi = -INFINITY, big_l = 0, big_a = 0;
      for (std::int64_t j = 0; j < keys; ++j) {
        std::int32_t dot_c = 0;
        double dot = 0, dot_abs = 0;
        for (std::int64_t e = 0; e < d; ++e) {
          dot_c += cq[at(i, e)] * ck[at(j, e)];
          dot += double(q[at(i, e)]) * k[at(j, e)], dot_abs += std::fabs(double(q[at(i, e)]) * k[at(j, e)]);
        }
        const double zq = scale * q_scale[static_cast<std::size_t>(i)] * k_scale[static_cast<std::size_t>(j)] * dot_c;
        pq[static_cast<std::size_t>(j)] = zq, pe[static_cast<std::size_t>(j)] = scale * dot;
        lo = std::min(lo, zq - scale * dot), hi = std::max(hi, zq - scale * dot);
        big_l = std::max({big_l, std::fabs(zq), std::fabs(scale * dot)}), big_a = std::max(big_a, scale * dot_abs);
      }
      softmax(pq), softmax(pe);
      const double growth = std::expm1(hi - lo), fp_int8 = u * (32 * big_l + 2 * double(keys) + 32);
      const double fp_exact = fp_int8 + 2 * double(d) * u * big_a;
      for (std::int64_t c = 0; c < p.dim_v(); ++c) {
        double oq = 0, o = 0, sq = 0, se = 0, spread = 0;
        for (std::int64_t j = 0; j < keys; ++j) {
          const double vj = v[at(j, c)], a = pq[static_cast<std::size_t>(j)], b = pe[static_cast<std::size_t>(j)];
          oq += a * vj, o += b * vj, sq += a * std::fabs(vj), se += b * std::fabs(vj);
        }
        for (std::int64_t j = 0; j < keys; ++j) spread += pe[static_cast<std::size_t>(j)] * std::fabs(v[at(j, c)] - o);
        const double got_q = quant.get(0, h, i, c), got = exact.get(0, h, i, c);
        const double tol_oracle = (u_p + fp_int8) * sq, tol_bound = growth * spread + tol_oracle + fp_exact * se;
        bad_oracle += !(std::fabs(got_q - oq) <= tol_oracle);  // NaN fails
        bad_bound += !(std::fabs(got_q - got) <= tol_bound);
        worst_oracle = std::max(worst_oracle, std::fabs(got_q - oq) / tol_oracle);
        worst_bound = std::max(worst_bound, std::fabs(got_q - got) / tol_bound);
        diff += std::fabs(got_q - got), norm += std::fabs(got);
      }
    }
  }
  CAPTURE(worst_oracle);  // the worst error / tolerance of each check
  CAPTURE(worst_bound);
  CAPTURE(diff / norm);
  CHECK(bad_oracle == 0);
  CHECK(bad_bound == 0);
  CHECK(diff / norm > 0);  // it really ran the quantized path
}

TEST_CASE("int8 mode on the llm workload: the dequantized scores' softmax, within the quantization's error bound") {
  check_int8_on_llm(DType::bf16);  // the dtype's roundings in play (smoothed keys; P, hence (1) within 2^-8)
  check_int8_on_llm(DType::f32);   // no rounding of P: (1) within the fp32 roundings alone, one code off fails it
}

}  // namespace
}  // namespace spattn::test
