// The public entry points (spattn.hpp): estimate(), sparse_attention(), calibrate() and the method registry,
// each checked against the reference path it must agree with (the method's reference estimator, attend() over
// that mask with the method's options), and each fed bad input (a clear spattn::Error naming the argument).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "common.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/reference/anchor_attn.hpp"
#include "spattn/reference/bfla.hpp"
#include "spattn/reference/executor.hpp"
#include "spattn/reference/fg_attn.hpp"
#include "spattn/reference/sale.hpp"
#include "spattn/reference/sparge.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

bool same_mask(const TileMask& a, const TileMask& b) {
  return a.shape == b.shape && a.row_ptr == b.row_ptr && a.tiles == b.tiles;
}

/// The mask of `config` computed by calling the method's reference estimator directly (no dispatcher).
TileMask direct_mask(const MethodConfig& config, const Workload& w) {
  const Problem& p = w.problem;
  const TensorView q = w.q.view(), k = w.k.view();
  if (const auto* c = std::get_if<DenseConfig>(&config)) return TileMask::dense(MaskShape::of(p, c->tile_q, c->tile_k));
  if (const auto* c = std::get_if<sparge::Config>(&config)) return reference::sparge_estimate(p, q, k, *c).mask;
  if (const auto* c = std::get_if<sale::Config>(&config)) return reference::sale_estimate(p, q, k, *c).mask;
  if (const auto* c = std::get_if<anchor_attn::Config>(&config)) return reference::anchor_attn_estimate(p, q, k, *c).mask;
  if (const auto* c = std::get_if<bfla::Config>(&config)) return reference::bfla_estimate(p, q, k, *c);
  const auto& c = std::get<fg_attn::Config>(config);
  const TileMask own = reference::fg_attn_estimate(p, q, k, c);
  return c.semantics == fg_attn::Semantics::exact ? own : fg_attn::effective_mask(own, fg_attn::merge_plan(own, c), c.semantics);
}

/// Small configurations of every method that select something on a 700-token input.
std::vector<MethodConfig> small_configs() {
  sparge::Config sp;
  sp.block_q = 64;
  sp.block_k = 32;
  sale::Config sa;
  sa.tau = {0.01f};
  anchor_attn::Config an;
  an.step = 2;
  an.theta = 3.0f;
  fg_attn::Config fg;
  fg.top_p = 0.7f;
  fg_attn::Config fg_union = fg;
  fg_union.semantics = fg_attn::Semantics::union_keys;
  fg_union.tile_q = 16;
  bfla::Config bf;
  bf.block = 128;
  bf.group = 32;
  bf.gamma = 0.9f;
  bf.eta = 5;
  return {DenseConfig{64, 32}, sp, sa, an, fg, fg_union, bf};
}

TEST_CASE("registry: every method has a valid default whose name round-trips; unknown names list the known ones") {
  const Workload w = test_workload(WorkloadKind::llm, 300, 4, 2);
  CHECK(method_registry().size() == 6);
  for (const MethodInfo& m : method_registry()) {
    CAPTURE(m.name);
    CHECK(method_name(m.defaults) == m.name);
    CHECK(method_name(default_config(m.name)) == m.name);
    CHECK_NOTHROW(validate(m.defaults, w.problem));
    CHECK(!m.summary.empty());
  }
  CHECK_THROWS_WITH_AS(default_config("flash"), doctest::Contains("unknown method 'flash'"), Error);
  CHECK_THROWS_WITH_AS(default_config("flash"), doctest::Contains("sparge"), Error);
}

