#include "methods.hpp"

#include <sstream>

#include "spattn/error.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/methods/bfla.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/params_file.hpp"
#include "spattn/reference/bfla.hpp"
#include "spattn/reference/sale.hpp"
#include "spattn/reference/sparge.hpp"
#include "spattn/reference/anchor_attn.hpp"
#include "spattn/reference/fg_attn.hpp"

namespace spattn::cli {
namespace {

std::int32_t or_default(std::int32_t value, std::int32_t fallback) { return value != 0 ? value : fallback; }

TileMask fgattn(const MethodInputs& in) {
  fg_attn::Config cfg;
  cfg.tile_q = or_default(in.options.tile_q, 32);
  cfg.tile_k = or_default(in.options.tile_k, 32);
  cfg.top_p = in.options.top_p;
  cfg.merge = fg_attn::parse_merge(in.options.merge);
  require(in.options.semantics == "exact" || in.options.semantics == "union", "--semantics: unknown '",
          in.options.semantics, "' (exact or union)");
  cfg.semantics = in.options.semantics == "exact" ? fg_attn::Semantics::exact : fg_attn::Semantics::union_keys;
  const TileMask mask = reference::fg_attn_estimate(in.problem, in.q, in.k, cfg);
  if (cfg.semantics == fg_attn::Semantics::exact) return mask;
  return fg_attn::effective_mask(mask, fg_attn::plan(mask, cfg), cfg.semantics);
}

TileMask anchor(const MethodInputs& in) {
  anchor_attn::Config cfg;
  cfg.theta = in.options.theta;
  cfg.step = in.options.step;
  require(in.options.tile_q == 0 && in.options.tile_k == 0,
          "--tile: anchor sets its own tiles (groups of 128·step rows, single-key stripes)");
  return reference::anchor_attn_estimate(in.problem, in.q, in.k, cfg).mask;
}

TileMask bfla_method(const MethodInputs& in) {
  bfla::Config cfg;
  cfg.block = in.options.block;
  cfg.group = in.options.group;
  cfg.gamma = in.options.gamma;
  cfg.eta = in.options.eta;
  cfg.rho = in.options.rho;
  cfg.seed = in.options.rescue_seed;
  cfg.tile = or_default(in.options.tile_k, 32);
  require(in.options.tile_q == 0, "--tile-q: bfla sets its query tile (min(128, block))");
  require(in.options.rescue_grid == "coarse" || in.options.rescue_grid == "tile", "--rescue-grid: unknown '",
          in.options.rescue_grid, "' (coarse or tile)");
  cfg.rescue_grid = in.options.rescue_grid == "coarse" ? bfla::RescueGrid::coarse : bfla::RescueGrid::tile;
  return reference::bfla_estimate(in.problem, in.q, in.k, cfg);
}

TileMask sparge_method(const MethodInputs& in) {
  if (!in.options.params.empty()) {
    const sparge::Params params = load_sparge_params(in.options.params);
    require(static_cast<std::int64_t>(params.heads.size()) == in.problem.heads_q, "--params: '", in.options.params,
            "' has ", params.heads.size(), " heads, the input has ", in.problem.heads_q);
    sparge::Config cfg = params.config();
    cfg.attention_sink = in.options.sink;
    return reference::sparge_estimate(in.problem, in.q, in.k, cfg).mask;
  }
  sparge::Config cfg;
  cfg.block_q = or_default(in.options.tile_q, 128);
  cfg.block_k = or_default(in.options.tile_k, 64);
  cfg.theta = {in.options.sim_threshold};
  cfg.tau = {in.options.cdf_threshold};
  cfg.topk = in.options.topk;
  cfg.attention_sink = in.options.sink;
  return reference::sparge_estimate(in.problem, in.q, in.k, cfg).mask;
}

TileMask sale_method(const MethodInputs& in) {
  sale::Config cfg;
  if (!in.options.params.empty()) {
    const sale::Params params = load_sale_params(in.options.params);
    require(static_cast<std::int64_t>(params.tau.size()) == in.problem.heads_q, "--params: '", in.options.params,
            "' has ", params.tau.size(), " heads, the input has ", in.problem.heads_q);
    cfg = params.config();
  } else {
    cfg.bits = in.options.bits;
    cfg.tau = {in.options.tau};
    cfg.local_window = in.options.local_window;
  }
  require(in.options.tile_q == 0 && in.options.tile_k == 0, "--tile: sale uses 64×32 blocks");
  return reference::sale_estimate(in.problem, in.q, in.k, cfg).mask;
}

}  // namespace

const std::vector<Method>& methods() {
  static const std::vector<Method> list = {
      {"dense", "every tile kept: exact dense attention (the baseline)",
       [](const MethodInputs& in) {
         return TileMask::dense(MaskShape::of(in.problem, or_default(in.options.tile_q, 128),
                                              or_default(in.options.tile_k, 128)));
       }},
      {"fgattn", "FG-Attn: mean-pooled M×N tile scores, top-p (default 32×32, p = 0.9, exact merging)", fgattn},
      {"anchor", "AnchorAttention: anchors over sink + local, difference-aware stripes (θ = 12, step = 16)", anchor},
      {"bfla", "BFLA: flattened-group block scores, keep-mass γ = 0.99, sink + local band, rescues", bfla_method},
      {"sparge", "SpargeAttn Stage 1: pooled scores + self-similarity, TopCdf τ = 0.98 (θ = 0.6)", sparge_method},
      {"sale", "SALE: int4 estimates, relative score vs exact sink-local statistics (τ = 0.004)", sale_method},
  };
  return list;
}

const Method& find_method(const std::string& name) {
  std::ostringstream known;
  for (const Method& m : methods()) {
    if (m.name == name) return m;
    known << (known.tellp() > 0 ? ", " : "") << m.name;
  }
  fail("--method: unknown method '", name, "' (implemented: ", known.str(), ")");
}

}  // namespace spattn::cli
