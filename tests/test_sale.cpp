// SALE: quantization codes/scales on hand-made groups, packing, the threshold identity, accumulator bounds,
// τ = 0 dense, sink and local always kept, int8 closer than int4, odd lengths, determinism, bad parameters.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/reference/sale.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

TEST_CASE("SALE quantization: per-thread groups, RNE codes, zero-range groups") {
  const std::int64_t d = 32;
  std::vector<float> q(static_cast<std::size_t>(16 * d), 0.5f);
  q[0] = 7.0f;              // row 0: amax 7, shared with row 8
  q[8 * d] = 3.5f;          // row 8: code 3.5 → 4 (ties to even)
  q[8 * d + 1] = 2.5f;      //        2.5 → 2
  for (std::int64_t e = 0; e < d; ++e) q[static_cast<std::size_t>(3 * d + e)] = q[static_cast<std::size_t>(11 * d + e)] = 0.0f;
  const auto qq = reference::sale_quantize_q(q, 16, d, 7, sale::Groups::thread);
  CHECK(qq.scale[0] == 1.0f);
  CHECK(qq.scale[8] == 1.0f);
  CHECK(qq.codes[0] == 7);
  CHECK(qq.codes[static_cast<std::size_t>(8 * d)] == 4);
  CHECK(qq.codes[static_cast<std::size_t>(8 * d + 1)] == 2);
  CHECK(qq.codes[static_cast<std::size_t>(8 * d + 2)] == 0);   // 0.5 → 0 (ties to even)
  CHECK(qq.scale[1] == doctest::Approx(0.5f / 7.0f));           // rows 1 and 9: amax 0.5
  CHECK(qq.scale[3] == 0.0f);                                   // rows 3 and 11 are zero: scale 0, codes 0
  CHECK(qq.codes[static_cast<std::size_t>(3 * d)] == 0);

  std::vector<float> k(static_cast<std::size_t>(32 * d), 0.1f);
  for (std::int64_t e = 0; e < d; ++e) k[static_cast<std::size_t>(25 * d + e)] = -2.0f;  // key 25: group (25 % 8) / 2 = 0
  const auto kq = reference::sale_quantize_k(k, 32, d, 127, sale::Groups::thread);
  for (std::int64_t n : {0, 1, 8, 9, 16, 17, 24, 25}) CHECK(kq.scale[static_cast<std::size_t>(n)] == doctest::Approx(2.0f / 127.0f));
  CHECK(kq.scale[2] == doctest::Approx(0.1f / 127.0f));
  CHECK(kq.codes[static_cast<std::size_t>(25 * d)] == -127);
  CHECK(kq.codes[0] == 6);  // 0.1 · 127 / 2 = 6.35

  const std::vector<std::int8_t> codes = {-1, 7, -7, 0};
  const auto packed = sale::pack_int4(codes);
  CHECK(packed[0] == 0x7f);
  CHECK(packed[1] == 0x09);
  CHECK(sale::unpack_int4(packed) == codes);
}