TEST_CASE("estimate() equals each method's reference estimator, causal and not, GQA, Nq < Nkv") {
  for (const bool causal : {true, false}) {
    Workload w = test_workload(WorkloadKind::llm, 700, 4, 2, 500);
    w.problem.causal = causal;
    for (const MethodConfig& config : small_configs()) {
      CAPTURE(method_name(config));
      CAPTURE(causal);
      const Estimate e = estimate(config, w.problem, w.q.view(), w.k.view());
      CHECK(e.method == method_name(config));
      CHECK(e.backend == "reference");
      CHECK(same_mask(e.mask, direct_mask(config, w)));
      if (std::holds_alternative<sale::Config>(config)) {
        const auto direct = reference::sale_estimate(w.problem, w.q.view(), w.k.view(), std::get<sale::Config>(config));
        CHECK(e.candidates == direct.candidates);
        CHECK(e.selected == direct.selected);
        REQUIRE(e.margins.size() == direct.margins.size());
        CHECK(std::memcmp(e.margins.data(), direct.margins.data(), e.margins.size() * sizeof(float)) == 0);
        CHECK(e.anchor_state.size() == static_cast<std::size_t>(4 * 500));
      }
      if (std::holds_alternative<anchor_attn::Config>(config)) {
        const auto direct = reference::anchor_attn_estimate(w.problem, w.q.view(), w.k.view(), std::get<anchor_attn::Config>(config));
        CHECK(e.selected == direct.selected);
        CHECK(e.candidates == direct.candidates);
        CHECK(e.candidates > 0);
        REQUIRE(e.anchor_state.size() == direct.anchors.size());
        for (std::size_t i = 0; i < e.anchor_state.size(); ++i) {
          CHECK(e.anchor_state[i].m == direct.anchors[i].m);
          CHECK(e.anchor_state[i].l == direct.anchors[i].l);
        }
      }
    }
  }
}

TEST_CASE("sparse_attention() = attend() over estimate()'s mask with the method's executor options") {
  const Workload w = test_workload(WorkloadKind::llm, 600, 4, 1);
  const Problem& p = w.problem;
  for (MethodConfig config : small_configs()) {
    CAPTURE(method_name(config));
    if (auto* sp = std::get_if<sparge::Config>(&config)) sp->pv_threshold = {6.0f, INFINITY, 3.0f, 0.0f};
    HostTensor got(DType::f32, 1, 4, 600, 64), want(DType::f32, 1, 4, 600, 64);
    got.poison();
    want.poison();
    const SparseAttentionResult r = sparse_attention(config, p, w.q.view(), w.k.view(), w.v.view(), got.view());
    const TileMask mask = direct_mask(config, w);
    CHECK(same_mask(r.estimate.mask, mask));
    AttendOptions opt;
    if (const auto* sp = std::get_if<sparge::Config>(&config)) opt.pv_threshold_per_head = sp->pv_threshold;
    const AttendStats ref = reference::attend(p, w.q.view(), w.k.view(), w.v.view(), mask, want.view(), opt);
    CHECK(r.attend.backend == "reference");
    CHECK(r.attend.pv_skipped == ref.pv_skipped);
    CHECK(r.attend.empty_rows == ref.empty_rows);
    CHECK(std::memcmp(got.data(), want.data(), got.size_bytes()) == 0);
  }
}

TEST_CASE("sparse_attention(): SpargeAttn's per-head pv_threshold reaches the executor (skips where the data forces them)") {
  // Head 1 is built so every later key tile scores strictly below the first: all queries are one vector u and
  // key j is u·a_j with a_j strictly decreasing, so with threshold 0 every row votes to skip every tile after
  // its first (bar the exempt ones). Head 0 keeps the workload's random data and threshold +inf (off).
  Workload w = test_workload(WorkloadKind::llm, 600, 2, 2);
  const Problem& p = w.problem;
  for (std::int64_t d = 0; d < p.head_dim; ++d) {
    const float u = static_cast<float>(uniform(-1.0, 1.0));
    for (std::int64_t n = 0; n < p.seqlen_q; ++n) w.q.set(0, 1, n, d, u);
    for (std::int64_t n = 0; n < p.seqlen_kv; ++n) w.k.set(0, 1, n, d, u * (2.0f - static_cast<float>(n) / 600.0f));
  }
  sparge::Config sp;
  sp.block_q = 64;
  sp.block_k = 32;
  sp.pv_threshold = {INFINITY, 0.0f};
  HostTensor got(DType::f32, 1, 2, 600, 64), want(DType::f32, 1, 2, 600, 64);
  got.poison();
  want.poison();
  const SparseAttentionResult r = sparse_attention(sp, p, w.q.view(), w.k.view(), w.v.view(), got.view());
  AttendOptions opt;
  opt.pv_threshold_per_head = sp.pv_threshold;
  const AttendStats ref = reference::attend(p, w.q.view(), w.k.view(), w.v.view(), r.estimate.mask, want.view(), opt);
  CHECK(r.attend.pv_skipped == ref.pv_skipped);
  CHECK(r.attend.pv_skipped > 0);
  CHECK(std::memcmp(got.data(), want.data(), got.size_bytes()) == 0);
  // Off for both heads: nothing skipped, and the output differs where head 1 skipped.
  sp.pv_threshold = {};
  HostTensor off(DType::f32, 1, 2, 600, 64);
  off.poison();
  CHECK(sparse_attention(sp, p, w.q.view(), w.k.view(), w.v.view(), off.view()).attend.pv_skipped == 0);
  CHECK(std::memcmp(off.data(), got.data(), got.size_bytes()) != 0);
}

