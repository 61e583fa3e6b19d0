// BFLA: the flattened-group identity, γ = 1 = dense, sink and band always kept, rescue hashes, chunked
// prefill keeping each query's nearest keys, the GQA union, odd lengths, determinism, bad parameters.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/reference/bfla.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace spattn::test {
namespace {

Workload llm(std::int64_t n, std::int64_t nq = 0, std::int64_t heads = 4, std::int64_t kv = 2) {
  return test_workload(WorkloadKind::llm, n, heads, kv, nq);
}

bfla::Config small(float gamma) {
  bfla::Config c;
  c.block = 128;
  c.group = 32;
  c.tile = 16;
  c.n_local = 8;  // 8 tiles of 16 keys = one block
  c.gamma = gamma;
  return c;
}

TEST_CASE("group score = sum of the g logits on one diagonal of the group-pair block") {
  const Workload w = llm(300, 0, 2, 1);  // 300 = 9·32 + 12: partial groups
  const bfla::Config c = small(0.9f);
  const auto s = reference::bfla_group_scores(w.problem, w.q.view(), w.k.view(), c, 0, 1);
  const std::int64_t gk = (300 + 31) / 32;
  for (std::int64_t u : {0, 4, 9})
    for (std::int64_t v : {0, 7, 9}) {
      double want = 0;
      for (std::int64_t t = 0; t < 32; ++t) {
        const std::int64_t i = u * 32 + t, j = v * 32 + t;
        if (i >= 300 || j >= 300) continue;
        for (std::int64_t d = 0; d < 64; ++d) want += double(w.q.get(0, 1, i, d)) * w.k.get(0, 0, j, d);
      }
      CHECK(s[static_cast<std::size_t>(u * gk + v)] == doctest::Approx(want).epsilon(1e-4).scale(1.0));
    }
}

TEST_CASE("gamma = 1 gives exactly dense attention") {
  for (std::int64_t nq : {0, 333}) {
    const Workload w = llm(1000, nq);
    const TileMask m = reference::bfla_estimate(w.problem, w.q.view(), w.k.view(), small(1.0f));
    CHECK(m.tiles == TileMask::dense(m.shape).tiles);
    HostTensor a(DType::f32, 1, 4, w.problem.seqlen_q, 64), b = a;
    attend(w.problem, w.q.view(), w.k.view(), w.v.view(), m, a.view());
    attend(w.problem, w.q.view(), w.k.view(), w.v.view(), TileMask::dense(m.shape), b.view());
    CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
  }
}

TEST_CASE("sink and local band are always kept; chunked prefill keeps each query's nearest keys") {
  for (std::int64_t nq : {0, 300, 77}) {  // Nkv = 1000: N_c = 0, 700 (not a multiple of 128), 923
    const Workload w = llm(1000, nq);
    const TileMask m = reference::bfla_estimate(w.problem, w.q.view(), w.k.view(), small(0.05f));
    const std::int64_t nc = w.problem.seqlen_kv - w.problem.seqlen_q;
    const auto bits = m.to_bitmap();
    const std::int64_t tk = m.shape.num_k_tiles(), tq = m.shape.num_q_tiles();
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < w.problem.seqlen_q; ++i) {
        const std::int64_t pos = i + nc, r = (h * tq) + i / m.shape.tile_q;
        auto kept = [&](std::int64_t j) { return bits[static_cast<std::size_t>(r * tk + j / 16)] != 0; };
        for (std::int64_t j = 0; j < std::min<std::int64_t>(128, pos + 1); ++j) REQUIRE(kept(j));  // sink block
        for (std::int64_t j = std::max<std::int64_t>(0, pos - 31); j <= pos; ++j) REQUIRE(kept(j));  // nearest keys
      }
    CHECK(m.stats().density < 1.0);
  }
}

