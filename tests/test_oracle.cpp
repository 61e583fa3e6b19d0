// The oracle mask (spattn/oracle.hpp): tile masses against an independent fp64 computation, optimality against a
// brute force over every mask of tiny problems, determinism over thread counts, shapes (odd lengths, GQA, Nq < Nkv,
// per-KV-head masks), and bad input.
#include <doctest/doctest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common.hpp"
#include "spattn/oracle.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

struct Inputs {
  Problem p;
  HostTensor q, k;
};

Inputs random_inputs(std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nkv, bool causal,
                     double spread = 2.0, std::int64_t d = 32) {
  Inputs in;
  in.p.heads_q = hq;
  in.p.heads_kv = hkv;
  in.p.seqlen_q = nq;
  in.p.seqlen_kv = nkv;
  in.p.head_dim = d;
  in.p.causal = causal;
  in.p.dtype = DType::f32;
  in.q = HostTensor(DType::f32, 1, hq, nq, d);
  in.k = HostTensor(DType::f32, 1, hkv, nkv, d);
  fill_random(in.q, spread);
  fill_random(in.k, 1.0);
  return in;
}

/// fp64 tile masses, written from the definition: per row the softmax over the keys it sees, summed per tile, over
/// the rows of the query tile and the query heads of the mask head. [rows of the shape][key tiles].
std::vector<std::vector<double>> masses_fp64(const Inputs& in, const MaskShape& s) {
  const Problem& p = in.p;
  const std::int64_t tq = s.num_q_tiles(), tk = s.num_k_tiles();
  std::vector<std::vector<double>> out(static_cast<std::size_t>(s.num_rows()), std::vector<double>(tk, 0.0));
  const double scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  const std::int64_t group = p.heads_q / p.heads_kv;
  for (std::int64_t hq = 0; hq < p.heads_q; ++hq) {
    const std::int64_t mh = s.mask_heads == p.heads_q ? hq : hq / group;
    for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
      std::vector<double> x;
      for (std::int64_t j = 0; j < p.seqlen_kv; ++j) {
        if (p.causal && j > i + p.seqlen_kv - p.seqlen_q) break;
        double dot = 0;
        for (std::int64_t e = 0; e < p.head_dim; ++e) dot += double(in.q.get(0, hq, i, e)) * in.k.get(0, hq / group, j, e);
        x.push_back(dot * scale);
      }
      if (x.empty()) continue;
      const double m = *std::max_element(x.begin(), x.end());
      double l = 0;
      for (double& v : x) l += (v = std::exp(v - m));
      auto& row = out[static_cast<std::size_t>(mh * tq + i / s.tile_q)];
      for (std::size_t j = 0; j < x.size(); ++j) row[j / static_cast<std::size_t>(s.tile_k)] += x[j] / l;
    }
  }
  return out;
}

double kept_mass(const std::vector<std::vector<double>>& m, const TileMask& mask) {
  double sum = 0;
  for (std::int64_t r = 0; r < mask.shape.num_rows(); ++r)
    for (std::int64_t i = mask.row_ptr[r]; i < mask.row_ptr[r + 1]; ++i)
      sum += m[static_cast<std::size_t>(r)][static_cast<std::size_t>(mask.tiles[i])];
  return sum;
}

}  // namespace

TEST_CASE("oracle tile masses equal an fp64 computation (odd lengths, GQA, Nq < Nkv, per-KV-head masks)") {
  struct Shape {
    std::int64_t hq, hkv, nq, nkv;
    bool causal;
    std::int32_t tile_q, tile_k;
    bool per_kv;
  };
  for (const Shape c : {Shape{1, 1, 37, 37, true, 16, 5, false}, Shape{4, 2, 29, 61, true, 16, 8, false},
                        Shape{4, 2, 29, 61, true, 16, 8, true}, Shape{2, 1, 50, 33, false, 32, 1, true},
                        Shape{3, 3, 17, 100, false, 16, 128, false}}) {
    CAPTURE(c.nq);
    CAPTURE(c.nkv);
    CAPTURE(c.tile_q);
    CAPTURE(c.tile_k);
    CAPTURE(c.per_kv);
    const Inputs in = random_inputs(c.hq, c.hkv, c.nq, c.nkv, c.causal);
    const MaskShape s = MaskShape::of(in.p, c.tile_q, c.tile_k, c.per_kv);
    const OracleMass m = oracle_tile_mass(in.p, in.q.view(), in.k.view(), s);
    CHECK(m.heads_per_row == (c.per_kv ? c.hq / c.hkv : 1));
    const auto want = masses_fp64(in, s);
    for (std::int64_t r = 0; r < s.num_rows(); ++r) {
      const auto got = m.row(r);
      const std::int64_t t = r % s.num_q_tiles();
      REQUIRE(static_cast<std::int64_t>(got.size()) == s.reachable_k_tiles(0, t));
      double total = 0;
      for (std::size_t kt = 0; kt < got.size(); ++kt) {
        CHECK(got[kt] == doctest::Approx(want[static_cast<std::size_t>(r)][kt]).epsilon(1e-4).scale(1.0));
        total += got[kt];
      }
      // Every row sees a key here: a tile's masses add up to its rows times the heads summed.
      const std::int64_t rows = std::min<std::int64_t>(s.tile_q, c.nq - t * s.tile_q);
      CHECK(total == doctest::Approx(double(rows * m.heads_per_row)).epsilon(1e-4));
    }
  }
}

