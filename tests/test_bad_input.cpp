// Bad input never crashes, hangs or is silently changed (issue 19): sizes that overflow or exceed the
// allocation limit, parameters out of range (one wording: "<name>: must be in [lo, hi], got x"), an explicit 0
// that is a value and not "the default", inputs whose scores would overflow fp32. Each case asserts the message.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "common.hpp"
#include "spattn/checked.hpp"
#include "spattn/input_range.hpp"
#include "spattn/params_file.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

constexpr std::int64_t k2to62 = std::int64_t{1} << 62;

Problem small_problem(bool causal = true) {
  Problem p;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.seqlen_q = p.seqlen_kv = 64;
  p.head_dim = 32;
  p.causal = causal;
  return p;
}

/// f32 Q, K, V of `p` with every value ±x (signs from this run's seed).
struct Inputs {
  HostTensor q, k, v, o;
  explicit Inputs(const Problem& p, float x = 1.0f)
      : q(DType::f32, p.batch, p.heads_q, p.seqlen_q, p.head_dim),
        k(DType::f32, p.batch, p.heads_kv, p.seqlen_kv, p.head_dim),
        v(DType::f32, p.batch, p.heads_kv, p.seqlen_kv, p.dim_v()),
        o(DType::f32, p.batch, p.heads_q, p.seqlen_q, p.dim_v()) {
    for (HostTensor* t : {&q, &k, &v}) {
      fill_random(*t);
      for (std::int64_t h = 0; h < t->heads(); ++h)
        for (std::int64_t n = 0; n < t->seqlen(); ++n)
          for (std::int64_t d = 0; d < t->dim(); ++d) t->set(0, h, n, d, std::copysign(x, t->get(0, h, n, d)));
    }
  }
};

TEST_CASE("checked sizes: products, sums and bytes that do not fit are errors naming the argument") {
  CHECK(checked_product("x", {3, 5, 7}) == 105);
  CHECK(checked_bytes("x", {2, 3}, 4) == 24);
  CHECK(ceil_div(std::numeric_limits<std::int64_t>::max(), 2) == std::int64_t{1} << 62);
  CHECK_THROWS_WITH_AS(checked_product("x", {k2to62, 4}), "x: 4611686018427387904 × 4 does not fit in 64 bits", Error);
  CHECK_THROWS_WITH_AS(checked_sum("y", {k2to62, k2to62}), "y: 4611686018427387904 + 4611686018427387904 does not fit in 64 bits",
                       Error);
  CHECK_THROWS_WITH_AS(checked_bytes("z", {std::int64_t{1} << 38, 5}, 1),
                       "z: 274877906944 × 5 elements of 1 bytes exceed the limit of one array, 1099511627776 bytes "
                       "(2^40, spattn::kMaxAllocationBytes)",
                       Error);
  CHECK_THROWS_WITH_AS(checked_product("w", {2, -1}), "w: negative extent in 2 × -1", Error);
}

TEST_CASE("a tensor whose element count overflows is refused before allocation (was a segfault)") {
  CHECK_THROWS_WITH_AS(HostTensor(DType::bf16, 1, 4, k2to62, 64),
                       "HostTensor [batch, heads, seqlen, dim]: 1 × 4 × 4611686018427387904 × 64 does not fit in 64 bits",
                       Error);
  Problem p = small_problem();
  p.seqlen_q = p.seqlen_kv = k2to62;
  CHECK_THROWS_WITH_AS(p.validate(), "q [batch, heads_q, seqlen_q, head_dim]: 1 × 2 × 4611686018427387904 × 32 does not fit in 64 bits",
                       Error);
}

TEST_CASE("a problem beyond the allocation limit is refused with the limit (was std::bad_alloc)") {
  Problem p = small_problem();
  p.heads_q = p.heads_kv = 1;
  p.seqlen_q = p.seqlen_kv = 1000000000000;
  CHECK_THROWS_WITH_AS(p.validate(),
                       "q [batch, heads_q, seqlen_q, head_dim]: 1 × 1 × 1000000000000 × 32 elements of 4 bytes exceed the "
                       "limit of one array, 1099511627776 bytes (2^40, spattn::kMaxAllocationBytes)",
                       Error);
  MaskShape s;
  s.tile_q = 16;
  s.tile_k = 1;
  s.seqlen_q = s.seqlen_kv = std::int64_t{1} << 30;
  CHECK_THROWS_WITH_AS(s.validate(), doctest::Contains("mask [batch, mask_heads, query tiles, key tiles]: 67108864 × 1073741824 "
                                                       "elements of 4 bytes exceed the limit"),
                       Error);
}

