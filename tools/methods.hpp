// The program's method options: command-line values turned into the library's MethodConfig. The methods
// themselves (names, summaries, defaults) are the library's registry (spattn/method_config.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spattn/method_config.hpp"

namespace spattn::cli {

/// Method hyper-parameters settable from the command line; unset values keep the method's default (a value
/// given, 0 included, is always passed on and checked by the library).
struct MethodOptions {
  std::optional<std::int32_t> tile_q, tile_k;  ///< unset: the method's default tiles
  std::optional<float> top_p;           ///< fgattn
  std::string merge;                    ///< fgattn: none | consecutive | xor
  std::string semantics;                ///< fgattn: exact | union
  std::optional<float> theta;           ///< anchor: θ in natural-log units
  std::optional<std::int32_t> step;     ///< anchor: pooled 128-row blocks per group
  std::optional<std::int32_t> block, group;  ///< bfla: coarse block b and flattening group g
  std::optional<float> gamma;                ///< bfla: keep-mass γ
  std::optional<std::int64_t> eta;           ///< bfla: stride rescue period (0 = off)
  std::optional<float> rho;                  ///< bfla: random rescue fraction (0 = off)
  std::optional<std::int64_t> rescue_seed;   ///< bfla: s
  std::string rescue_grid;                   ///< bfla: coarse | tile
  std::optional<float> keep_ratio;           ///< bfla: the code's top-k floor ratio (0 = off)
  std::optional<float> sim_threshold;        ///< sparge: θ (self-similarity)
  std::optional<float> cdf_threshold;        ///< sparge: τ
  std::optional<float> topk;                 ///< sparge: ρ (> 0 selects top-k, 0 = TopCdf)
  bool sink = false;                         ///< sparge: keep key block 0
  std::string params;                        ///< sparge/sale: tuned per-head parameters (JSON from spattn calibrate)
  std::optional<int> bits;                   ///< sale: 4 or 8
  std::optional<float> tau;                  ///< sale: relative-score threshold τ
  std::optional<std::int64_t> local_window;  ///< sale: local keys (multiple of 32)
};

/// The configuration of method `name` (the registry's default, a --params file, then the options); throws
/// spattn::Error on an unknown method, an option the method does not take, or a --params file of another method
/// or head count.
MethodConfig method_config(const std::string& name, const MethodOptions& options, std::int64_t heads_q);

/// The MethodOptions fields that method_config() reads for method `name` (their C++ names, which the Python
/// package takes as keywords); throws spattn::Error on an unknown method. Kept beside method_config(): a new
/// option is added to both.
const std::vector<std::string_view>& method_option_names(std::string_view name);

}  // namespace spattn::cli
