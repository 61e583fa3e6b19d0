#include "run.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>
#include <nlohmann/json.hpp>

#include "mask_png.hpp"
#include "spattn/params_file.hpp"
#include "spattn/mask_file.hpp"
#include "spattn/metrics.hpp"
#include "spattn/error.hpp"
#include "spattn/npy.hpp"
#include "spattn/spattn.hpp"

namespace spattn::cli {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

HostTensor output_like(const Workload& w) {
  return HostTensor(DType::f32, w.problem.batch, w.problem.heads_q, w.problem.seqlen_q, w.problem.dim_v());
}

}  // namespace

ErrorStats compare_outputs(const std::vector<float>& got, const std::vector<float>& want) {
  const OutputError e = output_error(got, want);
  require(e.first_non_finite < 0, "internal: non-finite output at element ", e.first_non_finite);
  return {e.rel_l1, e.max_abs};
}

std::vector<float> dense_output(const Workload& w, const std::string& backend) {
  HostTensor dense = output_like(w);
  dense.poison();
  AttendOptions options;
  options.backend = backend;
  attend_dense(w.problem, w.q.view(), w.k.view(), w.v.view(), dense.view(), options);
  return dense.to_float();
}

ErrorStats mask_error(const Workload& w, const TileMask& mask, const std::vector<float>& dense,
                      const std::string& backend) {
  HostTensor o = output_like(w);
  o.poison();
  AttendOptions options;
  options.backend = backend;
  attend(w.problem, w.q.view(), w.k.view(), w.v.view(), mask, o.view(), options);
  return compare_outputs(o.to_float(), dense);
}

RunResult run_method(const RunOptions& options, const Workload& w, const std::string& workload_name,
                     const std::vector<float>* dense_given, TileMask* mask_out) {
  const Problem& p = w.problem;
  const MethodConfig config = configure_method(options.method, options.method_options, p.heads_q, UnknownOptions::skip);
  RunResult r;
  r.method = std::string(method_name(config));
  r.workload = workload_name;
  r.shape = p.describe();

  HostTensor o = output_like(w), dense = output_like(w);
  o.poison();
  dense.poison();
  TensorView q = w.q.view(), k = w.k.view(), v = w.v.view(), o_view = o.view(), dense_view = dense.view();
  // --backend cuda: the inputs and (poisoned) outputs are copied to the device once; every stage reads them there
  // (a build without the CUDA backend: upload's spattn::Error).
  std::optional<DeviceBuffer> dq, dk, dv, d_o, d_dense;
  if (options.backend == "cuda") {
    q = dq.emplace(upload(w.q, Memory::cuda)).view(), k = dk.emplace(upload(w.k, Memory::cuda)).view();
    v = dv.emplace(upload(w.v, Memory::cuda)).view();
    o_view = d_o.emplace(upload(o, Memory::cuda)).view();
    dense_view = d_dense.emplace(upload(dense, Memory::cuda)).view();
  }
  auto start = Clock::now();
  EstimateOptions estimate_options;
  estimate_options.backend = options.backend;
  const Estimate est = estimate(config, p, q, k, estimate_options);
  const TileMask& mask = est.mask;
  r.estimate_ms = ms_since(start);
  const auto stats = mask.stats();
  r.density = stats.density;

  AttendOptions attend_options;
  attend_options.backend = options.backend;
  AttendOptions sparse_options = attend_options;
  sparse_options.pv_threshold = options.pv_threshold;
  sparse_options.pv_vote_rows = options.pv_vote_rows;
  sparse_options.qk_int8 = options.qk_int8;
  sparse_options = attend_options_of(config, sparse_options);  // the method's own Stage-2 options (tuned PV-skip)
  start = Clock::now();
  const AttendStats run_stats = attend(p, q, k, v, mask, o_view, sparse_options);
  r.attend_ms = ms_since(start);
  r.backend = run_stats.backend;
  r.empty_rows = run_stats.empty_rows;
  r.pv_skipped = run_stats.pv_skipped;
  // A caller that compares many masks with one dense output (spattn frontier) passes it: the same numbers.
  if (dense_given == nullptr) {
    start = Clock::now();
    attend_dense(p, q, k, v, dense_view, attend_options);
    r.dense_ms = ms_since(start);
    r.speedup = r.dense_ms / (r.estimate_ms + r.attend_ms);
  }
  if (d_o) {
    d_o->download(o);
    if (dense_given == nullptr) d_dense->download(dense);
  }

  const std::vector<float> got = o.to_float();
  const ErrorStats err = compare_outputs(got, dense_given != nullptr ? *dense_given : dense.to_float());
  r.rel_l1 = err.rel_l1;
  r.max_abs = err.max_abs;

  if (!options.out.empty())
    write_npy(options.out, NpyArray::from_vector(got, {p.batch, p.heads_q, p.seqlen_q, p.dim_v()}));
  if (!options.mask_out.empty()) save_mask_npz(mask, options.mask_out);
  if (!options.mask_png.empty()) write_mask_png(mask, 0, options.png_head, options.mask_png);
  if (mask_out != nullptr) *mask_out = mask;
  return r;
}

