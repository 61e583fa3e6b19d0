// SpargeAttn Stage 1: self-similarity closed form on hand-made blocks, θ/τ limits, the TopCdf rule on the
// pooled scores, forced blocks, diagonal anchor, GQA per-head θ, top-k counts, determinism, bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/reference/sparge.hpp"
#include "spattn/workload.hpp"

namespace spattn::test {
namespace {

Workload llm(std::int64_t n, std::int64_t heads = 2, std::int64_t kv = 1, std::int64_t nq = 0) {
  return test_workload(WorkloadKind::llm, n, heads, kv, nq);
}

TEST_CASE("self-similarity: identical rows 1, orthogonal rows 1/n, zero rows ignored") {
  std::vector<float> scratch;
  const std::vector<float> same = {1, 2, 3, 2, 4, 6, 0.5f, 1, 1.5f};  // 3 parallel rows
  CHECK(sparge::self_similarity(same.data(), 3, 3, scratch) == doctest::Approx(1.0));
  const std::vector<float> ortho = {1, 0, 0, 0, 5, 0, 0, 0, 2};
  CHECK(sparge::self_similarity(ortho.data(), 3, 3, scratch) == doctest::Approx(1.0 / 3.0));
  const std::vector<float> opposite = {1, 0, -1, 0};
  CHECK(sparge::self_similarity(opposite.data(), 2, 2, scratch) == doctest::Approx(0.0));
  const std::vector<float> with_zero = {1, 0, 0, 0, 0, 3};  // the zero row does not dilute the mean
  CHECK(sparge::self_similarity(with_zero.data(), 3, 2, scratch) == doctest::Approx(0.5));
  const std::vector<float> zeros(4, 0.0f);
  CHECK(sparge::self_similarity(zeros.data(), 2, 2, scratch) == -1.0f);
}

sparge::Config cfg(float theta, float tau) {
  sparge::Config c;
  c.block_q = 64;
  c.block_k = 32;
  c.theta = {theta};
  c.tau = {tau};
  c.topk = 0.0f;  // the TopCdf entry point (the default is the authors' top-k entry point)
  return c;
}

TEST_CASE("theta and tau limits: theta = 1 forces every block, tau = 1 keeps every similar block") {
  const Workload w = llm(700);
  const auto all_forced = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), cfg(1.0f, 0.1f));
  CHECK(all_forced.mask.tiles == TileMask::dense(all_forced.mask.shape).tiles);
  const auto all_kept = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), cfg(-1.0f, 1.0f));
  CHECK(all_kept.mask.tiles == TileMask::dense(all_kept.mask.shape).tiles);
  const auto sparse = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), cfg(-1.0f, 0.5f));
  CHECK(sparse.mask.stats().density < 0.9);
}

TEST_CASE("TopCdf rule on pooled scores; diagonal blocks and forced columns are kept") {
  const Workload w = llm(1000, 2, 1, 600);  // chunked prefill: N_c = 400
  sparge::Config c = cfg(-1.0f, 0.6f);
  const auto est = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), c);
  const std::int64_t offset = 400;
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < est.mask.shape.num_q_tiles(); ++i) {
      const auto row = est.mask.row(0, h, i);
      const std::int64_t last = std::min<std::int64_t>(i * 64 + 63, 599) + offset;
      for (std::int64_t pos = i * 64 + offset; pos <= last; ++pos)  // every row keeps its own key block
        REQUIRE(std::find(row.begin(), row.end(), static_cast<std::int32_t>(pos / 32)) != row.end());
    }
  // θ between the blocks' similarities: the non-similar key blocks are forced for every row.
  c.theta = {est.k_similarity[3]};
  const auto forced = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), c);
  for (std::int64_t i = 0; i < forced.mask.shape.num_q_tiles(); ++i) {
    const auto row = forced.mask.row(0, 0, i);
    CHECK(std::find(row.begin(), row.end(), 3) != row.end());  // s = θ is not similar (strict >)
  }
}

TEST_CASE("GQA: theta per query head against the KV head's key similarity; top-k counts; determinism") {
  const Workload w = llm(800, 4, 2);
  sparge::Config c = cfg(-1.0f, 0.3f);
  c.theta = {-1.0f, 1.0f, -1.0f, -1.0f};  // head 1 finds nothing similar: dense
  const auto est = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), c);
  for (std::int64_t i = 0; i < est.mask.shape.num_q_tiles(); ++i)
    CHECK(static_cast<std::int64_t>(est.mask.row(0, 1, i).size()) == est.mask.shape.reachable_k_tiles(0, i));
  CHECK(est.mask.row(0, 0, 12).size() < est.mask.row(0, 1, 12).size());
  c.dense_heads = {0, 0, 0, 1};
  const auto dense3 = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), c);
  CHECK(static_cast<std::int64_t>(dense3.mask.row(0, 3, 12).size()) == dense3.mask.shape.reachable_k_tiles(0, 12));
  CHECK(reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), c).mask.tiles == dense3.mask.tiles);

  sparge::Config t = cfg(-1.0f, 0.5f);
  t.topk = 0.25f;
  const auto top = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), t);
  for (std::int64_t i = 0; i < top.mask.shape.num_q_tiles(); ++i) {
    const std::int64_t reach = top.mask.shape.reachable_k_tiles(0, i);
    const std::int64_t k = std::max<std::int64_t>(1, static_cast<std::int64_t>(0.25f * static_cast<float>(reach)));
    const auto n = static_cast<std::int64_t>(top.mask.row(0, 0, i).size());
    CHECK(n >= k);
    CHECK(n <= k + 2);  // plus at most the two diagonal key blocks of a 64-row block
  }
}