TEST_CASE("validating a large uniform batch does not loop over it (was a hang)") {
  Problem p = small_problem();
  p.batch = std::int64_t{1} << 30;  // within the limits: 2^30 × 2 × 1 × 32 fp32 = 256 GiB per tensor
  p.seqlen_q = p.seqlen_kv = 1;
  MaskShape s = MaskShape::of(small_problem(), 16, 16);
  s.batch = p.batch;
  const auto start = std::chrono::steady_clock::now();
  p.validate();
  s.validate();
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 0.05);
}

TEST_CASE("method parameters out of range: one wording, the field and the value") {
  auto message = [](const MethodConfig& c) {
    try {
      validate(c, small_problem());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  anchor_attn::Config anchor;
  anchor.step = 16777217;  // 128 × 16777217 overflowed int32
  CHECK(message(anchor) == "anchor step: must be in [1, 2048], got 16777217");
  anchor.step = 2048;
  CHECK(message(anchor) == "anchor block×step (rows per group): must be in [16, 2048], got 262144");
  anchor = {};
  anchor.theta = -1.0f;
  CHECK(message(anchor) == "anchor theta: must be in [0, inf] (inf = dense; or -inf: the anchor region only), got -1");
  anchor.theta = -INFINITY;
  CHECK(message(anchor) == "(accepted)");

  DenseConfig dense;
  dense.tile_q = 0;
  CHECK(message(dense) == "dense tile_q: must be in [16, 2048], got 0");

  bfla::Config bf;
  bf.gamma = -1.0f;  // behaved like 0
  CHECK(message(bf) == "bfla gamma: must be in [0, 1] (1 = dense, 0 = no mass rule), got -1");
  bf.gamma = 2.0f;
  CHECK(message(bf) == "bfla gamma: must be in [0, 1] (1 = dense, 0 = no mass rule), got 2");
  bf = {};
  bf.tile = 0;
  CHECK(message(bf) == "bfla tile: must be in [1, 128], got 0");
  bf = {};
  bf.rho = 1.5f;
  CHECK(message(bf) == "bfla rho: must be in [0, 1] (0 = off), got 1.5");
  bf = {};
  bf.seed = std::numeric_limits<std::int64_t>::max();
  CHECK(message(bf) == "bfla seed: must be in [0, 2147483648], got 9223372036854775807");

  sparge::Config sp;
  sp.theta = {5.0f};
  CHECK(message(sp) == "sparge theta: must be in [-1, 1] (1 = no block self-similar: dense), got 5");
  sp = {};
  sp.tau = {2.0f};
  CHECK(message(sp) == "sparge tau: must be in [0, 1], got 2");
  sp = {};
  sp.topk = NAN;
  CHECK(message(sp) == "sparge topk: must be in [0, 1] (0 = TopCdf), got nan");

  fg_attn::Config fg;
  fg.top_p = 0.0f;
  CHECK(message(fg) == "fgattn top_p: must be in (0, 1] (1 keeps every tile), got 0");
  fg.top_p = 1.5f;
  CHECK(message(fg) == "fgattn top_p: must be in (0, 1] (1 keeps every tile), got 1.5");

  sale::Config sa;
  sa.tau = {2.0f};
  CHECK(message(sa) == "sale tau: must be in [0, 1] (0 = dense head), got 2");
}

TEST_CASE("executor options out of range are rejected by attend()") {
  const Problem p = small_problem();
  Inputs in(p);
  const TileMask mask = TileMask::dense(MaskShape::of(p, 16, 16));
  auto message = [&](auto mutate) {
    AttendOptions o;
    mutate(o);
    try {
      attend(p, in.q.view(), in.k.view(), in.v.view(), mask, in.o.view(), o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  CHECK(message([](AttendOptions& o) { o.pv_vote_rows = 7; }) ==
        "pv_vote_rows: must be 0 (the whole row block), 16, 32, 64 or 128, got 7");
  CHECK(message([](AttendOptions& o) { o.pv_threshold = -1.0f; }) == "pv_threshold: must be in [0, inf] (inf = off), got -1");
  CHECK(message([](AttendOptions& o) { o.quant_block_k = 0; }) == "quant_block_k: must be in [1, 1048576], got 0");
  CHECK(message([](AttendOptions& o) { o.pv_vote_rows = 32; }) == "(accepted)");
}

TEST_CASE("an explicit 0 is a value, not the default: scale = 0 is uniform attention") {
  Problem p = small_problem(false);
  p.scale = 0.0f;
  Inputs in(p);
  fill_random(in.q, 3.0);
  attend_dense(p, in.q.view(), in.k.view(), in.v.view(), in.o.view());
  for (std::int64_t d = 0; d < p.head_dim; ++d) {
    double mean = 0;
    for (std::int64_t j = 0; j < p.seqlen_kv; ++j) mean += in.v.get(0, 0, j, d);
    mean /= static_cast<double>(p.seqlen_kv);
    CHECK(in.o.get(0, 1, 17, d) == doctest::Approx(mean).epsilon(1e-5));
  }
  p.scale = std::numeric_limits<float>::max();  // scale·log2 e was inf: NaN outputs (found by fuzz_api)
  CHECK_THROWS_WITH_AS(p.validate(), "scale: must be in [0, 1.84467e+19], got 3.40282e+38", Error);
  WorkloadSpec s;
  s.seqlen = 64;
  s.seqlen_q = 0;
  CHECK_THROWS_WITH_AS(make_workload(s), "workload seqlen_q: must be in [1, 64], got 0", Error);
}

TEST_CASE("inputs whose scores overflow fp32 are reported as such by attend() and estimate()") {
  const Problem p = small_problem();
  Inputs huge(p, 1e20f);  // finite, but q·k = 32e40 is not
  const TileMask mask = TileMask::dense(MaskShape::of(p, 16, 16));
  const std::string overflow = "scores overflow fp32: head_dim · max|q| · max|k| · max(scale, 1) = 3.2e+41 exceeds 2^100 "
                               "(max|q| = 1e+20 at batch 0, head 0, row 0, dim 0; max|k| = 1e+20 at batch 0, head 0, "
                               "row 0, dim 0); scale the inputs down";
  CHECK_THROWS_WITH_AS(attend(p, huge.q.view(), huge.k.view(), huge.v.view(), mask, huge.o.view()), overflow.c_str(), Error);
  for (const MethodInfo& m : method_registry())
    CHECK_THROWS_WITH_AS(estimate(m.defaults, p, huge.q.view(), huge.k.view()), overflow.c_str(), Error);

  Inputs big_v(p);
  for (std::int64_t j = 0; j < p.seqlen_kv; ++j) big_v.v.set(0, 0, j, 3, 1e29f);
  CHECK_THROWS_WITH_AS(attend(p, big_v.q.view(), big_v.k.view(), big_v.v.view(), mask, big_v.o.view()),
                       doctest::Contains("v: sums over the sequence overflow fp32: seqlen_kv · max|v| = 6.4e+30 exceeds 2^100 (max|v| = "), Error);

  Inputs nan(p);
  nan.k.set(0, 0, 3, 5, NAN);
  Inputs big_k(p);
  big_k.k.set(0, 0, 5, 1, 3e38f);
  big_k.q.set(0, 0, 0, 0, 0.0f);
  Problem zero_scale = p;
  zero_scale.scale = 0.0f;  // q·k is formed before the scale: a scale of 0 does not make it finite (found by fuzz_api)
  CHECK_THROWS_WITH_AS(attend(zero_scale, big_k.q.view(), big_k.k.view(), big_k.v.view(), mask, big_k.o.view()),
                       doctest::Contains("scores overflow fp32: head_dim · max|q| · max|k| · max(scale, 1) = "), Error);

  CHECK_THROWS_WITH_AS(estimate(default_config("sparge"), p, nan.q.view(), nan.k.view()),
                       "k: not finite (nan) at batch 0, head 0, row 3, dim 5", Error);
  nan.q.set(0, 1, 9, 0, -INFINITY);
  CHECK_THROWS_WITH_AS(attend(p, nan.q.view(), nan.k.view(), nan.v.view(), mask, nan.o.view()),
                       "q: not finite (-inf) at batch 0, head 1, row 9, dim 0", Error);
}

TEST_CASE("inputs just inside the range give finite outputs for every method and executor mode") {
  Problem p = small_problem();
  p.seqlen_q = p.seqlen_kv = 300;
  // head_dim · x² · max(scale, 1) = 2^99: half the largest magnitude the rule lets through.
  const float x = static_cast<float>(std::sqrt(std::ldexp(1.0, kInputRangeLog2 - 1) / 32.0));
  Inputs in(p, x);
  for (HostTensor* t : {&in.v}) fill_random(*t, 1e20);
  for (const MethodInfo& m : method_registry()) {
    for (bool int8 : {false, true}) {
      AttendOptions o;
      o.qk_int8 = int8;
      o.pv_threshold = 4.0f;
      in.o.poison();
      sparse_attention(m.defaults, p, in.q.view(), in.k.view(), in.v.view(), in.o.view(), o);
      CHECK_MESSAGE(in.o.all_finite(), m.name, int8 ? " (int8)" : "");
    }
  }
}

TEST_CASE("a sequence without keys in a variable-length batch: every method keeps nothing there, attention gives zeros") {
  // BFLA wrote its sink block through an empty vector here (found by fuzz_api).
  Problem p = small_problem(false);
  p.batch = 2;
  p.seqlen_q = 40;
  p.seqlen_kv = 50;
  p.cu_seqlens_q = {0, 40, 70};
  p.cu_seqlens_kv = {0, 50, 50};
  HostTensor q(DType::f32, 1, 2, 70, 32, Layout::bnhd), k(DType::f32, 1, 1, 50, 32, Layout::bnhd), v = k;
  HostTensor o(DType::f32, 1, 2, 70, 32, Layout::bnhd);
  for (HostTensor* t : {&q, &k, &v}) fill_random(*t);
  for (const MethodInfo& m : method_registry()) {
    CAPTURE(m.name);
    const Estimate e = estimate(m.defaults, p, q.view(), k.view());
    for (std::int64_t h = 0; h < e.mask.shape.mask_heads; ++h)
      for (std::int64_t t = 0; t < e.mask.shape.num_q_tiles(); ++t) CHECK(e.mask.row(1, h, t).empty());
    o.poison();
    attend(p, q.view(), k.view(), v.view(), e.mask, o.view());
    for (std::int64_t n = 40; n < 70; ++n) CHECK(o.get(0, 1, n, 7) == 0.0f);
  }
}

TEST_CASE("parameter files: no wrap-around, no silent inf, errors name the file") {
  const std::string head = R"({"theta": -0.1, "tau": 0.9, "pv_threshold": "inf", "dense": false})";
  auto sparge_file = [&](const std::string& block_q, const std::string& theta) {
    return R"({"method": "sparge", "block_q": )" + block_q + R"(, "block_k": 64, "heads": [{"theta": )" + theta +
           R"(, "tau": 0.9, "pv_threshold": "inf", "dense": false}, )" + head + "]}";
  };
  CHECK(parse_sparge_params(sparge_file("128", "0.5"), "p.json").heads.size() == 2);
  // 2^32 + 128 used to load as block_q = 128.
  CHECK_THROWS_WITH_AS(parse_sparge_params(sparge_file("4294967424", "0.5"), "p.json"),
                       "params 'p.json': block_q: 4294967424 does not fit in 32 bits", Error);
  CHECK_THROWS_WITH_AS(parse_sparge_params(sparge_file("128", "1e300"), "p.json"),
                       "params 'p.json': theta: 1e+300 is beyond the fp32 range", Error);
  CHECK_THROWS_WITH_AS(parse_sparge_params(sparge_file("128", "5"), "p.json"),
                       "params 'p.json': sparge theta: must be in [-1, 1] (1 = no block self-similar: dense), got 5", Error);
  CHECK_THROWS_WITH_AS(parse_sparge_params("[1, 2]", "p.json"), "params 'p.json': not SpargeAttn parameters (method '')",
                       Error);
  CHECK_THROWS_WITH_AS(parse_sale_params(R"({"method": "sale", "bits": 4.5, "local_window": 128, "tau": [0.1]})", "s.json"),
                       "params 's.json': bits: expected an integer, got 4.5", Error);
  CHECK_THROWS_WITH_AS(parse_sale_params(R"({"method": "sale", "bits": 4, "local_window": 128, "tau": [2]})", "s.json"),
                       "params 's.json': sale tau: must be in [0, 1] (0 = dense head), got 2", Error);
}

}  // namespace
}  // namespace spattn::test
