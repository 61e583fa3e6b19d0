// `spattn run` and `spattn demo`: estimate a mask with a method, attend, compare with dense attention.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "inputs.hpp"
#include "methods.hpp"
#include "spattn/workload.hpp"

namespace spattn::cli {

struct RunOptions {
  std::string method = "dense";
  std::string backend = "reference";
  MethodOptions method_options;
  float pv_threshold = INFINITY;  ///< SpargeAttn PV-skip in the attend pass (+inf = off)
  int pv_vote_rows = 0;
  bool qk_int8 = false;  ///< SpargeAttn's quantized compute mode in the attend pass
  std::string out, mask_out, mask_png;
  std::int64_t png_head = 0;
};

struct RunResult {
  std::string method, backend, workload, shape;
  double density = 0, estimate_ms = 0, attend_ms = 0, dense_ms = 0, speedup = 0, rel_l1 = 0, max_abs = 0;
  std::int64_t empty_rows = 0;
  std::int64_t pv_skipped = 0;
};

RunResult run_method(const RunOptions& options, const Workload& workload, const std::string& workload_name);
void print_table(const std::vector<RunResult>& results);
std::string to_json(const RunResult& result);
/// Runs every implemented method on the built-in workloads and prints the table.
int run_demo();

}  // namespace spattn::cli
