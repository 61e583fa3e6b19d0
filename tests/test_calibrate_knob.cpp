// calibrate() for the methods whose options hold one value for every head (AnchorAttention, FG-Attn, BFLA): the
// setting it returns is one of its main knob's sweep, meets the per-head rel L1 bound when re-run independently (the
// estimate through the reference, the error by a float64 loop of its own), keeps no more tiles than any other passing
// setting, is checked on a held-out input, survives a JSON round trip and loads through configure_method; an
// unreachable bound gives dense, an unbounded one the sparsest setting.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/params_file.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

Workload layer_input(std::uint64_t seed) {
  WorkloadSpec s;
  s.kind = WorkloadKind::llm;
  s.seqlen = 1024;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.head_dim = 64;
  s.seed = seed;
  return make_workload(s);
}

struct Run {
  double worst = 0.0;  ///< the worst head's rel L1 against dense, float64 sums of the test's own
  double density = 0.0;
};

/// The method at `config` on w, checked the test's way: every head's Σ|o − o_dense| / Σ|o_dense|.
Run run(const MethodConfig& config, const Workload& w) {
  const Problem& p = w.problem;
  const TileMask mask = estimate(config, p, w.q.view(), w.k.view()).mask;
  HostTensor o(DType::f32, 1, p.heads_q, p.seqlen_q, p.head_dim), d(DType::f32, 1, p.heads_q, p.seqlen_q, p.head_dim);
  attend(p, w.q.view(), w.k.view(), w.v.view(), mask, o.view(), attend_options_of(config));
  attend(p, w.q.view(), w.k.view(), w.v.view(), TileMask::dense(MaskShape::of(p, 128, 128)), d.view());
  Run r;
  for (std::int64_t h = 0; h < p.heads_q; ++h) {
    double diff = 0, norm = 0;
    for (std::int64_t i = 0; i < p.seqlen_q; ++i)
      for (std::int64_t e = 0; e < p.head_dim; ++e) {
        diff += std::fabs(double(o.get(0, h, i, e)) - double(d.get(0, h, i, e)));
        norm += std::fabs(double(d.get(0, h, i, e)));
      }
    r.worst = std::max(r.worst, diff / norm);
  }
  const TileMask::Stats s = mask.stats();
  r.density = double(s.kept_tiles) / double(s.reachable_tiles);
  return r;
}

/// The method's configuration for these 1024-row inputs: the default, but AnchorAttention in groups of 2 × 128 rows
/// (its default 16 × 128 would put every row in its anchor region).
MethodConfig base_of(const std::string& method) {
  MethodConfig c = default_config(method);
  if (auto* a = std::get_if<anchor_attn::Config>(&c)) a->step = 2;
  return c;
}

MethodConfig with_knob(const std::string& method, double value) {
  MethodConfig c = base_of(method);
  const NamedValue v{std::string(main_knob(option_table(c))->name), value};
  set_options(c, {&v, 1}, UnknownOptions::error);
  return c;
}

}  // namespace

TEST_CASE("calibrate: the main knob of AnchorAttention, FG-Attn and BFLA within a per-head rel L1 bound") {
  const std::uint64_t seed = test_seed();
  const std::vector<Workload> samples = {layer_input(seed), layer_input(seed + 1)};
  const Workload held_out = layer_input(seed + 2);
  for (const std::string method : {"anchor", "fgattn", "bfla"}) {
    CAPTURE(method);
    const Option* knob = main_knob(option_table(method));
    REQUIRE(knob != nullptr);
    CalibrationTargets t;
    t.rel_l1 = 0.1f;
    const KnobParams p = std::get<KnobParams>(calibrate(base_of(method), samples_of(samples), t));
    CHECK(p.method == method);
    CHECK(p.option == knob->name);
    CHECK(p.bound == doctest::Approx(0.1));
    if (p.dense) {  // then no setting of the sweep passes on the samples
      MESSAGE(method, ": dense (no ", p.option, " setting within 0.1)");
      for (double v : knob->sweep) {
        double worst = 0;
        for (const Workload& w : samples) worst = std::max(worst, run(with_knob(method, v), w).worst);
        CHECK(worst > 0.1 * (1 - 1e-9));
      }
      continue;
    }
    // One of the sweep's settings, which meets the bound on every sample when re-run independently ...
    CHECK(std::find(knob->sweep.begin(), knob->sweep.end(), p.value) != knob->sweep.end());
    double worst = 0, kept_density = 0;
    for (const Workload& w : samples) {
      const Run r = run(p.config(), w);
      worst = std::max(worst, r.worst);
      kept_density += r.density / double(samples.size());
    }
    CHECK(worst <= 0.1 * (1 + 1e-9));
    CHECK(worst == doctest::Approx(p.worst_rel_l1).epsilon(1e-6));
    // ... and keeps no more tiles than any other passing setting (equal sample sizes: mean density = total density).
    CHECK(kept_density == doctest::Approx(p.density).epsilon(1e-9));
    for (double v : knob->sweep) {
      double w_worst = 0, w_density = 0;
      for (const Workload& w : samples) {
        const Run r = run(with_knob(method, v), w);
        w_worst = std::max(w_worst, r.worst);
        w_density += r.density / double(samples.size());
      }
      if (w_worst <= 0.1) CHECK(w_density >= p.density * (1 - 1e-9));
    }
    // A held-out input (another seed of the same workload): reported, and within a few times the bound.
    const Run h = run(p.config(), held_out);
    CHECK(p.density < 1.0);  // a sparse setting passes on these inputs
    MESSAGE(method, ": ", p.option, " ", p.value, " density ", p.density, ", samples ", p.worst_rel_l1, ", held-out ",
            h.worst, " (bound 0.1)");
    CHECK(h.worst < 4 * 0.1);
  }
}