TEST_CASE("the SpargeAttn default (top-k 0.9) and the authors' top-k 0.5 are sparse, unlike the θ = 0.6 TopCdf default") {
  const Workload w = test_workload(WorkloadKind::llm, 2048, 2, 1);
  const Estimate e = estimate(default_config("sparge"), w.problem, w.q.view(), w.k.view());
  CHECK(std::get<sparge::Config>(default_config("sparge")).topk == 0.9f);
  CHECK(e.mask.stats().density < 0.92);
  sparge::Config authors;
  authors.topk = 0.5f;
  CHECK(estimate(authors, w.problem, w.q.view(), w.k.view()).mask.stats().density < 0.7);
  sparge::Config old;
  old.theta = {0.6f};
  old.topk = 0.0f;
  CHECK(estimate(old, w.problem, w.q.view(), w.k.view()).mask.stats().density > 0.95);
}

TEST_CASE("calibrate() through the dispatcher: SALE τ per head meets its bound; other methods and bad samples are refused") {
  const Workload w = test_workload(WorkloadKind::llm, 1024, 2, 1);
  CalibrationTargets t;
  t.sale_theta = 0.3f;
  int calls = 0;
  t.progress = [&](double, const std::string&) { ++calls; };
  const Calibration cal = calibrate(sale::Config{}, {sample_of(w)}, t);
  const auto& params = std::get<sale::Params>(cal);
  REQUIRE(params.tau.size() == 2);
  CHECK(calls > 0);
  const sale::Config tuned = std::get<sale::Config>(config_of(cal));
  CHECK(tuned.tau == params.tau);
  // Independently: each head's Err at its τ is under the bound.
  const SparseAttentionResult r = [&] {
    HostTensor o(DType::f32, 1, 2, 1024, 64);
    auto res = sparse_attention(tuned, w.problem, w.q.view(), w.k.view(), w.v.view(), o.view());
    HostTensor d(DType::f32, 1, 2, 1024, 64);
    attend_dense(w.problem, w.q.view(), w.k.view(), w.v.view(), d.view());
    for (std::int64_t h = 0; h < 2; ++h) {
      double err = 0;
      for (std::int64_t i = 0; i < 1024; ++i)
        for (std::int64_t e = 0; e < 64; ++e) err += std::fabs(double(o.get(0, h, i, e)) - d.get(0, h, i, e));
      CAPTURE(h);
      CHECK(err / 1024.0 < 0.3);
    }
    return res;
  }();
  CHECK(r.estimate.method == "sale");

  CHECK_THROWS_WITH_AS(calibrate(DenseConfig{}, {sample_of(w)}), doctest::Contains("nothing to calibrate"), Error);
  CHECK_THROWS_WITH_AS(calibrate(sale::Config{}, {}), doctest::Contains("no calibration inputs"), Error);
  const Workload other = test_workload(WorkloadKind::llm, 512, 4, 1);
  CHECK_THROWS_WITH_AS(calibrate(sale::Config{}, {sample_of(w), sample_of(other)}), doctest::Contains("same heads"), Error);
  Sample mixed = sample_of(w);
  mixed.k.memory = Memory::cuda;
  CHECK_THROWS_WITH_AS(calibrate(sale::Config{}, {mixed}), doctest::Contains("must be in one memory"), Error);
  CHECK_THROWS_WITH_AS(calibrate(sale::Config{}, {sample_of(w), mixed}), doctest::Contains("must be in one memory"), Error);
  // Device samples need a backend that allocates their memory for the outputs: none allocates HIP memory (the Kokkos
  // backend reads it, but has no scratch allocator). The pointers are never read.
  Sample on_hip = sample_of(w);
  for (TensorView* view : {&on_hip.q, &on_hip.k, &on_hip.v}) view->memory = Memory::hip;
  CHECK_THROWS_WITH_AS(calibrate(sale::Config{}, {on_hip}), doctest::Contains("HIP memory, and no backend in this build allocates it"),
                       Error);
}

