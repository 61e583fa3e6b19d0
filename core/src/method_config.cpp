// The method registry: names, summaries, defaults, validation and the executor options each method brings.
#include "spattn/method_config.hpp"

#include <cmath>
#include <sstream>

#include "spattn/error.hpp"

namespace spattn {

void DenseConfig::validate() const {
  require_in("dense tile_q", tile_q, Interval<std::int32_t>{MaskShape::kMinTileQ, MaskShape::kMaxTileQ});
  require_in("dense tile_k", tile_k, Interval<std::int32_t>{MaskShape::kMinTileK, MaskShape::kMaxTileK});
}

std::string_view method_name(const MethodConfig& config) {
  return std::visit(Overload{[](const DenseConfig&) { return std::string_view("dense"); },
                             [](const sparge::Config&) { return std::string_view("sparge"); },
                             [](const sale::Config&) { return std::string_view("sale"); },
                             [](const anchor_attn::Config&) { return std::string_view("anchor"); },
                             [](const fg_attn::Config&) { return std::string_view("fgattn"); },
                             [](const bfla::Config&) { return std::string_view("bfla"); }},
                    config);
}

const std::vector<MethodInfo>& method_registry() {
  static const std::vector<MethodInfo> list = {
      {"dense", "every tile kept: exact dense attention (the baseline)", DenseConfig{}},
      {"fgattn", "FG-Attn: mean-pooled M×N tile scores, top-p (32×32, p = 0.9, exact merging)", fg_attn::Config{}},
      {"anchor", "AnchorAttention: anchors over sink + local, difference-aware stripes (θ = 12, step = 16)",
       anchor_attn::Config{}},
      {"bfla", "BFLA: flattened-group block scores, keep-mass γ = 0.99, sink + local band, rescues", bfla::Config{}},
      {"sparge", "SpargeAttn: pooled scores + self-similarity, top-k ρ = 0.5 (θ = −0.1); TopCdf τ with --topk 0",
       sparge::Config{}},
      {"sale", "SALE: int4 estimates, relative score vs exact sink-local statistics (τ = 0.004)", sale::Config{}},
  };
  return list;
}

MethodConfig default_config(std::string_view name) {
  std::ostringstream known;
  for (const MethodInfo& m : method_registry()) {
    if (m.name == name) return m.defaults;
    known << (known.tellp() > 0 ? ", " : "") << m.name;
  }
  fail("method: unknown method '", name, "' (implemented: ", known.str(), ")");
}

void validate(const MethodConfig& config, const Problem& problem) {
  std::visit(Overload{[](const DenseConfig& c) { c.validate(); },
                      [&](const sparge::Config& c) { c.validate(problem.heads_q); },
                      [&](const sale::Config& c) { c.validate(problem.heads_q); },
                      [](const anchor_attn::Config& c) { c.validate(); },
                      [](const fg_attn::Config& c) { c.validate(); },
                      [](const bfla::Config& c) { c.validate(); }},
             config);
}

AttendOptions attend_options_of(const MethodConfig& config, const AttendOptions& base) {
  AttendOptions o = base;
  if (const auto* s = std::get_if<sparge::Config>(&config)) {
    if (s->pv_threshold.size() == 1) o.pv_threshold = s->pv_threshold[0];
    else if (!s->pv_threshold.empty()) o.pv_threshold_per_head = s->pv_threshold;
  }
  return o;
}

MaskShape estimated_mask_shape(const MethodConfig& config, const Problem& problem) {
  return std::visit(
      Overload{[&](const DenseConfig& c) { return MaskShape::of(problem, c.tile_q, c.tile_k); },
               [&](const sparge::Config& c) { return MaskShape::of(problem, c.block_q, c.block_k); },
               [&](const bfla::Config& c) { return MaskShape::of(problem, c.tile_q(), c.tile, /*per KV head*/ true); },
               [&](const fg_attn::Config& c) { return MaskShape::of(problem, c.tile_q, c.tile_k); },
               [&](const anchor_attn::Config& c) { return MaskShape::of(problem, c.group_rows(), 1); },
               [&](const sale::Config&) { return MaskShape::of(problem, sale::kBlockQ, sale::kBlockK); }},
      config);
}

}  // namespace spattn
