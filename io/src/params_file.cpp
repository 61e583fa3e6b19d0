// Tuned method parameters as JSON files: SpargeAttn ("method": "sparge"), SALE ("method": "sale") and a calibrated
// main knob of the other methods ("method": "anchor", "fgattn" or "bfla").
#include "spattn/params_file.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spattn/error.hpp"
#include "spattn/npy.hpp"

namespace spattn {

namespace {

/// Runs a parse, every failure one Error "params '<what>': …" (JSON syntax and type errors, ranges, validation).
template <class Parse>
auto parsed(const std::string& what, Parse parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const nlohmann::json::exception& e) {
    fail("params '", what, "': ", e.what());
  } catch (const Error& e) {
    fail("params '", what, "': ", e.what());
  }
}

/// The value of a method's option in a parameter file, under the option's public name: the checks of every other
/// surface (check_option_value: integers held by the member's type, reals within fp32, "inf" as text), the JSON types.
double option_value(const nlohmann::json& x, const OptionTable& table, std::string_view name) {
  const Option& o = table_option(table, name);
  const std::string key(o.name);
  double v = 0.0;
  switch (o.field.kind) {
    case OptionKind::flag:
      require(x.is_boolean(), key, ": expected true or false, got ", x.dump());
      v = x.get<bool>() ? 1.0 : 0.0;
      break;
    case OptionKind::integer:
      require(x.is_number_integer(), key, ": expected an integer, got ", x.dump());
      v = x.is_number_unsigned() ? static_cast<double>(x.get<std::uint64_t>()) : static_cast<double>(x.get<std::int64_t>());
      break;
    case OptionKind::choice:
      require(x.is_string(), key, ": expected a name, got ", x.dump());
      v = parse_option(o, x.get<std::string>(), key);
      break;
    case OptionKind::real:
      if (x.is_string()) {  // JSON has no infinity: "inf" (PV-skip off)
        v = parse_option(o, x.get<std::string>(), key);
        require(std::isinf(v), key, ": expected a number or \"inf\", got ", x.dump());
      } else {
        require(x.is_number(), key, ": expected a number, got ", x.dump());
        v = x.get<double>();
      }
      break;
  }
  check_option_value(o, v, key);
  return v;
}
double option_value_at(const nlohmann::json& j, const OptionTable& table, std::string_view name) {
  return option_value(j.at(std::string(name)), table, name);
}

/// A JSON number within fp32's range (a larger one would silently become inf).
float real_value(const nlohmann::json& x, const char* key) {
  require(x.is_number(), key, ": expected a number, got ", x.dump());
  const double d = x.get<double>();
  require(std::fabs(d) <= std::numeric_limits<float>::max(), key, ": ", x.dump(), " is beyond the fp32 range");
  return static_cast<float>(d);
}
float real(const nlohmann::json& j, const char* key) { return real_value(j.at(key), key); }

}  // namespace

void save_params_json(const sparge::Params& params, const std::string& path) {
  nlohmann::json j;
  j["method"] = "sparge";
  j["block_q"] = params.block_q;
  j["block_k"] = params.block_k;
  j["l1"] = params.l1;
  j["l2"] = params.l2;
  j["heads"] = nlohmann::json::array();
  for (const sparge::HeadParams& h : params.heads)
    j["heads"].push_back({{"theta", h.theta},
                          {"tau", h.tau},
                          {"pv_threshold", std::isinf(h.pv_threshold) ? nlohmann::json("inf") : nlohmann::json(h.pv_threshold)},
                          {"dense", h.dense},
                          {"sparsity", h.sparsity},
                          {"rel_l1", h.rel_l1}});
  std::ofstream out(path);
  require(out.good(), "cannot open '", path, "' for writing");
  out << j.dump(2) << "\n";
  require(out.good(), "error writing '", path, "'");
}

