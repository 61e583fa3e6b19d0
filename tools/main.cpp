// spattn: the command-line program. `spattn demo`, `spattn run …`, `spattn inspect MASK.npz`.
// Every error is one line on stderr and a non-zero exit status. Global options (--threads) go anywhere on the
// line: a subcommand passes options it does not know to the program (CLI11's fallthrough).
// Each subcommand is an options struct, a function that adds its flags and one that runs it (check and calibrate
// in their own files); main() adds them in the order of the help, parses, and runs the one given.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <tbb/global_control.h>

#include <memory>
#include <new>
#include <optional>

#include "calibrate.hpp"
#include "check.hpp"
#include "frontier.hpp"
#include "method_flags.hpp"
#include "output_paths.hpp"
#include "run.hpp"
#include "spattn/error.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_file.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace {

using namespace spattn;

/// The inputs of `run` and `frontier`: a seeded workload, or three .npy files.
struct InputFlags {
  WorkloadSpec spec;
  std::string workload = "llm", dtype = "bf16", layout = "bhnd";
  cli::FileInputs files;
  std::string capture;  ///< FILE.npz:PREFIX (spattn::read_capture)
  bool non_causal = false;
};

void add_input_flags(CLI::App* sub, InputFlags& in) {
  sub->add_option("--workload", in.workload, "llm | video | random");
  sub->add_option("--seq", in.spec.seqlen, "sequence length (keys)");
  sub->add_option("--seq-q", in.spec.seqlen_q, "query rows (< --seq: chunked prefill, the last rows)");
  sub->add_option("--batch", in.spec.batch, "batch size");
  sub->add_option("--heads", in.spec.heads_q, "query heads");
  sub->add_option("--kv-heads", in.spec.heads_kv, "key/value heads (divides --heads)");
  sub->add_option("--dim", in.spec.head_dim, "head dimension (32..256, multiple of 8)");
  sub->add_option("--dtype", in.dtype, "f32 | f16 | bf16 (workloads)");
  sub->add_option("--seed", in.spec.seed, "workload seed");
  sub->add_option("--q", in.files.q, "query .npy [B,H,N,D] or [H,N,D]")->check(CLI::ExistingFile);
  sub->add_option("--k", in.files.k, "key .npy")->check(CLI::ExistingFile);
  sub->add_option("--v", in.files.v, "value .npy")->check(CLI::ExistingFile);
  sub->add_option("--layout", in.layout, "layout of the .npy inputs: bhnd | bnhd");
  sub->add_flag("--bf16", in.files.bf16, "read uint16 .npy inputs as bfloat16 bit patterns");
  sub->add_flag("--non-causal", in.non_causal, "file inputs: non-causal attention (default causal)");
  sub->add_option("--capture", in.capture,
                  "a captured layer FILE.npz:PREFIX, e.g. data/captures.npz:lm or :dit (its causality and scale)");
}

/// The inputs the flags name: the files when any is given, else the seeded workload. `name`: "files" or the
/// workload's name.
Workload load_input_flags(InputFlags& in, std::string& name) {
  if (!in.capture.empty()) {
    const auto colon = in.capture.rfind(':');
    require(colon != std::string::npos && colon > 0 && colon + 1 < in.capture.size(),
            "--capture: expected FILE.npz:PREFIX (e.g. data/captures.npz:lm), got '", in.capture, "'");
    require(in.files.q.empty() && in.files.k.empty() && in.files.v.empty(), "--capture: give it or --q/--k/--v, not both");
    name = in.capture.substr(colon + 1);
    return read_capture(in.capture.substr(0, colon), name);
  }
  if (!in.files.q.empty() || !in.files.k.empty() || !in.files.v.empty()) {
    if (in.layout == "bhnd") in.files.layout = Layout::bhnd;
    else if (in.layout == "bnhd") in.files.layout = Layout::bnhd;
    else fail("--layout: unknown layout '", in.layout, "' (bhnd or bnhd)");
    in.files.causal = !in.non_causal;
    name = "files";
    return cli::load_inputs(in.files);
  }
  in.spec.kind = parse_workload_kind(in.workload);
  in.spec.dtype = parse_dtype(in.dtype);
  name = in.workload;
  return make_workload(in.spec);
}

// Numbers are range-checked by the library (one wording for every range), not by CLI11.

struct RunCommand {
  cli::RunOptions options;
  InputFlags inputs;
  cli::MethodFlags flags;
  bool json = false;
};

