// SpargeAttn tuner: the parameters it returns meet its error bounds when re-run independently, parameters
// survive a JSON round trip, unstructured heads fall back to dense, bad bounds and files are rejected.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/params_file.hpp"
#include "spattn/reference/sparge.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

Workload sample(WorkloadKind kind, std::uint64_t seed) {
  WorkloadSpec s;
  s.kind = kind;
  s.seqlen = 1024;
  s.heads_q = 2;
  s.heads_kv = 1;
  s.head_dim = 64;
  s.seed = seed;
  return make_workload(s);
}

TEST_CASE("tuned parameters meet the error bound on the calibration inputs (re-checked independently)") {
  const std::vector<Workload> samples = {sample(WorkloadKind::llm, test_seed()), sample(WorkloadKind::llm, test_seed() + 1)};
  CalibrationTargets opt;
  opt.l1 = 0.05f;
  opt.l2 = 0.06f;
  opt.theta_steps = 4;
  int calls = 0;
  opt.progress = [&](double f, const std::string&) {
    CHECK(f >= 0.0);
    CHECK(f <= 1.0);
    ++calls;
  };
  const sparge::Params params = std::get<sparge::Params>(calibrate(sparge::Config{}, samples_of(samples), opt));
  CHECK(calls > 0);
  REQUIRE(params.heads.size() == 2);
  for (const Workload& w : samples) {
    const TileMask mask = reference::sparge_estimate(w.problem, w.q.view(), w.k.view(), params.config()).mask;
    AttendOptions a;
    a.pv_threshold_per_head = params.pv_thresholds();
    HostTensor o(DType::f32, 1, 2, 1024, 64), d(DType::f32, 1, 2, 1024, 64);
    attend(w.problem, w.q.view(), w.k.view(), w.v.view(), mask, o.view(), a);
    attend(w.problem, w.q.view(), w.k.view(), w.v.view(), TileMask::dense(mask.shape), d.view());
    for (std::int64_t h = 0; h < 2; ++h) {
      double diff = 0, norm = 0;
      for (std::int64_t i = 0; i < 1024; ++i)
        for (std::int64_t e = 0; e < 64; ++e)
          diff += std::fabs(double(o.get(0, h, i, e)) - d.get(0, h, i, e)), norm += std::fabs(double(d.get(0, h, i, e)));
      CAPTURE(h);
      CHECK(diff / norm < 0.06);
      if (params.heads[static_cast<std::size_t>(h)].dense) CHECK(diff == 0.0);
      else CHECK(params.heads[static_cast<std::size_t>(h)].sparsity > 0.1);
    }
  }

  const auto dir = std::filesystem::temp_directory_path() / ("spattn_tune_" + std::to_string(test_seed()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "p.json").string();
  save_params_json(params, path);
  const sparge::Params back = load_sparge_params(path);
  REQUIRE(back.heads.size() == 2);
  for (std::size_t h = 0; h < 2; ++h) {
    CHECK(back.heads[h].theta == params.heads[h].theta);
    CHECK(back.heads[h].tau == params.heads[h].tau);
    CHECK(back.heads[h].dense == params.heads[h].dense);
    CHECK((back.heads[h].pv_threshold == params.heads[h].pv_threshold ||
           (std::isinf(back.heads[h].pv_threshold) && std::isinf(params.heads[h].pv_threshold))));
  }
  std::ofstream(dir / "bad.json") << "{\"method\": \"sparge\", \"block_q\": 128}";
  CHECK_THROWS_WITH_AS(load_sparge_params((dir / "bad.json").string()), doctest::Contains("bad.json"), Error);
  std::ofstream(dir / "other.json") << "{\"method\": \"sale\"}";
  CHECK_THROWS_WITH_AS(load_sparge_params((dir / "other.json").string()), doctest::Contains("not SpargeAttn"), Error);
  std::filesystem::remove_all(dir);
}

TEST_CASE("heads without exploitable structure are tuned dense; bad bounds are rejected") {
  const std::vector<Workload> samples = {sample(WorkloadKind::random, test_seed())};
  CalibrationTargets opt;
  opt.l1 = 0.001f;
  opt.l2 = 0.001f;
  opt.theta_steps = 2;
  const sparge::Params params = std::get<sparge::Params>(calibrate(sparge::Config{}, samples_of(samples), opt));
  for (const auto& h : params.heads) CHECK(h.dense);
  opt.l2 = 0.0005f;  // l2 < l1
  CHECK_THROWS_WITH_AS(calibrate(sparge::Config{}, samples_of(samples), opt), doctest::Contains("l1"), Error);
  CHECK_THROWS_AS(calibrate(sparge::Config{}, {}, CalibrationTargets{}), Error);
}

}  // namespace
}  // namespace spattn::test
