// The methods as values: MethodConfig names a method and carries its parameters; the registry lists every
// method with its summary and default configuration (the operating point its authors recommend to users).
// estimate(), sparse_attention() and calibrate() (spattn.hpp) take a MethodConfig; spattn calibrate writes
// per-head configurations as JSON files (spattn/params_file.hpp in io/) that load back into one.
// Each method's options (names, ranges, docs) are its option table (spattn/options.hpp); the forms below apply them
// to a MethodConfig by name, for the program, the Python package and parameter files.
#pragma once

#include <span>
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
#include "spattn/options.hpp"
#include "spattn/problem.hpp"

namespace spattn {

/// Every tile kept: exact dense attention through the tile-sparse executor (the baseline).
struct DenseConfig {
  std::int32_t tile_q = 128, tile_k = 128;
  void validate() const;  ///< throws spattn::Error naming the bad field
};

inline constexpr Option kDenseOptions[] = {
    {.name = "tile_q", .field = SPATTN_FIELD(DenseConfig, tile_q), .symbol = "", .doc = "query rows per tile",
     .lo = MaskShape::kMinTileQ, .hi = MaskShape::kMaxTileQ},
    {.name = "tile_k", .field = SPATTN_FIELD(DenseConfig, tile_k), .symbol = "", .doc = "keys per tile",
     .lo = MaskShape::kMinTileK, .hi = MaskShape::kMaxTileK},
};
inline constexpr OptionTable kDenseOptionTable{
    .method = "dense", .summary = "every tile kept: exact dense attention (the baseline)", .options = kDenseOptions};
constexpr const OptionTable& option_table(const DenseConfig&) { return kDenseOptionTable; }

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

// ---- a method's options by name (its option table) ----

/// The option table of the configuration's method.
const OptionTable& option_table(const MethodConfig& config);
/// The option table of the method called `name`; throws spattn::Error listing the known methods.
const OptionTable& option_table(std::string_view name);
/// The public names of the options a method takes by name, in table order: "tile_q, tile_k, top_p, …".
std::string option_names(const OptionTable& table);

/// One option given by name (its public name or an alias): a number (flags 0/1, choices their index) or text (as
/// typed on a command line: numbers, true/false, a choice's name).
struct NamedValue {
  std::string name;
  std::variant<double, std::string> value;
};
enum class UnknownOptions : std::uint8_t {
  error,  ///< an option the method does not take is an Error naming the options it takes (Python)
  skip,   ///< ignored (the program's flags are shared by every method)
};
/// Sets the named options on `config` in order, then applies the method's rules between them (SpargeAttn: τ given
/// without ρ selects TopCdf). Throws spattn::Error on a bad value, an option given twice (by two names), or, with
/// UnknownOptions::error, an option the method does not take. Ranges are checked by validate().
void set_options(MethodConfig& config, std::span<const NamedValue> values, UnknownOptions unknown);

/// What calibrate() gives a method whose options hold one value for every head (AnchorAttention, FG-Attn, BFLA): the
/// setting of its main knob (main_knob of its option table, one of the table's sweep values) for one set of inputs —
/// one layer's samples, so a model is calibrated per layer — with what the search measured there. Saved and loaded as
/// JSON by spattn/params_file.hpp ({"method", "option", "value", …}).
struct KnobParams {
  std::string method;         ///< the registry's name
  /// Every option (settable by name) of the configuration the search started from, by public name: numbers, flags
  /// 0/1, choices their index (the knob among them is overridden by `value`).
  std::vector<NamedValue> base;
  std::string option;         ///< the knob's public name
  double value = 0.0;         ///< its setting (not used when dense)
  bool dense = false;         ///< no swept setting met the bound: every tile kept (exact)
  double bound = 0.0;         ///< the per-head rel L1 bound of the search
  double worst_rel_l1 = 0.0;  ///< the worst head's rel L1 over the samples at the setting (0 when dense)
  double density = 1.0;       ///< kept / reachable tiles over the samples at the setting
  /// The configuration searched from (the registry's default with `base` set) with the knob at `value`; a DenseConfig
  /// when dense. Throws spattn::Error when `option` is not the method's main knob or an option is bad.
  MethodConfig config() const;
};

}  // namespace spattn