TEST_CASE("oracle masks are optimal: brute force over every mask of a tiny problem") {
  // Two query tiles × 6 key tiles (non-causal), peaky softmax so tile masses differ widely.
  const Inputs in = random_inputs(1, 1, 32, 24, false, 3.0, 32);
  const MaskShape s = MaskShape::of(in.p, 16, 4);
  const OracleMass m = oracle_tile_mass(in.p, in.q.view(), in.k.view(), s);
  const auto exact = masses_fp64(in, s);
  const int n = 6, rows = 2;
  REQUIRE(s.num_k_tiles() == n);
  REQUIRE(s.num_rows() == rows);
  auto bit_mass = [&](int r, unsigned bits) {
    double sum = 0;
    for (int k = 0; k < n; ++k)
      if (bits & (1u << k)) sum += exact[static_cast<std::size_t>(r)][static_cast<std::size_t>(k)];
    return sum;
  };
  constexpr double kSlack = 1e-5;  // fp32 masses: a tie within this may be broken either way

  SUBCASE("density ρ: no k tiles of a row hold more mass") {
    for (int k = 1; k <= n; ++k) {
      const TileMask mask = oracle_mask(m, OracleBudget::density(float(k) / n));
      for (int r = 0; r < rows; ++r) {
        REQUIRE(mask.row(0, 0, r).size() == static_cast<std::size_t>(k));
        double got = 0, best = 0;
        for (std::int32_t t : mask.row(0, 0, r)) got += exact[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)];
        for (unsigned bits = 0; bits < (1u << n); ++bits)
          if (std::popcount(bits) == k) best = std::max(best, bit_mass(r, bits));
        CHECK(got >= best - kSlack);
      }
    }
  }
  SUBCASE("mass τ: the fewest tiles of a row that reach τ of its mass") {
    for (float tau : {0.3f, 0.5f, 0.8f, 0.9f, 0.99f, float(uniform(0.05, 0.999))}) {
      CAPTURE(tau);
      const TileMask mask = oracle_mask(m, OracleBudget::mass(tau));
      for (int r = 0; r < rows; ++r) {
        const double z = bit_mass(r, (1u << n) - 1);
        double got = 0;
        for (std::int32_t t : mask.row(0, 0, r)) got += exact[static_cast<std::size_t>(r)][static_cast<std::size_t>(t)];
        const int kept = static_cast<int>(mask.row(0, 0, r).size());
        CHECK(got >= tau * z - kSlack);
        for (unsigned bits = 0; bits < (1u << n); ++bits)
          if (std::popcount(bits) == kept - 1) CHECK(bit_mass(r, bits) < tau * z + kSlack);
      }
    }
  }
  SUBCASE("threshold ε: no mask with as many tiles (one per row at least) keeps more total mass") {
    for (float eps : {0.5f, 0.2f, 0.1f, 0.03f, 0.01f, 1e-3f, float(uniform(1e-4, 0.3))}) {
      CAPTURE(eps);
      const TileMask mask = oracle_mask(m, OracleBudget::threshold(eps));
      const int kept = static_cast<int>(mask.tiles.size());
      const double got = kept_mass(exact, mask);
      double best = 0;
      for (unsigned a = 1; a < (1u << n); ++a)
        for (unsigned b = 1; b < (1u << n); ++b)
          if (std::popcount(a) + std::popcount(b) == kept) best = std::max(best, bit_mass(0, a) + bit_mass(1, b));
      CHECK(got >= best - kSlack);
      for (int r = 0; r < rows; ++r)  // and it is the rule: a kept tile's mass per row >= ε, a dropped one's below
        for (int k = 0; k < n; ++k) {
          const auto row = mask.row(0, 0, r);
          const bool keep = std::find(row.begin(), row.end(), k) != row.end();
          const double per_row = m.row(r)[static_cast<std::size_t>(k)] / 16.0;
          if (!keep) CHECK(per_row < eps);
          if (keep && row.size() > 1) CHECK(per_row >= eps);
        }
    }
  }
}

