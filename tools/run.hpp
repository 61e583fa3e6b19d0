// `spattn run` and `spattn demo`: estimate a mask with a method, attend, compare with dense attention.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "inputs.hpp"
#include "spattn/method_config.hpp"
#include "spattn/mask.hpp"
#include "spattn/workload.hpp"

namespace spattn::cli {

struct RunOptions {
  std::string method = "dense";
  std::string backend = "reference";
  std::vector<NamedValue> method_options;  ///< by name (the methods' option tables)
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

/// Estimates with the method, attends with its executor options, compares with dense attention. `dense`: the dense
/// output (dense_output) when the caller already has it — then dense_ms and speedup stay 0; `mask`: receives the mask.
RunResult run_method(const RunOptions& options, const Workload& workload, const std::string& workload_name,
                     const std::vector<float>* dense = nullptr, TileMask* mask = nullptr);

/// rel_l1 and max_abs of got against want (spattn/metrics.hpp's output_error): what run reports. Throws on a
/// non-finite difference (an internal error: outputs are poisoned before the run, so an unwritten element shows).
struct ErrorStats {
  double rel_l1 = 0, max_abs = 0;
};
ErrorStats compare_outputs(const std::vector<float>& got, const std::vector<float>& want);
/// Dense attention's output of the workload (float32, [B, Hq, Nq, Dv] flattened).
std::vector<float> dense_output(const Workload& workload, const std::string& backend = "reference");
/// Attends over `mask` (no executor options) and compares with `dense`.
ErrorStats mask_error(const Workload& workload, const TileMask& mask, const std::vector<float>& dense,
                      const std::string& backend = "reference");
void print_table(const std::vector<RunResult>& results);
std::string to_json(const RunResult& result);
/// Runs every implemented method on the built-in workloads and prints the table.
int run_demo();

}  // namespace spattn::cli
