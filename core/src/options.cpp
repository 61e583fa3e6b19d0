// The generic forms over a method's option table: validation, setting by name, the defaults as text.
#include "spattn/options.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "spattn/error.hpp"

namespace spattn {
namespace {

std::string label_of(const OptionTable& table, const Option& o) {
  std::string s = std::string(table.method) + " " + std::string(o.field.member);
  if (o.symbol_in_messages) s += " (" + std::string(o.symbol) + ")";
  return s;
}

bool allowed_extra(const Option& o, double x) { return o.also && (x == *o.also); }

void check_value(const std::string& label, const Option& o, const void* config, std::size_t i) {
  const double x = o.field.get(config, i);
  if (allowed_extra(o, x)) return;
  if (o.field.kind == OptionKind::integer) {
    const std::int64_t v = o.field.get_integer(config, i);
    const Interval<std::int64_t> range{static_cast<std::int64_t>(o.lo), static_cast<std::int64_t>(o.hi), o.open_lo,
                                       o.open_hi};
    if (o.multiple_of > 1)
      require(range.contains(v) && v % o.multiple_of == 0, label, ": must be a multiple of ", o.multiple_of, " in [",
              range.lo, ", ", range.hi, "]", o.note, ", got ", v);
    require_in(label, v, range, o.note);
  } else if (o.field.kind == OptionKind::real) {
    // fp32 members: the range and the value printed as the fp32 numbers they are.
    require_in(label, static_cast<float>(x),
               Interval<float>{static_cast<float>(o.lo), static_cast<float>(o.hi), o.open_lo, o.open_hi}, o.note);
  }
}

std::string choice_list(std::string_view choices) {
  const std::vector<std::string_view> names = split_names(choices);
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : (i + 1 == names.size() ? " or " : ", ")) + std::string(names[i]);
  return s;
}

/// An integral double as written in the input: 4294967424, not 4.29497e+09.
std::string integer_text(double x) {
  std::ostringstream s;
  s.precision(0);
  s << std::fixed << x;
  return s.str();
}

std::string number_text(double x, OptionKind kind) {
  std::ostringstream s;
  if (kind == OptionKind::integer) s << static_cast<std::int64_t>(x);
  else s << static_cast<float>(x);
  return s.str();
}

}  // namespace

std::vector<std::string_view> split_names(std::string_view list) {
  std::vector<std::string_view> out;
  while (!list.empty()) {
    const std::size_t bar = list.find('|');
    out.push_back(list.substr(0, bar));
    if (bar == std::string_view::npos) break;
    list.remove_prefix(bar + 1);
  }
  return out;
}

bool listed(std::string_view list, std::string_view name) {
  for (std::string_view n : split_names(list))
    if (n == name) return true;
  return false;
}

const Option* find_option(const OptionTable& table, std::string_view name) {
  for (const Option& o : table.options)
    if (o.by_name && (o.name == name || listed(o.aliases, name))) return &o;
  return nullptr;
}

std::string_view refusal(const OptionTable& table, std::string_view name) {
  for (const Refusal& r : table.refusals)
    if (listed(r.names, name)) return r.reason;
  return {};
}

void validate_options(const OptionTable& table, const void* config, std::int64_t heads_q) {
  for (const Option& o : table.options) {
    const std::string label = label_of(table, o);
    const std::size_t n = o.field.count(config);
    if (o.field.per_head && heads_q >= 0) {
      const bool one_per_head = static_cast<std::int64_t>(n) == heads_q;
      switch (o.heads) {
        case Heads::one_or_each:
          require(n == 1 || one_per_head, label, ": give one value or one per query head (", heads_q, "), got ", n);
          break;
        case Heads::none_one_or_each:
          require(n <= 1 || one_per_head, label, ": give none, one value or one per query head (", heads_q, "), got ", n);
          break;
        case Heads::none_or_each:
          require(n == 0 || one_per_head, label, ": give one flag per query head (", heads_q, "), got ", n);
          break;
      }
    }
    for (std::size_t i = 0; i < n; ++i) check_value(label, o, config, i);
  }
}