TEST_CASE("bad input to estimate() and sparse_attention() names the argument") {
  const Workload w = test_workload(WorkloadKind::llm, 300, 4, 2);
  const Problem& p = w.problem;
  const TensorView q = w.q.view(), k = w.k.view(), v = w.v.view();
  HostTensor o(DType::f32, 1, 4, 300, 64);

  sparge::Config three_thetas;
  three_thetas.theta = {0.1f, 0.2f, 0.3f};
  CHECK_THROWS_WITH_AS(estimate(three_thetas, p, q, k), doctest::Contains("sparge theta"), Error);
  bfla::Config bad_group;
  bad_group.group = 100;
  CHECK_THROWS_WITH_AS(estimate(bad_group, p, q, k), doctest::Contains("bfla group"), Error);
  CHECK_THROWS_WITH_AS(estimate(DenseConfig{8, 128}, p, q, k), doctest::Contains("dense tile_q"), Error);
  sparge::Config negative_pv;
  negative_pv.pv_threshold = {-1.0f};
  CHECK_THROWS_WITH_AS(estimate(negative_pv, p, q, k), doctest::Contains("sparge pv_threshold"), Error);

  TensorView null_q = q;
  null_q.data = nullptr;
  CHECK_THROWS_WITH_AS(estimate(sale::Config{}, p, null_q, k), doctest::Contains("q: data pointer is null"), Error);
  Problem bad_heads = p;
  bad_heads.heads_kv = 3;
  CHECK_THROWS_WITH_AS(estimate(sale::Config{}, bad_heads, q, k), doctest::Contains("heads_q"), Error);

  EstimateOptions nowhere;
  nowhere.backend = "tpu";
  CHECK_THROWS_WITH_AS(estimate(sale::Config{}, p, q, k, nowhere), doctest::Contains("'tpu' is not linked"), Error);
  TensorView k_gpu = k;
  k_gpu.memory = Memory::cuda;
  CHECK_THROWS_WITH_AS(estimate(sale::Config{}, p, q, k_gpu), doctest::Contains("host memory"), Error);

  TensorView v_wide = v;
  v_wide.dtype = DType::f16;
  CHECK_THROWS_WITH_AS(sparse_attention(default_config("bfla"), p, q, k, v_wide, o.view()), doctest::Contains("v: dtype"),
                       Error);
  std::vector<SoftmaxState> states(static_cast<std::size_t>(4 * 300));
  AttendOptions resumed;
  resumed.resume = states.data();
  CHECK_THROWS_WITH_AS(sparse_attention(default_config("anchor"), p, q, k, v, o.view(), resumed),
                       doctest::Contains("resume is attend()'s option"), Error);
  AttendOptions bad_vote;
  bad_vote.pv_vote_rows = 500;
  CHECK_THROWS_WITH_AS(sparse_attention(default_config("sparge"), p, q, k, v, o.view(), bad_vote),
                       doctest::Contains("pv_vote_rows"), Error);
}

TEST_CASE("upload(): only a device memory that a linked backend allocates (no backend allocates HIP memory)") {
  HostTensor t(DType::bf16, 1, 2, 16, 8);
  CHECK_THROWS_WITH_AS(upload(t, Memory::host), doctest::Contains("must be a device memory"), Error);
  CHECK_THROWS_WITH_AS(upload(t, Memory::hip), doctest::Contains("no backend in this build allocates HIP memory"),
                       Error);
  HostTensor back(DType::bf16, 1, 2, 16, 8);
  CHECK_THROWS_WITH_AS(DeviceBuffer{}.download(back), doctest::Contains("an empty buffer"), Error);
}

}  // namespace
}  // namespace spattn::test
