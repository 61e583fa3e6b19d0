#include "methods.hpp"

#include <map>

#include "spattn/error.hpp"
#include "spattn/params_file.hpp"
#include "spattn/spattn.hpp"

namespace spattn::cli {
namespace {

template <class T, class U>
void set(T& field, const std::optional<U>& value) {
  if (value) field = static_cast<T>(*value);
}

void tiles(std::int32_t& q, std::int32_t& k, const MethodOptions& o) {
  set(q, o.tile_q);
  set(k, o.tile_k);
}

}  // namespace

MethodConfig method_config(const std::string& name, const MethodOptions& o, std::int64_t heads_q) {
  MethodConfig config = default_config(name);
  require(o.params.empty() || name == "sparge" || name == "sale", "--params: only sparge and sale take parameter files");
  if (auto* dense = std::get_if<DenseConfig>(&config)) {
    tiles(dense->tile_q, dense->tile_k, o);
  } else if (auto* fg = std::get_if<fg_attn::Config>(&config)) {
    tiles(fg->tile_q, fg->tile_k, o);
    set(fg->top_p, o.top_p);
    if (!o.merge.empty()) fg->merge = fg_attn::parse_merge(o.merge);
    require(o.semantics.empty() || o.semantics == "exact" || o.semantics == "union", "--semantics: unknown '",
            o.semantics, "' (exact or union)");
    if (!o.semantics.empty())
      fg->semantics = o.semantics == "exact" ? fg_attn::Semantics::exact : fg_attn::Semantics::union_keys;
  } else if (auto* anchor = std::get_if<anchor_attn::Config>(&config)) {
    require(!o.tile_q && !o.tile_k, "--tile: anchor sets its own tiles (groups of 128·step rows, single-key stripes)");
    set(anchor->theta, o.theta);
    set(anchor->step, o.step);
  } else if (auto* bf = std::get_if<bfla::Config>(&config)) {
    require(!o.tile_q, "--tile/--tile-q: bfla sets its query tile (min(128, block)); give --tile-k");
    set(bf->tile, o.tile_k);
    set(bf->block, o.block);
    set(bf->group, o.group);
    set(bf->gamma, o.gamma);
    set(bf->eta, o.eta);
    set(bf->rho, o.rho);
    set(bf->seed, o.rescue_seed);
    set(bf->keep_ratio, o.keep_ratio);
    require(o.rescue_grid.empty() || o.rescue_grid == "coarse" || o.rescue_grid == "tile", "--rescue-grid: unknown '",
            o.rescue_grid, "' (coarse or tile)");
    if (!o.rescue_grid.empty()) bf->rescue_grid = o.rescue_grid == "coarse" ? bfla::RescueGrid::coarse : bfla::RescueGrid::tile;
  } else if (auto* sp = std::get_if<sparge::Config>(&config)) {
    if (!o.params.empty()) {
      const sparge::Params params = load_sparge_params(o.params);
      require(static_cast<std::int64_t>(params.heads.size()) == heads_q, "--params: '", o.params, "' has ",
              params.heads.size(), " heads, the input has ", heads_q);
      *sp = params.config();
    } else {
      tiles(sp->block_q, sp->block_k, o);
      if (o.sim_threshold) sp->theta = {*o.sim_threshold};
      if (o.cdf_threshold) sp->tau = {*o.cdf_threshold};
      // Giving τ selects the TopCdf entry point unless a top-k ρ is given too.
      if (o.cdf_threshold && !o.topk) sp->topk = 0.0f;
      set(sp->topk, o.topk);
    }
    sp->attention_sink = o.sink;
  } else if (auto* sa = std::get_if<sale::Config>(&config)) {
    require(!o.tile_q && !o.tile_k, "--tile: sale uses 64×32 blocks");
    if (!o.params.empty()) {
      const sale::Params params = load_sale_params(o.params);
      require(static_cast<std::int64_t>(params.tau.size()) == heads_q, "--params: '", o.params, "' has ",
              params.tau.size(), " heads, the input has ", heads_q);
      *sa = params.config();
    } else {
      set(sa->bits, o.bits);
      if (o.tau) sa->tau = {*o.tau};
      set(sa->local_window, o.local_window);
    }
  }
  return config;
}

const std::vector<std::string_view>& method_option_names(std::string_view name) {
  static const std::map<std::string_view, std::vector<std::string_view>> names{
      {"dense", {"tile_q", "tile_k"}},
      {"fgattn", {"tile_q", "tile_k", "top_p", "merge", "semantics"}},
      {"anchor", {"theta", "step"}},
      {"bfla", {"tile_k", "block", "group", "gamma", "eta", "rho", "rescue_seed", "rescue_grid", "keep_ratio"}},
      {"sparge", {"tile_q", "tile_k", "sim_threshold", "cdf_threshold", "topk", "sink", "params"}},
      {"sale", {"params", "bits", "tau", "local_window"}},
  };
  default_config(name);  // an unknown method: the registry's error, listing the known names
  const auto it = names.find(name);
  require(it != names.end(), "method '", name, "': its options are not listed in tools/methods.cpp");
  return it->second;
}

}  // namespace spattn::cli
