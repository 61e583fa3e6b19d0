// The method registry: names, summaries, defaults, validation and the executor options each method brings.
#include "spattn/method_config.hpp"

#include <cmath>
#include <sstream>

#include "spattn/error.hpp"

namespace spattn {

void DenseConfig::validate() const { validate_options(kDenseOptionTable, this, -1); }

std::string_view method_name(const MethodConfig& config) { return option_table(config).method; }

namespace {

const void* data_of(const MethodConfig& config) {
  return std::visit([](const auto& c) -> const void* { return &c; }, config);
}
void* data_of(MethodConfig& config) {
  return std::visit([](auto& c) -> void* { return &c; }, config);
}

}  // namespace

const std::vector<MethodInfo>& method_registry() {
  // The order the program lists them; each summary ends with the defaults, read from the method's option table.
  static const std::vector<MethodConfig> defaults = {DenseConfig{},      fg_attn::Config{}, anchor_attn::Config{},
                                                     bfla::Config{},     sparge::Config{},  sale::Config{}};
  static const std::vector<std::string> summaries = [] {
    std::vector<std::string> s;
    for (const MethodConfig& c : defaults) s.push_back(summary_with_defaults(option_table(c), data_of(c)));
    return s;
  }();
  static const std::vector<MethodInfo> list = [] {
    std::vector<MethodInfo> l;
    for (std::size_t i = 0; i < defaults.size(); ++i)
      l.push_back({option_table(defaults[i]).method, summaries[i], defaults[i]});
    return l;
  }();
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
    o.qk_int8 = o.qk_int8 || s->qk_int8;
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

const OptionTable& option_table(const MethodConfig& config) {
  return std::visit([](const auto& c) -> const OptionTable& { return option_table(c); }, config);
}

const OptionTable& option_table(std::string_view name) { return option_table(default_config(name)); }

std::string option_names(const OptionTable& table) {
  std::string s;
  for (const Option& o : table.options)
    if (o.by_name) s += (s.empty() ? "" : ", ") + std::string(o.name);
  return s.empty() ? "nothing" : s;
}

void set_options(MethodConfig& config, std::span<const NamedValue> values, UnknownOptions unknown) {
  const OptionTable& table = option_table(config);
  std::vector<const Option*> set;
  std::vector<std::string_view> as_given, given;  // the names used, and the public names (for the method's rules)
  for (const NamedValue& v : values) {
    const Option* o = find_option(table, v.name);
    if (!o) {
      if (unknown == UnknownOptions::skip) continue;
      const std::string_view why = refusal(table, v.name);
      fail("method '", table.method, "': unknown option '", v.name, "' (", why, why.empty() ? "" : "; ", table.method,
           " takes ", option_names(table), ")");
    }
    for (std::size_t i = 0; i < set.size(); ++i)
      require(set[i] != o, table.method, " ", o->name, ": given twice (as '", as_given[i], "' and '", v.name, "')");
    const double x = std::holds_alternative<double>(v.value) ? std::get<double>(v.value)
                                                             : parse_option(*o, std::get<std::string>(v.value), v.name);
    set_option(*o, data_of(config), x, v.name);
    set.push_back(o);
    as_given.push_back(v.name);
    given.push_back(o->name);
  }
  if (table.settle) table.settle(data_of(config), given);
}

MethodConfig KnobParams::config() const {
  if (dense) return DenseConfig{};
  MethodConfig c = default_config(method);
  const Option* knob = main_knob(option_table(c));
  require(knob != nullptr && knob->name == option, "calibrated '", method, "': the option '", option,
          "' is not the method's main knob", knob != nullptr ? " ('" + std::string(knob->name) + "')" : std::string());
  std::vector<NamedValue> settings;
  for (const NamedValue& v : base)
    if (v.name != option) settings.push_back(v);
  settings.push_back({option, value});
  set_options(c, settings, UnknownOptions::error);
  return c;
}

}  // namespace spattn