TEST_CASE("calibrate: an unreachable bound gives dense, an unbounded one the sparsest setting") {
  const std::vector<Workload> samples = {layer_input(test_seed() + 7)};
  CalibrationTargets t;
  t.rel_l1 = 1e-12f;
  const KnobParams none = std::get<KnobParams>(calibrate(default_config("fgattn"), samples_of(samples), t));
  CHECK(none.dense);
  CHECK(std::holds_alternative<DenseConfig>(none.config()));
  t.rel_l1 = 1e9f;
  const KnobParams any = std::get<KnobParams>(calibrate(default_config("fgattn"), samples_of(samples), t));
  REQUIRE(!any.dense);
  for (double v : main_knob(option_table("fgattn"))->sweep)
    CHECK(run(with_knob("fgattn", v), samples[0]).density >= any.density * (1 - 1e-9));
  t.rel_l1 = 0.0f;
  CHECK_THROWS_WITH_AS(calibrate(default_config("fgattn"), samples_of(samples), t),
                       doctest::Contains("rel_l1"), Error);
  CHECK_THROWS_WITH_AS(calibrate(DenseConfig{}, samples_of(samples), t), doctest::Contains("nothing to calibrate"),
                       Error);
}

TEST_CASE("calibrated knob files: round trip, loading by name, other methods' files refused") {
  const auto dir = std::filesystem::temp_directory_path() / ("spattn_knob_" + std::to_string(test_seed()));
  std::filesystem::create_directories(dir);
  KnobParams p;
  p.method = "fgattn";
  p.option = "top_p";
  p.value = 0.95;
  p.bound = 0.01;
  p.worst_rel_l1 = 0.0071;
  p.density = 0.42;
  p.base = {{"tile_q", 64.0}, {"semantics", 1.0}, {"top_p", 0.5}};  // the search's start (top_p: the knob's value wins)
  const std::string path = (dir / "fg.json").string();
  save_params_json(p, path);
  const KnobParams back = load_knob_params(path);
  CHECK(back.method == p.method);
  CHECK(back.option == p.option);
  CHECK(back.value == p.value);
  CHECK(back.dense == p.dense);
  CHECK(back.bound == p.bound);
  CHECK(back.worst_rel_l1 == p.worst_rel_l1);
  CHECK(back.density == p.density);
  REQUIRE(back.base.size() == 3);
  const fg_attn::Config fc = std::get<fg_attn::Config>(back.config());
  CHECK(fc.tile_q == 64);
  CHECK(fc.semantics == fg_attn::Semantics::union_keys);
  CHECK(fc.top_p == 0.95f);
  const NamedValue file{"params", path};
  const MethodConfig c = configure_method("fgattn", {&file, 1}, 4, UnknownOptions::error);
  CHECK(std::get<fg_attn::Config>(c).top_p == 0.95f);
  CHECK_THROWS_WITH_AS(configure_method("anchor", {&file, 1}, 4, UnknownOptions::error),
                       doctest::Contains("not anchor"), Error);
  CHECK_THROWS_WITH_AS(load_sparge_params(path), doctest::Contains("not SpargeAttn"), Error);
  std::ofstream(dir / "bad.json") << R"({"method": "fgattn", "option": "theta", "value": 1, "dense": false})";
  CHECK_THROWS_WITH_AS(load_knob_params((dir / "bad.json").string()), doctest::Contains("bad.json"), Error);
  std::ofstream(dir / "range.json") << R"({"method": "fgattn", "option": "top_p", "value": 1.5, "dense": false})";
  CHECK_THROWS_WITH_AS(load_knob_params((dir / "range.json").string()), doctest::Contains("top_p"), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace spattn::test