TEST_CASE("oracle: full budgets give the dense mask; smaller budgets keep nested, heaviest-first tiles") {
  const Inputs in = random_inputs(2, 1, 70, 90, true);
  const MaskShape s = MaskShape::of(in.p, 16, 8, true);
  const OracleMass m = oracle_tile_mass(in.p, in.q.view(), in.k.view(), s);
  const TileMask dense = TileMask::dense(s);
  CHECK(oracle_mask(m, OracleBudget::mass(1.0f)).tiles == dense.tiles);
  CHECK(oracle_mask(m, OracleBudget::density(1.0f)).tiles == dense.tiles);
  CHECK(oracle_mask(m, OracleBudget::threshold(0.0f)).tiles == dense.tiles);
  std::int64_t last = 0;
  for (float tau : {0.1f, 0.5f, 0.9f, 0.99f, 0.999f}) {
    const TileMask a = oracle_mask(m, OracleBudget::mass(tau));
    CHECK(a.stats().empty_rows == 0);
    CHECK(static_cast<std::int64_t>(a.tiles.size()) >= last);
    last = static_cast<std::int64_t>(a.tiles.size());
  }
  // The one-call form is the two-step form.
  CHECK(oracle_mask(in.p, in.q.view(), in.k.view(), s, OracleBudget::mass(0.9f)).tiles ==
        oracle_mask(m, OracleBudget::mass(0.9f)).tiles);
}

TEST_CASE("oracle tile masses are the same bits for 1 and 2 threads") {
  const Workload w = test_workload(WorkloadKind::llm, 700, 4, 2);
  const MaskShape s = MaskShape::of(w.problem, 32, 16);
  OracleMass one, two;
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 1);
    one = oracle_tile_mass(w.problem, w.q.view(), w.k.view(), s);
  }
  {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, 2);
    two = oracle_tile_mass(w.problem, w.q.view(), w.k.view(), s);
  }
  REQUIRE(one.mass.size() == two.mass.size());
  CHECK(std::memcmp(one.mass.data(), two.mass.data(), one.mass.size() * sizeof(float)) == 0);
}

TEST_CASE("oracle: bad input names the field") {
  const Inputs in = random_inputs(2, 1, 40, 40, true);
  const MaskShape s = MaskShape::of(in.p, 16, 8);
  CHECK_THROWS_WITH_AS(OracleBudget::mass(0.0f).validate(), contains("oracle mass budget: must be in (0, 1]"), Error);
  CHECK_THROWS_WITH_AS(OracleBudget::density(1.5f).validate(), contains("oracle density budget: must be in (0, 1]"),
                       Error);
  CHECK_THROWS_WITH_AS(OracleBudget::threshold(NAN).validate(), contains("oracle threshold budget"), Error);
  CHECK_THROWS_WITH_AS(oracle_mask(in.p, in.q.view(), in.k.view(), s, OracleBudget::mass(-1.0f)),
                       contains("oracle mass budget"), Error);
  MaskShape other = s;
  other.seqlen_kv = 41;
  CHECK_THROWS_WITH_AS(oracle_tile_mass(in.p, in.q.view(), in.k.view(), other), contains("oracle shape lengths"), Error);
  other = s;
  other.causal = false;
  CHECK_THROWS_WITH_AS(oracle_tile_mass(in.p, in.q.view(), in.k.view(), other), contains("oracle shape causal"), Error);
  other = s;
  other.mask_heads = 3;
  CHECK_THROWS_WITH_AS(oracle_tile_mass(in.p, in.q.view(), in.k.view(), other), contains("oracle shape mask_heads"),
                       Error);
  HostTensor bad = in.q;
  bad.set(0, 1, 7, 3, NAN);
  CHECK_THROWS_WITH_AS(oracle_tile_mass(in.p, bad.view(), in.k.view(), s), contains("q: not finite"), Error);
  OracleMass m = oracle_tile_mass(in.p, in.q.view(), in.k.view(), s);
  m.mass.pop_back();
  CHECK_THROWS_WITH_AS(oracle_mask(m, OracleBudget::mass(0.5f)), contains("oracle mass: offsets"), Error);
}

}  // namespace spattn::test
