// Tuned method parameters as JSON files (host only; spattn::io): what `spattn calibrate` writes and
// `--params` reads. Each file names its method ("method": "sparge", "sale", or for a calibrated main knob "anchor",
// "fgattn", "bfla"); loading checks it, every field and the resulting Config, and throws spattn::Error naming the file
// (and the field).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "spattn/method_config.hpp"
#include "spattn/methods/sale.hpp"
#include "spattn/methods/sparge.hpp"

namespace spattn {

void save_params_json(const sparge::Params& params, const std::string& path);
sparge::Params load_sparge_params(const std::string& path);

void save_params_json(const sale::Params& params, const std::string& path);
sale::Params load_sale_params(const std::string& path);

/// A calibrated main knob: {"method", "option", "value" (absent when dense), "dense", "bound", "worst_rel_l1",
/// "density"}.
void save_params_json(const KnobParams& params, const std::string& path);
KnobParams load_knob_params(const std::string& path);

/// The loaders on JSON text in memory; `what` names it in messages ("params '<what>': …").
sparge::Params parse_sparge_params(std::string_view json, const std::string& what);
sale::Params parse_sale_params(std::string_view json, const std::string& what);
KnobParams parse_knob_params(std::string_view json, const std::string& what);

/// The option that names a parameter file (text: a path), beside each method's table options.
inline constexpr std::string_view kParamsOption = "params";
inline constexpr std::string_view kParamsDoc = "calibrated parameters from spattn calibrate (JSON)";
/// With a per-head file (SpargeAttn's heads, SALE's τ): the call's heads_q query heads are the file's heads
/// [params_first_head, params_first_head + heads_q) of params_heads (default: first 0, params_heads = heads_q, the
/// whole file). A process that runs some of a model's heads (spattn.distributed's all-to-all over heads) names its
/// first head and the model's head count; the file must hold exactly that many heads. A main-knob file holds for
/// every head and ignores them.
inline constexpr std::string_view kParamsFirstHeadOption = "params_first_head";
inline constexpr std::string_view kParamsHeadsOption = "params_heads";
/// Whether method `name` reads parameter files (every method but dense).
bool takes_params_file(std::string_view method);

/// The configuration of method `name` from options given by name: the registry's default, then a "params" file (for
/// heads_q query heads) in place of it, then the other options on top (set_options, spattn/method_config.hpp).
/// Throws spattn::Error on an unknown method, a bad option (see set_options) or a file of another method or head count.
MethodConfig configure_method(std::string_view name, std::span<const NamedValue> values, std::int64_t heads_q,
                              UnknownOptions unknown);

}  // namespace spattn
