// `spattn calibrate`: a method calibrated on seeded sample workloads (spattn::calibrate), its parameters file
// written and its result printed.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace spattn::cli {

struct CalibrateOptions {
  std::string method = "sparge", out = "sparge_params.json", workload = "llm";
  CalibrationTargets targets;
  WorkloadSpec spec = [] {
    WorkloadSpec s;
    s.seqlen = 2048;
    s.heads_q = 2;
    s.heads_kv = 1;
    return s;
  }();
  int samples = 2;
  int bits = 4;  ///< sale: 4 or 8
  std::string groups = "thread";  ///< sale: its `groups` option by name
};

/// Adds the `calibrate` subcommand to `app`, its options bound to `options` (which must outlive the parse).
void add_calibrate_command(CLI::App& app, CalibrateOptions& options);

/// Calibrates, writes the parameters file, prints the result; returns the exit status. Throws spattn::Error on bad
/// input.
int run_calibrate(CalibrateOptions& options);

}  // namespace spattn::cli
