// `spattn calibrate` (calibrate.hpp): sample workloads, the search of spattn::calibrate, its parameters file.
#include "calibrate.hpp"

#include <cstdint>
#include <cstdio>
#include <variant>
#include <vector>

#include "output_paths.hpp"
#include "spattn/error.hpp"
#include "spattn/methods/sale.hpp"
#include "spattn/methods/sparge.hpp"
#include "spattn/params_file.hpp"

namespace spattn::cli {
namespace {

/// `count` workloads of `spec` with seeds seed, seed + 1, …
std::vector<Workload> sample_workloads(const WorkloadSpec& spec, int count) {
  std::vector<Workload> workloads;
  for (int i = 0; i < count; ++i) {
    WorkloadSpec s = spec;
    s.seed = spec.seed + static_cast<std::uint64_t>(i);
    workloads.push_back(make_workload(s));
  }
  return workloads;
}

/// A progress bar on stderr.
void show_progress(double fraction, const std::string& what) {
  const int filled = static_cast<int>(fraction * 40.0);
  std::fprintf(stderr, "\r[%-40s] %3d%% %s   ", std::string(static_cast<std::size_t>(filled), '#').c_str(),
               static_cast<int>(fraction * 100.0), what.c_str());
  std::fflush(stderr);
}

void print_knob_params(const KnobParams& kp) {
  if (kp.dense)
    std::printf("%s: no %s setting keeps every head's rel L1 <= %g: dense\n", kp.method.c_str(), kp.option.c_str(),
                kp.bound);
  else
    std::printf("%s: %s %g (density %.4f, worst head rel L1 %.5f <= %g)\n", kp.method.c_str(), kp.option.c_str(),
                kp.value, kp.density, kp.worst_rel_l1, kp.bound);
}

void print_sale_params(const sale::Params& sp) {
  std::printf("%-5s %-10s\n", "head", "tau");
  for (std::size_t h = 0; h < sp.tau.size(); ++h)
    std::printf("%-5zu %-10g%s\n", h, double(sp.tau[h]), sp.tau[h] == 0.0f ? " (dense)" : "");
}

void print_sparge_params(const sparge::Params& params) {
  std::printf("%-5s %-8s %-8s %-8s %-6s %-9s %-8s\n", "head", "theta", "tau", "pv", "dense", "sparsity", "rel_l1");
  for (std::size_t h = 0; h < params.heads.size(); ++h) {
    const auto& hp = params.heads[h];
    std::printf("%-5zu %-8.4f %-8.4f %-8.2f %-6s %-9.4f %-8.4f\n", h, double(hp.theta), double(hp.tau),
                double(hp.pv_threshold), hp.dense ? "yes" : "no", hp.sparsity, hp.rel_l1);
  }
}

}  // namespace

void add_calibrate_command(CLI::App& app, CalibrateOptions& o) {
  auto* cal = app.add_subcommand("calibrate", "calibrate a method on sample inputs (per-head or its main knob)");
  CalibrationTargets& tune = o.targets;
  cal->add_option("--method", o.method, "sparge | sale | anchor | fgattn | bfla");
  cal->add_option("--rel-l1", tune.rel_l1, "anchor, fgattn, bfla: bound on every head's rel L1")->capture_default_str();
  cal->add_option("--theta", tune.sale_theta, "sale: error bound Err = ‖O − O_dense‖₁ / N")->capture_default_str();
  cal->add_option("--bits", o.bits, "sale: 4 or 8");
  cal->add_option("--groups", o.groups, "sale: quantization scale groups, thread | block");
  cal->add_option("--l1", tune.l1, "sparge: error bound of the mask search")->capture_default_str();
  cal->add_option("--l2", tune.l2, "sparge: error bound with PV-skip")->capture_default_str();
  cal->add_option("--workload", o.workload, "llm | video | random");
  cal->add_option("--seq", o.spec.seqlen, "sample length");
  cal->add_option("--heads", o.spec.heads_q, "query heads");
  cal->add_option("--kv-heads", o.spec.heads_kv, "key/value heads");
  cal->add_option("--dim", o.spec.head_dim, "head dimension");
  cal->add_option("--samples", o.samples, "calibration inputs (seeds seed, seed+1, …)")->check(CLI::Range(1, 64));
  cal->add_option("--seed", o.spec.seed, "first seed");
  cal->add_option("--theta-steps", tune.theta_steps, "θ grid size over [-1, 1) (default 16)");
  cal->add_option("--out", o.out, "parameters file (JSON)");
  cal->add_option("--backend", tune.backend,
                  "auto | reference | cuda (the samples copied to the GPU once; every estimate and attend runs there)");
}

int run_calibrate(CalibrateOptions& o) {
  const MethodConfig base = default_config(o.method);  // an unknown method: the registry's message
  require(o.method != "dense", "--method: dense has nothing to calibrate");
  o.spec.kind = parse_workload_kind(o.workload);
  require_writable(o.out, "--out");
  const std::vector<Workload> workloads = sample_workloads(o.spec, o.samples);
  std::vector<Sample> samples;
  for (const Workload& w : workloads) samples.push_back({w.problem, w.q.view(), w.k.view(), w.v.view()});
  std::vector<DeviceBuffer> on_gpu;  // --backend cuda: the samples in CUDA memory, for the whole search
  if (o.targets.backend == "cuda")
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const Workload& w = workloads[i];
      samples[i].q = on_gpu.emplace_back(upload(w.q, Memory::cuda)).view();
      samples[i].k = on_gpu.emplace_back(upload(w.k, Memory::cuda)).view();
      samples[i].v = on_gpu.emplace_back(upload(w.v, Memory::cuda)).view();
    }
  o.targets.progress = show_progress;
  if (o.method != "sparge" && o.method != "sale") {
    const KnobParams kp = std::get<KnobParams>(calibrate(base, samples, o.targets));
    std::fprintf(stderr, "\n");
    save_params_json(kp, o.out);
    print_knob_params(kp);
  } else if (o.method == "sale") {
    sale::Config sale_base;
    sale_base.bits = o.bits;
    const Option& groups = table_option(sale::kOptionTable, "groups");
    set_option(groups, &sale_base, parse_option(groups, o.groups, "--groups"), "--groups");
    const sale::Params sp = std::get<sale::Params>(calibrate(sale_base, samples, o.targets));
    std::fprintf(stderr, "\n");
    save_params_json(sp, o.out);
    print_sale_params(sp);
  } else {
    const sparge::Params params = std::get<sparge::Params>(calibrate(sparge::Config{}, samples, o.targets));
    std::fprintf(stderr, "\n");
    save_params_json(params, o.out);
    print_sparge_params(params);
  }
  std::printf("wrote %s\n", o.out.c_str());
  return 0;
}

}  // namespace spattn::cli
