// `spattn frontier`: each method's density-vs-error curve over its main knob, beside the oracle's (the best mask at
// the method's tile shape, spattn/oracle.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "spattn/method_config.hpp"
#include "spattn/workload.hpp"

namespace spattn::cli {

struct FrontierOptions {
  std::string methods = "all";           ///< "all" or a comma-separated list of sparge, sale, anchor, fgattn, bfla
  std::vector<double> settings;          ///< values of the main knob (one method only); empty: the method's list
  std::vector<double> targets = {1e-2, 5e-2};  ///< rel L1 levels of the summary
  /// The method's other options (tiles, …) as given on the command line; throws on one the method refuses.
  std::function<std::vector<NamedValue>(const std::string& method)> base;
  std::string oracle = "threshold";       ///< the oracle budget searched: threshold (global ε), mass (per-row τ), density (per-row ρ)
  double tolerance = 0.01;               ///< oracle search: stop when the bracket's densities differ by this (relative)
  bool interpolate_points = false;       ///< the oracle's density at each point's error interpolated, not searched
  std::string plot, json, csv;           ///< outputs (empty: none)
  bool progress = true;                  ///< progress bar on stderr
};

/// The main knob of a method (the option its table gives a sweep): its name and the values swept by default.
struct Knob {
  std::string name;
  std::vector<double> defaults;
};
Knob main_knob(const std::string& method);
/// Every frontier method with its knob, for help: "sparge topk, sale tau, …".
std::string knobs_text();

/// Draws the plot of a JSON file written by run_frontier (spattn frontier --replot F.json --plot F.png).
int replot_frontier(const std::string& json_path, const std::string& png_path);

/// Runs the frontier and prints its tables; writes the plot / JSON / CSV asked for. Returns the exit status.
int run_frontier(const FrontierOptions& options, const Workload& workload, const std::string& workload_name);

}  // namespace spattn::cli