void print_table(const std::vector<RunResult>& results) {
  std::printf("%-10s %-8s %-10s %8s %12s %11s %10s %8s %10s %10s\n", "method", "workload", "backend", "density",
              "estimate_ms", "attend_ms", "dense_ms", "speedup", "rel_l1", "max_abs");
  for (const RunResult& r : results)
    std::printf("%-10s %-8s %-10s %8.4f %12.2f %11.2f %10.2f %7.2fx %10.3e %10.3e\n", r.method.c_str(),
                r.workload.c_str(), r.backend.c_str(), r.density, r.estimate_ms, r.attend_ms, r.dense_ms, r.speedup,
                r.rel_l1, r.max_abs);
}

std::string to_json(const RunResult& r) {
  const nlohmann::json j = {{"method", r.method},       {"backend", r.backend},       {"workload", r.workload},
                            {"shape", r.shape},         {"density", r.density},       {"estimate_ms", r.estimate_ms},
                            {"attend_ms", r.attend_ms}, {"dense_ms", r.dense_ms},     {"speedup", r.speedup},
                            {"rel_l1", r.rel_l1},       {"max_abs", r.max_abs},       {"empty_rows", r.empty_rows},
                            {"pv_skipped", r.pv_skipped}};
  return j.dump();
}

namespace {

/// What each method's default cost on the whole trained models (written by bench/quality/report.py from the quality
/// run): the demo's captures show one layer's density and rel L1; the loss is the model's.
void print_measured_quality(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    std::fprintf(stderr, "no %s: the measured loss increases are not printed\n", path.c_str());
    return;
  }
  const std::vector<std::uint8_t> bytes = read_file(path);
  const nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end());
  std::printf("\nlm-4k / dit-2k: one layer of the trained models of bench/results/quality.md (%s, %s). The held-out\n"
              "loss increase of each default in every layer of the whole model, against dense attention:\n",
              j.at("gpu").get<std::string>().c_str(), j.at("commit").get<std::string>().c_str());
  const char* columns[] = {"lm-8k", "lm-32k", "dit-8k", "dit-32k"};
  std::printf("%-10s %-24s %9s %9s %9s %9s\n", "method", "setting", "LM 8K", "LM 32K", "DiT 8K", "DiT 32K");
  for (const auto& [method, row] : j.at("defaults").items()) {
    std::printf("%-10s %-24s", method.c_str(), row.at("setting").get<std::string>().c_str());
    for (const char* c : columns) {
      if (row.contains(c) && row.at(c).is_number()) std::printf(" %+8.2f%%", row.at(c).get<double>());
      else std::printf(" %9s", "n/a");
    }
    std::printf("\n");
  }
}

}  // namespace

int run_demo() {
  struct DemoWorkload {
    const char* name;
    WorkloadSpec spec;
  };
  std::vector<DemoWorkload> workloads;
  {
    WorkloadSpec llm;
    llm.kind = WorkloadKind::llm;
    llm.heads_q = 4;
    llm.heads_kv = 1;
    llm.seqlen = 4096;
    llm.seed = 1;
    workloads.push_back({"llm", llm});
    WorkloadSpec video = llm;
    video.kind = WorkloadKind::video;
    video.heads_q = video.heads_kv = 2;
    workloads.push_back({"video", video});
    WorkloadSpec random = llm;
    random.kind = WorkloadKind::random;
    random.heads_q = random.heads_kv = 2;
    random.seqlen = 2048;
    workloads.push_back({"random", random});
  }
  // One layer of each trained model of the quality table (bench/results/quality.md), committed small: data/README.md.
  const std::string captures = std::string(SPATTN_DATA_DIR) + "/captures.npz";
  std::vector<std::pair<const char*, Workload>> captured;
  if (std::filesystem::exists(captures)) {
    captured.emplace_back("lm-4k", read_capture(captures, "lm"));
    captured.emplace_back("dit-2k", read_capture(captures, "dit"));
  } else {
    std::fprintf(stderr, "no %s: the trained models' captures are skipped\n", captures.c_str());
  }
  std::vector<RunResult> results;
  const std::size_t total = (workloads.size() + captured.size()) * method_registry().size();
  std::size_t done = 0;
  const auto run_all = [&](const char* name, const Workload& w) {
    for (const MethodInfo& m : method_registry()) {
      std::fprintf(stderr, "[%zu/%zu] %s on %s (%s)\n", ++done, total, std::string(m.name).c_str(), name,
                   w.problem.describe().c_str());
      RunOptions options;
      options.method = std::string(m.name);
      results.push_back(run_method(options, w, name));
    }
  };
  for (const DemoWorkload& dw : workloads) run_all(dw.name, make_workload(dw.spec));
  for (const auto& [name, w] : captured) run_all(name, w);
  print_table(results);
  if (!captured.empty()) print_measured_quality(std::string(SPATTN_DATA_DIR) + "/quality-defaults.json");
  return 0;
}

}  // namespace spattn::cli