sparge::Params load_sparge_params(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file(path);
  return parse_sparge_params({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, path);
}

sparge::Params parse_sparge_params(std::string_view text, const std::string& what) {
  return parsed(what, [&] {
    const nlohmann::json j = nlohmann::json::parse(text);
    require(j.is_object() && j.value("method", "") == "sparge", "not SpargeAttn parameters (method '",
            j.is_object() ? j.value("method", "") : "", "')");
    const OptionTable& t = sparge::kOptionTable;  // the keys that are options: their names, their checks
    sparge::Params p;
    p.block_q = static_cast<std::int32_t>(option_value_at(j, t, "block_q"));
    p.block_k = static_cast<std::int32_t>(option_value_at(j, t, "block_k"));
    p.l1 = j.contains("l1") ? real(j, "l1") : 0.0f;
    p.l2 = j.contains("l2") ? real(j, "l2") : 0.0f;
    for (const auto& h : j.at("heads")) {
      require(h.is_object(), "heads: each head is an object, got ", h.type_name());
      sparge::HeadParams hp;
      hp.theta = static_cast<float>(option_value_at(h, t, "theta"));
      hp.tau = static_cast<float>(option_value_at(h, t, "tau"));
      hp.pv_threshold = static_cast<float>(option_value_at(h, t, "pv_threshold"));  // "inf": no PV-skip
      hp.dense = option_value_at(h, t, "dense") != 0.0;
      hp.sparsity = h.value("sparsity", 0.0);
      hp.rel_l1 = h.value("rel_l1", 0.0);
      p.heads.push_back(hp);
    }
    require(!p.heads.empty(), "no heads");
    p.config().validate(static_cast<std::int64_t>(p.heads.size()));
    return p;
  });
}

void save_params_json(const sale::Params& params, const std::string& path) {
  const sale::Config config = params.config();
  const nlohmann::json j = {{"method", "sale"},
                            {"bits", params.bits},
                            {"groups", option_value_text(table_option(sale::kOptionTable, "groups"), &config)},
                            {"local_window", params.local_window},
                            {"theta", params.theta},
                            {"tau", params.tau}};
  std::ofstream out(path);
  require(out.good(), "cannot open '", path, "' for writing");
  out << j.dump(2) << "\n";
}

sale::Params load_sale_params(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file(path);
  return parse_sale_params({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, path);
}

sale::Params parse_sale_params(std::string_view text, const std::string& what) {
  return parsed(what, [&] {
    const nlohmann::json j = nlohmann::json::parse(text);
    require(j.is_object() && j.value("method", "") == "sale", "not SALE parameters");
    const OptionTable& t = sale::kOptionTable;  // the keys that are options: their names, their checks
    sale::Params p;
    p.bits = static_cast<int>(option_value_at(j, t, "bits"));
    if (j.contains("groups"))  // files before the option: the thread groups
      p.groups = static_cast<sale::Groups>(static_cast<int>(option_value_at(j, t, "groups")));
    p.local_window = static_cast<std::int64_t>(option_value_at(j, t, "local_window"));
    p.theta = j.contains("theta") ? real(j, "theta") : 0.4f;  // the calibration's error bound, not an option
    for (const auto& tau : j.at("tau")) p.tau.push_back(static_cast<float>(option_value(tau, t, "tau")));
    require(!p.tau.empty(), "no tau values");
    p.config().validate(static_cast<std::int64_t>(p.tau.size()));
    return p;
  });
}

void save_params_json(const KnobParams& params, const std::string& path) {
  nlohmann::json j = {{"method", params.method},
                      {"option", params.option},
                      {"dense", params.dense},
                      {"bound", params.bound},
                      {"worst_rel_l1", params.worst_rel_l1},
                      {"density", params.density}};
  if (!params.dense) j["value"] = params.value;
  const OptionTable& t = option_table(params.method);
  nlohmann::json base = nlohmann::json::object();  // as the options' JSON types: option_value() reads them back
  for (const NamedValue& v : params.base) {
    const Option& o = table_option(t, v.name);
    const double x = std::get<double>(v.value);
    switch (o.field.kind) {
      case OptionKind::flag: base[v.name] = x != 0.0; break;
      case OptionKind::integer: base[v.name] = static_cast<std::int64_t>(x); break;
      case OptionKind::choice: base[v.name] = std::string(split_names(o.choices).at(static_cast<std::size_t>(x))); break;
      case OptionKind::real:
        if (std::isinf(x)) base[v.name] = x > 0 ? "inf" : "-inf";
        else base[v.name] = x;
        break;
    }
  }
  j["base"] = base;
  std::ofstream out(path);
  require(out.good(), "cannot open '", path, "' for writing");
  out << j.dump(2) << "\n";
  require(out.good(), "error writing '", path, "'");
}

KnobParams load_knob_params(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file(path);
  return parse_knob_params({reinterpret_cast<const char*>(bytes.data()), bytes.size()}, path);
}

KnobParams parse_knob_params(std::string_view text, const std::string& what) {
  return parsed(what, [&] {
    const nlohmann::json j = nlohmann::json::parse(text);
    require(j.is_object() && j.contains("method") && j.at("method").is_string(), "no \"method\"");
    KnobParams p;
    p.method = j.at("method").get<std::string>();
    require(p.method != "sparge" && p.method != "sale" && p.method != "dense", "method '", p.method,
            "' has no main-knob parameters");
    const OptionTable& t = option_table(p.method);  // throws on an unknown method
    p.option = j.at("option").get<std::string>();
    require(j.at("dense").is_boolean(), "dense: expected true or false, got ", j.at("dense").dump());
    p.dense = j.at("dense").get<bool>();
    if (!p.dense) p.value = option_value(j.at("value"), t, p.option);  // checks the option exists and the value
    if (j.contains("base")) {
      require(j.at("base").is_object(), "base: expected an object of options, got ", j.at("base").dump());
      for (const auto& [name, x] : j.at("base").items()) p.base.push_back({name, option_value(x, t, name)});
    }
    p.bound = j.value("bound", 0.0);
    p.worst_rel_l1 = j.value("worst_rel_l1", 0.0);
    p.density = j.value("density", 1.0);
    validate(p.config(), Problem{});  // the option is the main knob; the value within its range
    return p;
  });
}

bool takes_params_file(std::string_view method) { return method != "dense"; }

namespace {

/// A non-negative integer meta-option of the params file (params_first_head, params_heads): a whole double, or integer
/// text read as parse_option reads an integer option's (std::from_chars, the whole text).
std::int64_t head_count_value(const NamedValue& v) {
  if (const auto* text = std::get_if<std::string>(&v.value)) {
    std::int64_t n = -1;
    const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
    require(ec == std::errc() && end == text->data() + text->size() && n >= 0, v.name,
            ": expected a head index >= 0, got '", *text, "'");
    return n;
  }
  const double d = std::get<double>(v.value);
  require(d >= 0.0 && d == std::floor(d) && d < 9.0e15, v.name, ": expected a head index >= 0, got ", d);
  return static_cast<std::int64_t>(d);
}

/// Heads [first, first + count) of a per-head list of `total` entries, checked against the file's own count.
template <class T>
std::vector<T> heads_of(const std::vector<T>& all, const std::string& path, std::int64_t first, std::int64_t count,
                        std::int64_t total) {
  require(static_cast<std::int64_t>(all.size()) == total, "params: '", path, "' has ", all.size(), " heads, the input has ",
          total);
  require(first + count <= total, "params: heads [", first, ", ", first + count, ") of '", path, "', which has ", total);
  return {all.begin() + first, all.begin() + first + count};
}

}  // namespace

MethodConfig configure_method(std::string_view name, std::span<const NamedValue> values, std::int64_t heads_q,
                              UnknownOptions unknown) {
  MethodConfig config = default_config(name);
  std::vector<NamedValue> options;
  const NamedValue* file = nullptr;
  std::int64_t first = 0, total = heads_q;
  bool head_range = false;
  for (const NamedValue& v : values) {
    if (v.name == kParamsOption) {
      file = &v;
    } else if (v.name == kParamsFirstHeadOption || v.name == kParamsHeadsOption) {
      (v.name == kParamsFirstHeadOption ? first : total) = head_count_value(v);
      head_range = true;
    } else {
      options.push_back(v);
    }
  }
  require(!head_range || file != nullptr, "params_first_head / params_heads: only with params (a per-head file)");
  if (file != nullptr) {
    require(takes_params_file(name), "params: dense takes no parameter file");
    require(std::holds_alternative<std::string>(file->value), "params: expected a path");
    const std::string& path = std::get<std::string>(file->value);
    if (name != "sparge" && name != "sale") {
      const KnobParams params = load_knob_params(path);
      require(params.method == name, "params: '", path, "' holds ", params.method, " parameters, not ", name);
      config = params.config();
    } else if (name == "sparge") {
      sparge::Params params = load_sparge_params(path);
      params.heads = heads_of(params.heads, path, first, heads_q, total);
      config = params.config();
    } else {
      sale::Params params = load_sale_params(path);
      params.tau = heads_of(params.tau, path, first, heads_q, total);
      config = params.config();
    }
  }
  set_options(config, options, unknown);
  return config;
}

}  // namespace spattn