TEST_CASE("SALE quantization: block groups (one Q scale a 64-row block, K scales per 128-key segment)") {
  const std::uint64_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const std::int64_t d = 16, nq = 150, nk = 300;  // tails: a 22-row Q block, a 12-key segment
  std::vector<float> q(static_cast<std::size_t>(nq * d)), k(static_cast<std::size_t>(nk * d));
  for (float& x : q) x = u(rng);
  for (float& x : k) x = u(rng);
  for (std::int64_t e = 0; e < d; ++e) k[static_cast<std::size_t>(77 * d + e)] = 0.0f;  // one zero key: still scaled
  // The groups written out: Q rows [64c, 64c + 64); K keys of block 0 with the same (n mod 8) div 2, then of each
  // [32 + 128s, 160 + 128s) with the same (n mod 8) div 2.
  const auto q_id = [](std::int64_t r) { return r / 64; };
  const auto k_id = [](std::int64_t n) { return (n < 32 ? 0 : 1 + (n - 32) / 128) * 4 + (n % 8) / 2; };
  for (int range : {7, 127}) {
    const auto check = [&](const std::vector<float>& x, std::int64_t n, auto id, const reference::SaleQuantized& got) {
      for (std::int64_t r = 0; r < n; ++r) {
        float amax = 0.0f;
        for (std::int64_t o = 0; o < n; ++o)
          if (id(o) == id(r))
            for (std::int64_t e = 0; e < d; ++e) amax = std::max(amax, std::fabs(x[static_cast<std::size_t>(o * d + e)]));
        REQUIRE(got.scale[static_cast<std::size_t>(r)] == amax / static_cast<float>(range));
        for (std::int64_t e = 0; e < d; ++e) {  // |x| ≤ amax: no clamp
          const float want = std::nearbyint(x[static_cast<std::size_t>(r * d + e)] * (static_cast<float>(range) / amax));
          REQUIRE(got.codes[static_cast<std::size_t>(r * d + e)] == static_cast<int>(want));
        }
      }
    };
    check(q, nq, q_id, reference::sale_quantize_q(q, nq, d, range, sale::Groups::block));
    check(k, nk, k_id, reference::sale_quantize_k(k, nk, d, range, sale::Groups::block));
  }
  // The chunks the GPUs quantize in hold whole groups, in order.
  for (std::int64_t n = 0; n < 700; ++n) {
    const std::int64_t c = n < 32 ? 0 : 1 + (n - 32) / 128;
    CHECK(sale::k_chunk_begin(c, sale::Groups::block) <= n);
    CHECK(n < sale::k_chunk_begin(c + 1, sale::Groups::block));
    CHECK(sale::k_chunk_first(n, sale::Groups::block) == sale::k_chunk_begin(c, sale::Groups::block));
    CHECK(sale::k_chunks(n + 1, sale::Groups::block) == c + 1);
    CHECK(sale::k_chunks(n + 1, sale::Groups::thread) == n / 32 + 1);
  }
}

TEST_CASE("relative score identity: P~ >= tau  <=>  S~ >= T (raw logits), and accumulator bounds") {
  for (int trial = 0; trial < 20000; ++trial) {
    const float sl = static_cast<float>(uniform(0.05, 0.3));
    const float m2 = static_cast<float>(uniform(-20, 20)), l = static_cast<float>(uniform(1, 300));
    const float tau = static_cast<float>(std::exp(uniform(-9, -1)));
    const float s = static_cast<float>(uniform(-200, 200));
    const double p = std::exp2(double(s) * sl - m2) / l;
    const float t = (m2 + log2_det(tau * l)) / sl;
    if (std::fabs(double(s) - t) < 1e-3 * (1 + std::fabs(double(t)))) continue;  // near-tie
    REQUIRE((p >= tau) == (s >= t));
  }
  const std::int64_t d = 128, n = 64;
  std::vector<float> a(static_cast<std::size_t>(n * d)), b(a.size());
  for (auto& x : a) x = static_cast<float>(uniform(-3, 3));
  for (auto& x : b) x = static_cast<float>(uniform(-3, 3));
  for (int bits : {4, 8}) {
    const int range = bits == 4 ? 7 : 127;
    const auto qa = reference::sale_quantize_q(a, n, d, range, sale::Groups::thread), kb = reference::sale_quantize_k(b, n, d, range, sale::Groups::thread);
    std::int64_t worst = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        std::int64_t acc = 0;
        for (std::int64_t e = 0; e < d; ++e) acc += qa.codes[static_cast<std::size_t>(i * d + e)] * kb.codes[static_cast<std::size_t>(j * d + e)];
        worst = std::max(worst, std::abs(acc));
      }
    CHECK(worst <= std::int64_t{range} * range * d);
  }
}

Workload llm(std::int64_t n, std::int64_t heads = 2, std::int64_t kv = 1) {
  return test_workload(WorkloadKind::llm, n, heads, kv);
}

