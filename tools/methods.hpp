// The methods the program can run: name -> estimator producing a TileMask. Each method issue adds a row.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "spattn/mask.hpp"
#include "spattn/problem.hpp"

namespace spattn::cli {

/// Method hyper-parameters settable from the command line (each method reads its own).
struct MethodOptions {
  std::int32_t tile_q = 0, tile_k = 0;  ///< 0: the method's default tiles
  float top_p = 0.9f;                   ///< fgattn
  std::string merge = "xor";            ///< fgattn: none | consecutive | xor
  std::string semantics = "exact";      ///< fgattn: exact | union
  float theta = 12.0f;                  ///< anchor: θ in natural-log units
  std::int32_t step = 16;               ///< anchor: pooled 128-row blocks per group
  std::int32_t block = 256, group = 64;  ///< bfla: coarse block b and flattening group g
  float gamma = 0.99f;                   ///< bfla: keep-mass γ
  std::int64_t eta = 0;                  ///< bfla: stride rescue period (0 = off)
  float rho = 0.0f;                      ///< bfla: random rescue fraction (0 = off)
  std::int64_t rescue_seed = 0;          ///< bfla: s
  std::string rescue_grid = "coarse";    ///< bfla: coarse | tile
  float sim_threshold = 0.6f;            ///< sparge: θ (self-similarity)
  float cdf_threshold = 0.98f;           ///< sparge: τ
  float topk = 0.0f;                     ///< sparge: ρ (> 0 selects top-k)
  bool sink = false;                     ///< sparge: keep key block 0
  std::string params;                    ///< sparge/sale: tuned per-head parameters (JSON from spattn calibrate)
  int bits = 4;                          ///< sale: 4 or 8
  float tau = 0.004f;                    ///< sale: relative-score threshold τ
  std::int64_t local_window = 128;       ///< sale: local keys (multiple of 32)
};

struct MethodInputs {
  const Problem& problem;
  const TensorView& q;
  const TensorView& k;
  const MethodOptions& options;
};

struct Method {
  std::string name;
  std::string summary;
  std::function<TileMask(const MethodInputs&)> estimate;
};

const std::vector<Method>& methods();
/// The method called `name`; throws spattn::Error listing the known ones.
const Method& find_method(const std::string& name);

}  // namespace spattn::cli
