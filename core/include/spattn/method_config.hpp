// The methods as values: MethodConfig names a method and carries its parameters; the registry lists every
// method with its summary and default configuration (the operating point its authors recommend to users).
// estimate(), sparse_attention() and calibrate() (spattn.hpp) take a MethodConfig; spattn calibrate writes
// per-head configurations as JSON files (spattn/params_file.hpp in io/) that load back into one.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "spattn/attend_options.hpp"
#include "spattn/mask.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/methods/bfla.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/methods/sale.hpp"
#include "spattn/methods/sparge.hpp"
#include "spattn/problem.hpp"

namespace spattn {

/// Every tile kept: exact dense attention through the tile-sparse executor (the baseline).
struct DenseConfig {
  std::int32_t tile_q = 128, tile_k = 128;
  void validate() const;  ///< throws spattn::Error naming the bad field
};

using MethodConfig =
    std::variant<DenseConfig, sparge::Config, sale::Config, anchor_attn::Config, fg_attn::Config, bfla::Config>;

/// std::visit helper: Overload{[](const DenseConfig&) {…}, [](const sparge::Config&) {…}, …}.
template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

/// "dense", "sparge", "sale", "anchor", "fgattn" or "bfla".
std::string_view method_name(const MethodConfig& config);

struct MethodInfo {
  std::string_view name;
  std::string_view summary;
  MethodConfig defaults;  ///< the authors' recommended operating point (see each method's header)
};

/// Every method, in the order the program lists them.
const std::vector<MethodInfo>& method_registry();
/// The default configuration of the method called `name`; throws spattn::Error listing the known names.
MethodConfig default_config(std::string_view name);

/// Validates the configuration for a problem (per-head vectors sized by problem.heads_q); throws spattn::Error
/// naming the method and the field.
void validate(const MethodConfig& config, const Problem& problem);

/// The shape of the mask the method's estimator builds: FG-Attn's per query tile (before its union semantics),
/// BFLA's one per KV head, AnchorAttention's one stripe row per query group.
MaskShape estimated_mask_shape(const MethodConfig& config, const Problem& problem);

/// The executor options a method brings to Stage 2 (SpargeAttn's PV-skip thresholds), on top of `base`.
AttendOptions attend_options_of(const MethodConfig& config, const AttendOptions& base = {});

}  // namespace spattn