void add_run_command(CLI::App& app, RunCommand& c) {
  auto* run = app.add_subcommand("run", "estimate a mask with a method, attend, and compare with dense attention");
  cli::RunOptions& options = c.options;
  run->add_option("--method", options.method, "dense | fgattn | anchor | bfla | sparge | sale");
  run->add_option("--backend", options.backend, "auto | reference | cuda (inputs copied to the GPU once; CUDA builds)");
  add_input_flags(run, c.inputs);
  cli::add_method_flags(run, c.flags);
  run->add_option("--pv-threshold", options.pv_threshold,
                  "PV-skip in the attend pass: skip a key tile whose max is this far (base 2) below the running max");
  run->add_option("--pv-vote-rows", options.pv_vote_rows, "PV-skip vote group: 16 (warp) or 0 (whole row block)");
  run->add_flag("--int8", options.qk_int8, "attend with int8 QKᵀ (smoothed K, per-block scales) and P in the input dtype");
  run->add_flag("--json", c.json, "print one JSON object instead of the table");
  run->add_option("--out", options.out, "write the output [B,Hq,Nq,Dv] as float32 .npy");
  run->add_option("--mask-out", options.mask_out, "write the TileMask as .npz");
  run->add_option("--mask-png", options.mask_png, "draw the mask of one head (batch 0) as a PNG");
  run->add_option("--png-head", options.png_head, "mask head drawn by --mask-png");
}

int run_run(RunCommand& c) {
  // An unknown method, a malformed --tile or a refused flag fail here, before the inputs are generated.
  c.options.method_options = cli::given_options(c.flags, c.options.method);
  cli::require_writable(c.options.out, "--out");
  cli::require_writable(c.options.mask_out, "--mask-out");
  cli::require_writable(c.options.mask_png, "--mask-png");
  std::string name;
  const Workload w = load_input_flags(c.inputs, name);
  const cli::RunResult r = cli::run_method(c.options, w, name);
  if (c.json) std::printf("%s\n", cli::to_json(r).c_str());
  else cli::print_table({r});
  return 0;
}

struct FrontierCommand {
  cli::FrontierOptions options;
  InputFlags inputs;
  cli::MethodFlags flags;
  bool no_progress = false;
  std::string replot;
};

void add_frontier_command(CLI::App& app, FrontierCommand& c) {
  auto* fr = app.add_subcommand("frontier", "each method's density-vs-error curve over its main knob, beside the "
                                             "oracle mask's (exact tile mass) at the same tiles");
  cli::FrontierOptions& frontier = c.options;
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
  fr->add_flag("--no-progress", c.no_progress, "no progress bar on stderr");
  fr->add_option("--replot", c.replot, "draw --plot from a JSON file written by --json (runs nothing)")
      ->check(CLI::ExistingFile);
  add_input_flags(fr, c.inputs);
  cli::add_method_flags(fr, c.flags);
}

int run_frontier_command(FrontierCommand& c) {
  cli::FrontierOptions& frontier = c.options;
  // An unknown method, a malformed --tile or a refused flag fail in run_frontier, before any work.
  frontier.base = [&c](const std::string& m) { return cli::given_options(c.flags, m); };
  if (!c.replot.empty()) {
    require(!frontier.plot.empty(), "--replot: give --plot");
    cli::require_writable(frontier.plot, "--plot");
    return cli::replot_frontier(c.replot, frontier.plot);
  }
  frontier.progress = !c.no_progress;
  cli::require_writable(frontier.plot, "--plot");
  cli::require_writable(frontier.json, "--json");
  cli::require_writable(frontier.csv, "--csv");
  std::string name;
  const Workload w = load_input_flags(c.inputs, name);
  return cli::run_frontier(frontier, w, name);
}

struct InspectCommand {
  std::string mask_path;
};

void add_inspect_command(CLI::App& app, InspectCommand& c) {
  auto* insp = app.add_subcommand("inspect", "print the shape and statistics of a TileMask .npz");
  insp->add_option("mask", c.mask_path, "mask file")->required()->check(CLI::ExistingFile);
}

int run_inspect(const InspectCommand& c) {
  const TileMask m = load_mask_npz(c.mask_path);
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
  CLI::App app{"spattn: training-free sparse attention (SpargeAttn, SALE, AnchorAttention, FG-Attn, BFLA)"};
  app.require_subcommand(1);
  app.fallthrough();  // inherited by the subcommands below
  std::optional<int> threads;
  app.add_option("--threads", threads, "worker threads (default: all cores)")->check(CLI::Range(1, 1 << 16));

  app.add_subcommand("demo", "run every implemented method on the built-in workloads and print a table");
  RunCommand run;
  add_run_command(app, run);
  FrontierCommand frontier;
  add_frontier_command(app, frontier);
  cli::CalibrateOptions calibrate;
  cli::add_calibrate_command(app, calibrate);
  InspectCommand inspect;
  add_inspect_command(app, inspect);
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
    if (app.got_subcommand("demo")) return spattn::cli::run_demo();
    if (app.got_subcommand("inspect")) return run_inspect(inspect);
    if (app.got_subcommand("check")) return spattn::cli::run_check(check);
    if (app.got_subcommand("calibrate")) return spattn::cli::run_calibrate(calibrate);
    if (app.got_subcommand("frontier")) return run_frontier_command(frontier);
    return run_run(run);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "spattn: error: out of memory (the inputs or the mask do not fit in this machine)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spattn: error: %s\n", e.what());
    return 1;
  }
}