TEST_CASE("tau = 0 is dense attention; sink and local blocks are always kept; margins decide") {
  const Workload w = llm(1000);  // not a multiple of 64
  sale::Config c;
  c.tau = {0.0f};
  const auto dense = reference::sale_estimate(w.problem, w.q.view(), w.k.view(), c);
  CHECK(dense.mask.tiles == TileMask::dense(dense.mask.shape).tiles);
  HostTensor a(DType::f32, 1, 2, 1000, 64), b = a;
  attend(w.problem, w.q.view(), w.k.view(), w.v.view(), dense.mask, a.view());
  attend(w.problem, w.q.view(), w.k.view(), w.v.view(), TileMask::dense(dense.mask.shape), b.view());
  CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);

  for (int bits : {4, 8}) {
    c.bits = bits;
    c.tau = {0.01f};
    const auto est = reference::sale_estimate(w.problem, w.q.view(), w.k.view(), c);
    const auto again = reference::sale_estimate(w.problem, w.q.view(), w.k.view(), c);
    CHECK(est.mask.tiles == again.mask.tiles);
    CHECK(est.candidates > 0);
    sale::Config strict = c;
    strict.tau = {0.5f};  // a candidate must carry half of the sink-local mass: most are dropped
    const auto few = reference::sale_estimate(w.problem, w.q.view(), w.k.view(), strict);
    CHECK(few.selected < few.candidates);
    CHECK(few.selected <= est.selected);  // a larger τ never selects more
    const std::int64_t tk = est.mask.shape.num_k_tiles();
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t t = 0; t < est.mask.shape.num_q_tiles(); ++t) {
        const auto row = est.mask.row(0, h, t);
        const std::int64_t n_max = est.mask.shape.reachable_k_tiles(0, t);
        REQUIRE(row[0] == 0);  // sink
        for (std::int64_t j = std::max<std::int64_t>(1, n_max - 4); j < n_max; ++j)  // ≥ 128 local keys
          REQUIRE(std::find(row.begin(), row.end(), static_cast<std::int32_t>(j)) != row.end());
        for (std::int64_t j = 1; j < n_max; ++j) {
          const float m = est.margins[static_cast<std::size_t>((h * est.mask.shape.num_q_tiles() + t) * tk + j)];
          if (std::isnan(m)) continue;  // not a candidate
          REQUIRE((m >= 0.0f) == (std::find(row.begin(), row.end(), static_cast<std::int32_t>(j)) != row.end()));
        }
      }
  }
}

/// Margins equal bit for bit, or both NaN (not a candidate).
bool same_margins(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) ? std::isnan(b[i]) : std::memcmp(&a[i], &b[i], sizeof(float)) == 0)) return false;
  return true;
}

TEST_CASE("sale_select over the estimator's own sink-local states is sale_estimate; other states move decisions") {
  Workload w = test_workload(WorkloadKind::llm, 1100, 4, 2);  // GQA, not a multiple of 64
  for (int bits : {4, 8}) {
    sale::Config c;
    c.bits = bits;
    c.tau = {0.01f, 0.0f, 0.05f, 0.002f};  // a dense head among them
    const auto est = reference::sale_estimate(w.problem, w.q.view(), w.k.view(), c);
    const auto again = reference::sale_select(w.problem, w.q.view(), w.k.view(), c, est.sink_local);
    CHECK(again.mask.row_ptr == est.mask.row_ptr);
    CHECK(again.mask.tiles == est.mask.tiles);
    CHECK(same_margins(again.margins, est.margins));
    CHECK(again.candidates == est.candidates);
    CHECK(again.selected == est.selected);
    CHECK(again.selected < again.candidates);

    // Raising every m by 3 (base 2) raises every threshold: fewer candidates pass, and the margins move.
    std::vector<SoftmaxState> raised = est.sink_local;
    for (SoftmaxState& s : raised) s.m += 3.0f;
    const auto fewer = reference::sale_select(w.problem, w.q.view(), w.k.view(), c, raised);
    CHECK(fewer.candidates == est.candidates);
    CHECK(fewer.selected < est.selected);
    CHECK(!same_margins(fewer.margins, est.margins));
  }
  sale::Config c;
  std::vector<SoftmaxState> short_states(10);
  CHECK_THROWS_WITH_AS(reference::sale_select(w.problem, w.q.view(), w.k.view(), c, short_states),
                       doctest::Contains("sink_local"), Error);
  CHECK_THROWS_AS(reference::sale_head_inputs(w.problem, w.q.view(), w.k.view(), c, 0, 4), Error);
  const auto in = reference::sale_head_inputs(w.problem, w.q.view(), w.k.view(), c, 0, 3);
  CHECK(in.q.codes.size() == static_cast<std::size_t>(1100 * w.problem.head_dim));
  CHECK(in.qmk.size() == 1100u);
}