const Option& table_option(const OptionTable& table, std::string_view name) {
  for (const Option& o : table.options)
    if (o.name == name) return o;
  fail("internal: ", table.method, " has no option '", name, "'");
}

void check_option_value(const Option& o, double value, std::string_view given) {
  switch (o.field.kind) {
    case OptionKind::integer: {
      require(std::isfinite(value) && value == std::trunc(value), given, ": expected an integer, got ", value);
      const double limit = std::ldexp(1.0, o.field.bits - 1);
      require(value >= -limit && value < limit, given, ": ", integer_text(value), " does not fit in ", o.field.bits,
              " bits");
      break;
    }
    case OptionKind::real:
      // A number beyond fp32's range would silently become inf.
      require(!std::isfinite(value) || std::fabs(value) <= 3.4028234663852886e38, given, ": ", value,
              " is beyond the fp32 range");
      break;
    case OptionKind::flag:
      require(value == 0.0 || value == 1.0, given, ": expected true or false, got ", value);
      break;
    case OptionKind::choice: {
      const auto n = static_cast<double>(split_names(o.choices).size());
      require(value >= 0.0 && value < n && value == std::trunc(value), given, ": expected ", choice_list(o.choices),
              ", got ", value);
      break;
    }
  }
}

void set_option(const Option& o, void* config, double value, std::string_view given) {
  check_option_value(o, value, given);
  o.field.set(config, value);
}

double parse_option(const Option& o, std::string_view text, std::string_view given) {
  const std::string s(text);
  switch (o.field.kind) {
    case OptionKind::integer: {
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc::result_out_of_range) fail(given, ": ", s, " does not fit in 64 bits");
      require(ec == std::errc() && end == s.data() + s.size() && !s.empty(), given, ": expected an integer, got '", s, "'");
      const double limit = std::ldexp(1.0, o.field.bits - 1);
      require(static_cast<double>(v) >= -limit && static_cast<double>(v) < limit, given, ": ", v, " does not fit in ",
              o.field.bits, " bits");
      return static_cast<double>(v);
    }
    case OptionKind::real: {
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      require(!s.empty() && end == s.c_str() + s.size(), given, ": expected a number, got '", s, "'");
      return v;
    }
    case OptionKind::flag:
      if (s == "true" || s == "1") return 1.0;
      if (s == "false" || s == "0") return 0.0;
      fail(given, ": expected true or false, got '", s, "'");
    case OptionKind::choice: {
      const std::vector<std::string_view> names = split_names(o.choices);
      for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == text) return static_cast<double>(i);
      fail(given, ": unknown '", s, "' (", choice_list(o.choices), ")");
    }
  }
  fail(given, ": unknown option kind");
}

std::string option_value_text(const Option& o, const void* config) {
  if (o.field.count(config) == 0) return "none";
  const double x = o.field.get(config, 0);
  switch (o.field.kind) {
    case OptionKind::flag: return x != 0.0 ? "true" : "false";
    case OptionKind::choice: return std::string(split_names(o.choices).at(static_cast<std::size_t>(x)));
    default: return number_text(x, o.field.kind);
  }
}

std::string option_setting_text(const Option& o, const void* config) {
  return std::string(o.symbol.empty() ? o.name : o.symbol) + " = " + option_value_text(o, config);
}

std::string summary_with_defaults(const OptionTable& table, const void* defaults) {
  std::string s = std::string(table.summary) + " (";
  bool first = true;
  for (const Option& o : table.options) {
    if (!o.by_name) continue;
    s += (first ? "" : ", ") + option_setting_text(o, defaults);
    first = false;
  }
  return s + ")";
}

const Option* main_knob(const OptionTable& table) {
  for (const Option& o : table.options)
    if (!o.sweep.empty()) return &o;
  return nullptr;
}

}  // namespace spattn