TEST_CASE("rescue hashes reproduce hand-computed values") {
  CHECK(bfla::stride_rescued(2, 10, 0, 16));    // 262 + 170 = 432 = 27·16
  CHECK(!bfla::stride_rescued(1, 1, 0, 16));    // 148 mod 16 = 4
  CHECK(bfla::stride_rescued(0, 0, -16, 16));   // floor mod of a negative seed
  CHECK(!bfla::stride_rescued(0, 0, -3, 16));   // -3 mod 16 = 13
  CHECK(bfla::rescue_hash(0, 0, 0, 0) == 1610479703);  // (1103515245 + 12345 + 2654435761) & 0x7fffffff
  CHECK(bfla::rescue_hash(2, 5, 1, 7) == 29556742);
  CHECK(bfla::random_rescued(0, 0, 0, 0, 0.5f));    // 479703 < 500000
  CHECK(!bfla::random_rescued(0, 0, 0, 0, 0.4f));   // 479703 >= 400000
  CHECK(bfla::random_rescued(9, 9, 9, 9, 1.0f));
  // In the estimator: stride rescue only adds blocks, and every added coarse block satisfies the formula.
  const Workload w = llm(2048, 0, 2, 1);
  bfla::Config c = small(0.5f);
  const TileMask base = reference::bfla_estimate(w.problem, w.q.view(), w.k.view(), c);
  c.eta = 4;
  const TileMask more = reference::bfla_estimate(w.problem, w.q.view(), w.k.view(), c);
  const auto b0 = base.to_bitmap(), b1 = more.to_bitmap();
  std::int64_t added = 0;
  for (std::size_t x = 0; x < b0.size(); ++x) {
    REQUIRE(b1[x] >= b0[x]);
    if (b1[x] > b0[x]) {
      ++added;
      const std::int64_t r = static_cast<std::int64_t>(x) / base.shape.num_k_tiles(), t = static_cast<std::int64_t>(x) % base.shape.num_k_tiles();
      CHECK(bfla::stride_rescued(r * base.shape.tile_q / 128, t * 16 / 128, 0, 4));
    }
  }
  CHECK(added > 0);
}

TEST_CASE("one mask per KV head is the union of its query heads; deterministic; odd lengths") {
  const Workload w = llm(1000, 0, 4, 2);
  const bfla::Config c = small(0.6f);
  const TileMask per_kv = reference::bfla_estimate(w.problem, w.q.view(), w.k.view(), c);
  const TileMask per_q = reference::bfla_estimate(w.problem, w.q.view(), w.k.view(), c, true);
  CHECK(per_kv.shape.mask_heads == 2);
  CHECK(per_q.shape.mask_heads == 4);
  CHECK(per_q.union_over_group(4, 2).tiles == per_kv.tiles);
  CHECK(reference::bfla_estimate(w.problem, w.q.view(), w.k.view(), c).tiles == per_kv.tiles);
  CHECK_NOTHROW(per_kv.validate_for(w.problem));
}

TEST_CASE("bfla_mask_from_scores over bfla_group_scores is bfla_estimate (the provider format the GPU test feeds)") {
  const Workload w = llm(1000, 333, 4, 2);  // chunked prefill, partial groups and blocks
  bfla::Config c = small(0.8f);
  c.eta = 5;
  c.rho = 0.05f;
  c.prob_threshold = 0.1f;
  c.min_keep_blocks = 2;
  for (const bool per_q : {false, true}) {
    CAPTURE(per_q);
    const TileMask want = reference::bfla_estimate(w.problem, w.q.view(), w.k.view(), c, per_q);
    const TileMask got = reference::bfla_mask_from_scores(w.problem, c, per_q, [&](std::int64_t b, std::int64_t hq, float* out) {
      const auto s = reference::bfla_group_scores(w.problem, w.q.view(), w.k.view(), c, b, hq);
      std::memcpy(out, s.data(), s.size() * sizeof(float));  // called concurrently: no shared state
    });
    CHECK(got.shape == want.shape);
    CHECK(got.row_ptr == want.row_ptr);
    CHECK(got.tiles == want.tiles);
  }
}

TEST_CASE("bad BFLA parameters are rejected") {
  const Workload w = llm(200);
  auto bad = [&](auto mutate, const char* field) {
    bfla::Config c = small(0.9f);
    mutate(c);
    CHECK_THROWS_WITH_AS(reference::bfla_estimate(w.problem, w.q.view(), w.k.view(), c), doctest::Contains(field), Error);
  };
  bad([](bfla::Config& c) { c.group = 48; }, "group");
  bad([](bfla::Config& c) { c.tile = 48; }, "tile");
  bad([](bfla::Config& c) { c.block = 8; }, "block");
  bad([](bfla::Config& c) { c.gamma = NAN; }, "gamma");
  bad([](bfla::Config& c) { c.eta = -1; }, "eta");
  bad([](bfla::Config& c) { c.rho = -0.5f; }, "rho");
  bad([](bfla::Config& c) { c.n_local = -2; }, "n_local");
}

}  // namespace
}  // namespace spattn::test