TEST_CASE("int8 estimates are closer to the exact scores than int4") {
  const std::int64_t d = 64, n = 256;
  std::vector<float> q(static_cast<std::size_t>(n * d)), k(q.size());
  for (auto& x : q) x = static_cast<float>(uniform(-2, 2));
  for (auto& x : k) x = static_cast<float>(uniform(-2, 2));
  double err[2] = {0, 0};
  for (int bi = 0; bi < 2; ++bi) {
    const int range = bi == 0 ? 7 : 127;
    const auto qq = reference::sale_quantize_q(q, n, d, range, sale::Groups::thread), kq = reference::sale_quantize_k(k, n, d, range, sale::Groups::thread);
    for (std::int64_t i = 0; i < n; i += 3)
      for (std::int64_t j = 0; j < n; j += 5) {
        double exact = 0, acc = 0;
        for (std::int64_t e = 0; e < d; ++e) {
          exact += double(q[static_cast<std::size_t>(i * d + e)]) * k[static_cast<std::size_t>(j * d + e)];
          acc += double(qq.codes[static_cast<std::size_t>(i * d + e)]) * kq.codes[static_cast<std::size_t>(j * d + e)];
        }
        err[bi] += std::fabs(acc * qq.scale[static_cast<std::size_t>(i)] * kq.scale[static_cast<std::size_t>(j)] - exact);
      }
  }
  CAPTURE(err[0]);
  CAPTURE(err[1]);
  CHECK(err[1] < err[0]);
}

