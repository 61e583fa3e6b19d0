// spattn: the command-line program. `spattn demo`, `spattn run …`, `spattn inspect MASK.npz`.
// Every error is one line on stderr and a non-zero exit status. Global options (--threads) go anywhere on the
// line: a subcommand passes options it does not know to the program (CLI11's fallthrough).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <tbb/global_control.h>

#include <memory>
#include <new>
#include <optional>

#include "check.hpp"
#include "frontier.hpp"
#include "method_flags.hpp"
#include "output_paths.hpp"
#include "run.hpp"
#include "spattn/error.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_file.hpp"
#include "spattn/methods/sparge.hpp"
#include "spattn/params_file.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace {

int inspect(const std::string& path) {
  const spattn::TileMask m = spattn::load_mask_npz(path);
  const auto s = m.stats();
  std::printf("tile_q %d tile_k %d batch %lld mask_heads %lld seqlen_q %lld seqlen_kv %lld causal %d\n",
              m.shape.tile_q, m.shape.tile_k, static_cast<long long>(m.shape.batch),
              static_cast<long long>(m.shape.mask_heads), static_cast<long long>(m.shape.seqlen_q),
              static_cast<long long>(m.shape.seqlen_kv), m.shape.causal ? 1 : 0);
  std::printf("density %.6f pair_density %.6f kept %lld reachable %lld per_row min %lld mean %.2f max %lld "
              "empty_rows %lld bytes %lld\n",
              s.density, s.pair_density, static_cast<long long>(s.kept_tiles),
              static_cast<long long>(s.reachable_tiles), static_cast<long long>(s.min_per_row), s.mean_per_row,
              static_cast<long long>(s.max_per_row), static_cast<long long>(s.empty_rows),
              static_cast<long long>(s.bytes));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace spattn;
  CLI::App app{"spattn: training-free sparse attention (SpargeAttn, SALE, AnchorAttention, FG-Attn, BFLA)"};
  app.require_subcommand(1);
  app.fallthrough();  // inherited by the subcommands below
  std::optional<int> threads;
  app.add_option("--threads", threads, "worker threads (default: all cores)")->check(CLI::Range(1, 1 << 16));

  app.add_subcommand("demo", "run every implemented method on the built-in workloads and print a table");

  // Numbers are range-checked by the library (one wording for every range), not by CLI11.
  auto* run = app.add_subcommand("run", "estimate a mask with a method, attend, and compare with dense attention");
  cli::RunOptions options;
  WorkloadSpec spec;
  std::string workload = "llm", dtype = "bf16", layout = "bhnd";
  cli::FileInputs files;
  bool json = false, non_causal = false;
  run->add_option("--method", options.method, "dense | fgattn | anchor | bfla | sparge | sale");
  run->add_option("--backend", options.backend, "auto | reference | cuda (inputs copied to the GPU once; CUDA builds)");
  // Inputs (a workload or .npy files) and method options, shared by run and frontier (one subcommand is parsed).
  auto add_inputs = [&](CLI::App* sub) {
    sub->add_option("--workload", workload, "llm | video | random");
    sub->add_option("--seq", spec.seqlen, "sequence length (keys)");
    sub->add_option("--seq-q", spec.seqlen_q, "query rows (< --seq: chunked prefill, the last rows)");
    sub->add_option("--batch", spec.batch, "batch size");
    sub->add_option("--heads", spec.heads_q, "query heads");
    sub->add_option("--kv-heads", spec.heads_kv, "key/value heads (divides --heads)");
    sub->add_option("--dim", spec.head_dim, "head dimension (32..256, multiple of 8)");
    sub->add_option("--dtype", dtype, "f32 | f16 | bf16 (workloads)");
    sub->add_option("--seed", spec.seed, "workload seed");
    sub->add_option("--q", files.q, "query .npy [B,H,N,D] or [H,N,D]")->check(CLI::ExistingFile);
    sub->add_option("--k", files.k, "key .npy")->check(CLI::ExistingFile);
    sub->add_option("--v", files.v, "value .npy")->check(CLI::ExistingFile);
    sub->add_option("--layout", layout, "layout of the .npy inputs: bhnd | bnhd");
    sub->add_flag("--bf16", files.bf16, "read uint16 .npy inputs as bfloat16 bit patterns");
    sub->add_flag("--non-causal", non_causal, "file inputs: non-causal attention (default causal)");
  };
  add_inputs(run);
  cli::MethodFlags run_flags, frontier_flags;
  cli::add_method_flags(run, run_flags);
  run->add_option("--pv-threshold", options.pv_threshold,
                  "PV-skip in the attend pass: skip a key tile whose max is this far (base 2) below the running max");
  run->add_option("--pv-vote-rows", options.pv_vote_rows, "PV-skip vote group: 16 (warp) or 0 (whole row block)");
  run->add_flag("--int8", options.qk_int8, "attend with int8 QKᵀ (smoothed K, per-block scales) and P in the input dtype");
  run->add_flag("--json", json, "print one JSON object instead of the table");
  run->add_option("--out", options.out, "write the output [B,Hq,Nq,Dv] as float32 .npy");
  run->add_option("--mask-out", options.mask_out, "write the TileMask as .npz");
  run->add_option("--mask-png", options.mask_png, "draw the mask of one head (batch 0) as a PNG");
  run->add_option("--png-head", options.png_head, "mask head drawn by --mask-png");

  auto* fr = app.add_subcommand("frontier", "each method's density-vs-error curve over its main knob, beside the "
                                             "oracle mask's (exact tile mass) at the same tiles");
  cli::FrontierOptions frontier;
  bool no_progress = false;
  fr->add_option("--method", frontier.methods, "all (default) or a comma-separated list: sparge,sale,anchor,fgattn,bfla");
  fr->add_option("--settings", frontier.settings,
                 "values of the method's main knob (" + cli::knobs_text() + ")")
      ->delimiter(',');
  fr->add_option("--targets", frontier.targets, "rel L1 levels of the summary (default 1e-2,5e-2)")->delimiter(',');
  fr->add_option("--oracle", frontier.oracle,
                 "oracle budget: threshold (default: one least tile mass for the whole mask), mass (kept fraction τ "
                 "of each row's mass) or density (the same fraction ρ of every row's tiles)");
  fr->add_option("--tolerance", frontier.tolerance, "oracle search: relative density gap to stop at (default 0.01)");
  fr->add_flag("--interpolate-points", frontier.interpolate_points,
               "the oracle's density at each point's error interpolated on its curve (no search)");
  fr->add_option("--plot", frontier.plot, "write the curves as a PNG (log-log)");
  fr->add_option("--json", frontier.json, "write the points as JSON");
  fr->add_option("--csv", frontier.csv, "write the points as CSV");
  fr->add_flag("--no-progress", no_progress, "no progress bar on stderr");
  std::string replot;
  fr->add_option("--replot", replot, "draw --plot from a JSON file written by --json (runs nothing)")
      ->check(CLI::ExistingFile);
  add_inputs(fr);
  cli::add_method_flags(fr, frontier_flags);

  auto* cal = app.add_subcommand("calibrate", "calibrate a method on sample inputs (per-head or its main knob)");
  std::string cal_method = "sparge", cal_out = "sparge_params.json", cal_workload = "llm";
  CalibrationTargets tune;
  WorkloadSpec cal_spec;
  cal_spec.seqlen = 2048;
  cal_spec.heads_q = 2;
  cal_spec.heads_kv = 1;
  int cal_samples = 2;
  cal->add_option("--method", cal_method, "sparge | sale | anchor | fgattn | bfla");
  cal->add_option("--rel-l1", tune.rel_l1, "anchor, fgattn, bfla: bound on every head's rel L1")->capture_default_str();
  int cal_bits = 4;
  cal->add_option("--theta", tune.sale_theta, "sale: error bound Err = ‖O − O_dense‖₁ / N")->capture_default_str();
  cal->add_option("--bits", cal_bits, "sale: 4 or 8");
  cal->add_option("--l1", tune.l1, "sparge: error bound of the mask search")->capture_default_str();
  cal->add_option("--l2", tune.l2, "sparge: error bound with PV-skip")->capture_default_str();
  cal->add_option("--workload", cal_workload, "llm | video | random");
  cal->add_option("--seq", cal_spec.seqlen, "sample length");
  cal->add_option("--heads", cal_spec.heads_q, "query heads");
  cal->add_option("--kv-heads", cal_spec.heads_kv, "key/value heads");
  cal->add_option("--dim", cal_spec.head_dim, "head dimension");
  cal->add_option("--samples", cal_samples, "calibration inputs (seeds seed, seed+1, …)")->check(CLI::Range(1, 64));
  cal->add_option("--seed", cal_spec.seed, "first seed");
  cal->add_option("--theta-steps", tune.theta_steps, "θ grid size over [-1, 1) (default 16)");
  cal->add_option("--out", cal_out, "parameters file (JSON)");
  cal->add_option("--backend", tune.backend,
                  "auto | reference | cuda (the samples copied to the GPU once; every estimate and attend runs there)");

  auto* insp = app.add_subcommand("inspect", "print the shape and statistics of a TileMask .npz");
  std::string mask_path;
  insp->add_option("mask", mask_path, "mask file")->required()->check(CLI::ExistingFile);

  cli::CheckOptions check;
  cli::add_check_command(app, check);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "spattn: error: %s (see spattn --help)\n", e.what());
    return 2;
  }

  try {
    std::unique_ptr<tbb::global_control> limit;
    if (threads)
      limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                    static_cast<std::size_t>(*threads));
    if (app.got_subcommand("demo")) return cli::run_demo();
    if (app.got_subcommand("inspect")) return inspect(mask_path);
    if (app.got_subcommand("check")) return cli::run_check(check);
    if (app.got_subcommand("calibrate")) {
      const MethodConfig cal_base = default_config(cal_method);  // an unknown method: the registry's message
      require(cal_method != "dense", "--method: dense has nothing to calibrate");
      cal_spec.kind = parse_workload_kind(cal_workload);
      cli::require_writable(cal_out, "--out");
      std::vector<Workload> workloads;
      std::vector<Sample> samples;
      for (int i = 0; i < cal_samples; ++i) {
        WorkloadSpec s = cal_spec;
        s.seed = cal_spec.seed + static_cast<std::uint64_t>(i);
        workloads.push_back(make_workload(s));
      }
      for (const Workload& w : workloads) samples.push_back({w.problem, w.q.view(), w.k.view(), w.v.view()});
      std::vector<DeviceBuffer> on_gpu;  // --backend cuda: the samples in CUDA memory, for the whole search
      if (tune.backend == "cuda")
        for (std::size_t i = 0; i < samples.size(); ++i) {
          const Workload& w = workloads[i];
          samples[i].q = on_gpu.emplace_back(upload(w.q, Memory::cuda)).view();
          samples[i].k = on_gpu.emplace_back(upload(w.k, Memory::cuda)).view();
          samples[i].v = on_gpu.emplace_back(upload(w.v, Memory::cuda)).view();
        }
      tune.progress = [](double fraction, const std::string& what) {
        const int filled = static_cast<int>(fraction * 40.0);
        std::fprintf(stderr, "\r[%-40s] %3d%% %s   ", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                     static_cast<int>(fraction * 100.0), what.c_str());
        std::fflush(stderr);
      };
      if (cal_method != "sparge" && cal_method != "sale") {
        const KnobParams kp = std::get<KnobParams>(calibrate(cal_base, samples, tune));
        std::fprintf(stderr, "\n");
        save_params_json(kp, cal_out);
        if (kp.dense)
          std::printf("%s: no %s setting keeps every head's rel L1 <= %g: dense\n", kp.method.c_str(), kp.option.c_str(),
                      kp.bound);
        else
          std::printf("%s: %s %g (density %.4f, worst head rel L1 %.5f <= %g)\n", kp.method.c_str(), kp.option.c_str(),
                      kp.value, kp.density, kp.worst_rel_l1, kp.bound);
        std::printf("wrote %s\n", cal_out.c_str());
        return 0;
      }
      if (cal_method == "sale") {
        sale::Config base;
        base.bits = cal_bits;
        const sale::Params sp = std::get<sale::Params>(calibrate(base, samples, tune));
        std::fprintf(stderr, "\n");
        save_params_json(sp, cal_out);
        std::printf("%-5s %-10s\n", "head", "tau");
        for (std::size_t h = 0; h < sp.tau.size(); ++h)
          std::printf("%-5zu %-10g%s\n", h, double(sp.tau[h]), sp.tau[h] == 0.0f ? " (dense)" : "");
        std::printf("wrote %s\n", cal_out.c_str());
        return 0;
      }
      const sparge::Params params = std::get<sparge::Params>(calibrate(sparge::Config{}, samples, tune));
      std::fprintf(stderr, "\n");
      save_params_json(params, cal_out);
      std::printf("%-5s %-8s %-8s %-8s %-6s %-9s %-8s\n", "head", "theta", "tau", "pv", "dense", "sparsity", "rel_l1");
      for (std::size_t h = 0; h < params.heads.size(); ++h) {
        const auto& hp = params.heads[h];
        std::printf("%-5zu %-8.4f %-8.4f %-8.2f %-6s %-9.4f %-8.4f\n", h, double(hp.theta), double(hp.tau),
                    double(hp.pv_threshold), hp.dense ? "yes" : "no", hp.sparsity, hp.rel_l1);
      }
      std::printf("wrote %s\n", cal_out.c_str());
      return 0;
    }

    const bool is_frontier = app.got_subcommand("frontier");
    // An unknown method, a malformed --tile or a refused flag fail here, before the inputs are generated.
    if (is_frontier) frontier.base = [&](const std::string& m) { return cli::given_options(frontier_flags, m); };
    else options.method_options = cli::given_options(run_flags, options.method);
    if (is_frontier && !replot.empty()) {
      require(!frontier.plot.empty(), "--replot: give --plot");
      cli::require_writable(frontier.plot, "--plot");
      return cli::replot_frontier(replot, frontier.plot);
    }
    if (is_frontier) {
      frontier.progress = !no_progress;
      cli::require_writable(frontier.plot, "--plot");
      cli::require_writable(frontier.json, "--json");
      cli::require_writable(frontier.csv, "--csv");
    }
    cli::require_writable(options.out, "--out");
    cli::require_writable(options.mask_out, "--mask-out");
    cli::require_writable(options.mask_png, "--mask-png");
    Workload w;
    std::string name;
    if (!files.q.empty() || !files.k.empty() || !files.v.empty()) {
      if (layout == "bhnd") files.layout = Layout::bhnd;
      else if (layout == "bnhd") files.layout = Layout::bnhd;
      else fail("--layout: unknown layout '", layout, "' (bhnd or bnhd)");
      files.causal = !non_causal;
      w = cli::load_inputs(files);
      name = "files";
    } else {
      spec.kind = parse_workload_kind(workload);
      spec.dtype = parse_dtype(dtype);
      w = make_workload(spec);
      name = workload;
    }
    if (is_frontier) return cli::run_frontier(frontier, w, name);
    const cli::RunResult r = cli::run_method(options, w, name);
    if (json) std::printf("%s\n", cli::to_json(r).c_str());
    else cli::print_table({r});
    return 0;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "spattn: error: out of memory (the inputs or the mask do not fit in this machine)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spattn: error: %s\n", e.what());
    return 1;
  }
}