TEST_CASE("bad SpargeAttn parameters are rejected") {
  const Workload w = llm(200);
  auto bad = [&](auto mutate, const char* field) {
    sparge::Config c = cfg(0.5f, 0.9f);
    mutate(c);
    CHECK_THROWS_WITH_AS(reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), c), doctest::Contains(field), Error);
  };
  bad([](sparge::Config& c) { c.theta = {0.1f, 0.2f, 0.3f}; }, "theta");
  bad([](sparge::Config& c) { c.tau = {NAN}; }, "tau");
  bad([](sparge::Config& c) { c.topk = 1.5f; }, "topk");
  bad([](sparge::Config& c) { c.block_k = 0; }, "block_k");
  bad([](sparge::Config& c) { c.dense_heads = {1}; }, "dense_heads");
}

}  // namespace
}  // namespace spattn::test

#include <cstring>

#include "spattn/online_softmax.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

TEST_CASE("sparge limits give the dense output; no skipping at an infinite threshold; no empty causal row") {
  const Workload w = llm(700, 2, 1, 500);
  const auto dense_mask = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), cfg(1.0f, 0.1f)).mask;
  HostTensor a(DType::f32, 1, 2, 500, 64), b = a, c = a;
  attend(w.problem, w.q.view(), w.k.view(), w.v.view(), dense_mask, a.view());
  attend(w.problem, w.q.view(), w.k.view(), w.v.view(), TileMask::dense(dense_mask.shape), b.view());
  CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
  AttendOptions off;
  off.pv_threshold = INFINITY;  // λ = −∞: nothing is skipped
  const AttendStats st = attend(w.problem, w.q.view(), w.k.view(), w.v.view(), dense_mask, c.view(), off);
  CHECK(st.pv_skipped == 0);
  CHECK(std::memcmp(a.data(), c.data(), a.size_bytes()) == 0);
  const auto sparse = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), cfg(-1.0f, 0.05f)).mask;
  CHECK(sparse.stats().density < 0.6);
  CHECK(attend(w.problem, w.q.view(), w.k.view(), w.v.view(), sparse, c.view()).empty_rows == 0);
}

TEST_CASE("int8 mode on a hand-computed example") {
  // One query of ones; keys ±0.5 (mean 0, so smoothing changes nothing); D = 32.
  // δ_q = 1/127 + 1e-7, δ_k = 0.5/127 + 1e-7, all codes ±127, integer products ±127·127·32 = ±516128.
  Problem p;
  p.seqlen_q = 1;
  p.seqlen_kv = 2;
  p.head_dim = 32;
  HostTensor q(DType::f32, 1, 1, 1, 32), k(DType::f32, 1, 1, 2, 32), v(DType::f32, 1, 1, 2, 32);
  for (int e = 0; e < 32; ++e) {
    q.set(0, 0, 0, e, 1.0f);
    k.set(0, 0, 0, e, 0.5f);
    k.set(0, 0, 1, e, -0.5f);
    v.set(0, 0, 0, e, 1.0f);
    v.set(0, 0, 1, e, -1.0f);
  }
  AttendOptions opt;
  opt.qk_int8 = true;
  float lse = 0;
  opt.lse = &lse;
  HostTensor o(DType::f32, 1, 1, 1, 32);
  attend_dense(p, q.view(), k.view(), v.view(), o.view(), opt);
  const double dq = 1.0f / 127.0f + 1e-7f, dk = 0.5f / 127.0f + 1e-7f;
  const double s = 516128.0 * dq * dk / std::sqrt(32.0);  // natural-log logit of key 0 (key 1: −s)
  const double p0 = 1.0 / (1.0 + std::exp(-2.0 * s));
  CHECK(o.get(0, 0, 0, 0) == doctest::Approx(2.0 * p0 - 1.0).epsilon(1e-3));  // P rounded to fp32: exact-ish
  CHECK(lse == doctest::Approx(s + std::log1p(std::exp(-2.0 * s))).epsilon(1e-5));
}

}  // namespace
}  // namespace spattn::test