TEST_CASE("bias_units: the fp32 fast paths (quotient, reciprocal) round every quotient exactly as the double division does") {
  const auto oracle = [](float qmk, float unit) {  // the definition: the double quotient, RNE, clamped to ±2^30
    double b = std::nearbyint(static_cast<double>(qmk) / unit);
    b = std::clamp(b, -1073741824.0, 1073741824.0);
    return static_cast<std::int64_t>(b);
  };
  const std::uint64_t seed = test_seed();
  MESSAGE("seed " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const auto log_uniform = [&](double lo, double hi) { return static_cast<float>(std::exp2(lo + (hi - lo) * u01(rng))); };
  std::int64_t checked = 0, wrong = 0, ties = 0;
  std::int64_t wrong_rcp = 0, certified = 0, small = 0, small_certified = 0;
  const auto check = [&](float qmk, float unit) {
    ++checked;
    const std::int64_t want = oracle(qmk, unit);
    wrong += sale::bias_units(qmk, unit) == want ? 0 : 1;
    std::int32_t b = 0;
    // Below 2^21 and farther than 1e-5·|Q| from a tie, the product must answer.
    const double q = double(qmk) / unit;
    const bool is_small = std::fabs(q) < 2097152.0 && std::fabs(std::fabs(q - std::nearbyint(q)) - 0.5) > 1e-5 * std::fabs(q);
    small += is_small ? 1 : 0;
    if (sale::bias_units_certified(qmk, 1.0f / unit, b)) {  // the reciprocal's path, where it answers
      ++certified;
      small_certified += is_small ? 1 : 0;
      wrong_rcp += b == want ? 0 : 1;
    }
    wrong_rcp += sale::bias_units(qmk, unit, 1.0f / unit) == want ? 0 : 1;
  };
  for (int i = 0; i < 1000000; ++i) {  // random magnitudes: quotients from 2^-30 to 2^35
    const float qmk = (u01(rng) < 0.5 ? -1.0f : 1.0f) * log_uniform(-12.0, 12.0);
    check(qmk, log_uniform(-23.0, 18.0));
  }
  for (int i = 0; i < 200000; ++i) {  // quotients a few ulps around a half-integer (k + 0.5)·unit, |k| < 2^23
    const float unit = log_uniform(-20.0, 4.0);
    const double k = std::floor(std::exp2(23.0 * u01(rng))) * (u01(rng) < 0.5 ? -1.0 : 1.0);
    float qmk = static_cast<float>((k + 0.5) * unit);
    for (int step = 0; step < 3; ++step) qmk = std::nextafter(qmk, -INFINITY);
    for (int step = 0; step < 7; ++step, qmk = std::nextafter(qmk, INFINITY)) {
      const double q = static_cast<double>(qmk) / unit;
      ties += std::fabs(std::fabs(q - std::nearbyint(q)) - 0.5) < 1e-6 * std::fabs(q) ? 1 : 0;
      check(qmk, unit);
    }
  }
  check(1.0f, std::numeric_limits<float>::denorm_min());  // an infinite fp32 quotient: the clamp
  check(-3.0e38f, 1e-30f);
  check(0.0f, 1.0f);
  CHECK(ties > 100000);  // the constructed cases do reach the slow path's territory
  CHECK(wrong == 0);
  CHECK(wrong_rcp == 0);
  CHECK(small > 500000);
  CHECK(small_certified == small);
  CHECK(certified < checked - ties / 2);     // and leaves the near-ties to the division
  MESSAGE(checked << " quotients, " << ties << " within 1e-6 of a tie: " << wrong << " (fp32 quotient) and " << wrong_rcp
                  << " (reciprocal; " << certified << " certified without a division) differ from the double division");
}

TEST_CASE("folded_decision: every sure answer is GroupMax's decision, and most answers are sure") {
  // One GPU thread's share of a candidate block: rows r0, r1 of one Q scale group × 8 keys of one K scale group.
  const std::uint64_t seed = test_seed();
  MESSAGE("seed " << seed);
  std::mt19937_64 rng(seed ^ 0x5a1e);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const auto log_uniform = [&](double lo, double hi) { return static_cast<float>(std::exp2(lo + (hi - lo) * u01(rng))); };
  std::int64_t sure = 0, wrong = 0, near = 0, near_sure = 0, far = 0, far_sure = 0, total = 0, guarded = 0;
  std::int64_t settled = 0, wrong_settled = 0;
  for (int trial = 0; trial < 400000; ++trial) {
    const int range = trial % 2 == 0 ? 7 : 127, d = trial % 3 == 0 ? 64 : (trial % 3 == 1 ? 128 : 256);
    const float sq = trial % 97 == 0 ? 0.0f : log_uniform(-12.0, 2.0), sk = trial % 89 == 0 ? 0.0f : log_uniform(-12.0, 2.0);
    const float unit = sq * sk;
    const int acc_max = range * range * d;
    const double spread = u01(rng);  // narrow and wide accumulators
    const float qmk_mag = log_uniform(-10.0, 8.0);
    std::int32_t acc[2][8];
    float qmk[8];
    for (int j = 0; j < 8; ++j) {
      qmk[j] = static_cast<float>((2.0 * u01(rng) - 1.0) * qmk_mag);
      for (auto& a : acc) a[j] = static_cast<std::int32_t>(std::lround((2.0 * u01(rng) - 1.0) * spread * acc_max));
    }
    if (trial % 101 == 0) qmk[3] = static_cast<float>(std::ldexp(1.0, 31)) * unit;  // the bias clamp's territory
    if (trial % 103 == 0) qmk[5] = 2097151.0f * unit;  // just inside the guard, where |c − b| reaches 1
    float qmk_bound = 0.0f;
    for (int j = 0; j < 8; ++j) qmk_bound = std::max(qmk_bound, std::fabs(qmk[j]));
    const float rcp = 1.0f / unit;
    const bool ok = sale::folded_bias_ok(rcp, qmk_bound);
    guarded += ok ? 0 : 1;
    for (const auto& a : acc) {
      sale::GroupMax g;
      std::int32_t best = INT32_MIN;
      for (int j = 0; j < 8; ++j) {
        g.add(a[j], qmk[j], sq, sk);
        if (ok) best = std::max(best, a[j] + sale::folded_bias(qmk[j], rcp));
      }
      const float est = g.estimate();
      // Thresholds: exactly at the estimate, a few ulps around it, within ±u of it, and far from it.
      float thr = est;
      const int kind = static_cast<int>(u01(rng) * 4);
      if (kind == 1) {
        const int steps = static_cast<int>(u01(rng) * 9) - 4;
        for (int s = 0; s < std::abs(steps); ++s) thr = std::nextafter(thr, steps < 0 ? -INFINITY : INFINITY);
      } else if (kind == 2) {
        thr = est + static_cast<float>((2.0 * u01(rng) - 1.0) * (unit > 0.0f ? unit : 1e-6f));
      } else if (kind == 3) {
        thr = est + static_cast<float>((2.0 * u01(rng) - 1.0) * 64.0 * (unit > 0.0f ? unit : 1e-6f));
      }
      const bool want = sale::selected(est - thr);
      int got = ok ? sale::folded_decision(best, unit, thr) : 0;
      if (ok && got == 0) {  // settled when every bias is certified from the reciprocal
        bool exact = true;
        for (int j = 0; j < 8; ++j) exact = exact && sale::folded_bias_exact(qmk[j], rcp);
        if (exact) {
          got = sale::folded_exact_decision(best, unit, thr);
          ++settled;
          if ((got > 0) != want) ++wrong_settled;
        }
      }
      ++total;
      near += kind == 2 && ok ? 1 : 0;
      far += kind == 3 && ok ? 1 : 0;
      if (got == 0) continue;
      ++sure;
      near_sure += kind == 2 ? 1 : 0;
      far_sure += kind == 3 ? 1 : 0;
      if ((got > 0) != want) {
        ++wrong;
        if (wrong <= 5)
          MESSAGE("differs: sq " << sq << " sk " << sk << " est " << est << " thr " << thr << " best " << best);
      }
    }
  }
  // The guard: a zero or non-normal reciprocal, a huge or non-finite qmk bound.
  CHECK_FALSE(sale::folded_bias_ok(INFINITY, 1.0f));  // unit 0
  CHECK_FALSE(sale::folded_bias_ok(1e-39f, 1.0f));    // subnormal reciprocal
  CHECK_FALSE(sale::folded_bias_ok(NAN, 1.0f));
  CHECK_FALSE(sale::folded_bias_ok(1.0f, NAN));
  CHECK_FALSE(sale::folded_bias_ok(1.0f, INFINITY));
  CHECK_FALSE(sale::folded_bias_ok(1.0f, 2097152.0f));
  CHECK(sale::folded_bias_ok(1.0f, 2097151.0f));
  CHECK(sale::folded_bias(-2.5f, 1.0f) == -2);  // the magic number rounds to nearest even
  CHECK(sale::folded_bias(3.5f, 1.0f) == 4);
  CHECK(sale::folded_bias(-2097151.0f, 1.0f) == -2097151);
  CHECK(sale::folded_decision(10, 1.0f, NAN) == 0);  // a NaN threshold is left to the exact rules
  CHECK(sale::folded_decision(10, 1.0f, -INFINITY) == 1);
  CHECK(sale::folded_decision(10, 1.0f, INFINITY) == -1);
  CHECK(sale::folded_decision(10, 1.0f, 9.0f) == 1);  // V − 1 = 9 ≥ 9
  CHECK(sale::folded_decision(10, 1.0f, 11.0f) == 0);
  CHECK(sale::folded_decision(10, 1.0f, 11.5f) == -1);
  CHECK(sale::folded_exact_decision(10, 1.0f, 10.0f) == 1);  // select on tie
  CHECK(sale::folded_exact_decision(10, 1.0f, 10.5f) == -1);
  CHECK(sale::folded_exact_decision(10, 1.0f, NAN) == -1);  // GroupMax: NaN margin, not selected
  CHECK(sale::folded_bias_exact(3.25f, 1.0f));
  CHECK_FALSE(sale::folded_bias_exact(3.5f, 1.0f));  // a tie is left to the division
  CHECK(wrong == 0);
  CHECK(wrong_settled == 0);
  CHECK(settled > 100000);  // most undecided groups are settled without GroupMax
  CHECK(guarded > 0);
  CHECK(far_sure * 10 >= far * 9);  // thresholds up to ±64·u from the estimate are decided (where the guard holds)
  CHECK(near_sure < near);          // some within ±u of it are not
  CHECK(near_sure > 0);             // and some are
  MESSAGE(total << " rows: " << sure << " decided from the folded bias, " << wrong << " of them wrong; thresholds within ±u "
                << "of the estimate: " << near_sure << " of " << near << " decided; within ±64·u: " << far_sure << " of " << far
                << "; " << guarded << " of 400000 groups left to the exact rules by the guard; " << settled
                << " undecided rows settled by certified biases, " << wrong_settled << " of them wrong");
}

TEST_CASE("folded_bounds: the integer comparisons decide as folded_decision and folded_exact_decision") {
  const std::uint64_t seed = test_seed();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_unit(-30.0, 10.0), frac(0.0, 1.0);
  std::uniform_int_distribution<std::int32_t> value(-(1 << 23) + 2, (1 << 23) - 2), near(-3, 3), ulps(-2, 2);
  std::int64_t compared = 0;
  for (int trial = 0; trial < 200000; ++trial) {
    const float unit = static_cast<float>(std::exp2(log_unit(rng)) * (1.0 + frac(rng)));
    const std::int32_t best = trial % 4 == 3 ? value(rng) % 3000 : value(rng);
    float thr = 0.0f;
    switch (trial % 3) {
      case 0: thr = unit * static_cast<float>(best + near(rng)); break;  // a boundary: RN(unit·v) itself
      case 1: {  // a boundary moved by a few ulps
        thr = unit * static_cast<float>(best + near(rng));
        for (std::int32_t k = ulps(rng); k != 0; k += k > 0 ? -1 : 1) thr = std::nextafter(thr, k > 0 ? INFINITY : -INFINITY);
        break;
      }
      default: thr = static_cast<float>(unit * (best + 8.0 * (frac(rng) - 0.5)) * (trial % 7 == 0 ? 1e3 : 1.0));
    }
    const float rcp = 1.0f / unit;
    const sale::FoldedBounds b = sale::folded_bounds(unit, rcp, thr);
    REQUIRE(sale::folded_decision(best, b) == sale::folded_decision(best, unit, thr));
    REQUIRE(sale::folded_exact_decision(best, b) == sale::folded_exact_decision(best, unit, thr));
    float off = rcp;  // a reciprocal a few ulps off: the same decisions
    for (std::int32_t k = ulps(rng) * 2; k != 0; k += k > 0 ? -1 : 1) off = std::nextafter(off, k > 0 ? INFINITY : 0.0f);
    const sale::FoldedBounds b_off = sale::folded_bounds(unit, off, thr);
    REQUIRE(sale::folded_decision(best, b_off) == sale::folded_decision(best, unit, thr));
    REQUIRE(sale::folded_exact_decision(best, b_off) == sale::folded_exact_decision(best, unit, thr));
    ++compared;
  }
  for (const float thr : {NAN, INFINITY, -INFINITY, 3.0e38f, -3.0e38f, 0.0f, -0.0f})
    for (const std::int32_t best : {-(1 << 23) + 2, -5, 0, 7, (1 << 23) - 2}) {
      const sale::FoldedBounds b = sale::folded_bounds(0.37f, 1.0f / 0.37f, thr);
      CHECK(sale::folded_decision(best, b) == sale::folded_decision(best, 0.37f, thr));
      CHECK(sale::folded_exact_decision(best, b) == sale::folded_exact_decision(best, 0.37f, thr));
    }
  MESSAGE(compared << " random (unit, threshold, best) compared");
}

TEST_CASE("bad SALE parameters are rejected") {
  const Workload w = llm(200);
  auto bad = [&](auto mutate, const char* field) {
    sale::Config c;
    mutate(c);
    CHECK_THROWS_WITH_AS(reference::sale_estimate(w.problem, w.q.view(), w.k.view(), c), doctest::Contains(field), Error);
  };
  bad([](sale::Config& c) { c.bits = 5; }, "bits");
  bad([](sale::Config& c) { c.local_window = 100; }, "local_window");
  bad([](sale::Config& c) { c.tau = {1.5f}; }, "tau");
  bad([](sale::Config& c) { c.tau = {0.1f, 0.1f, 0.1f}; }, "tau");
  CalibrationTargets negative;
  negative.sale_theta = -1.0f;
  CHECK_THROWS_AS(calibrate(sale::Config{}, {sample_of(w)}, negative), Error);
}

}  // namespace
}  // namespace spattn::test
