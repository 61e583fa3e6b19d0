#include "method_flags.hpp"

#include <algorithm>
#include <exception>

#include "spattn/error.hpp"
#include "spattn/params_file.hpp"

namespace spattn::cli {
namespace {

std::string flag_of(std::string_view name) {
  std::string s = "--" + std::string(name);
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

/// "fgattn: kept probability mass … (default 0.9)" for one method's option; an alias points to its name.
std::string help_of(const OptionTable& table, const Option& o, std::string_view as, const void* defaults) {
  std::string h = std::string(table.method) + ": ";
  if (as != o.name) return h + "the older name of " + flag_of(o.name);
  if (!o.symbol.empty()) h += std::string(o.symbol) + ", ";
  h += std::string(o.doc);
  if (o.field.kind == OptionKind::choice) {
    std::string c;
    for (std::string_view n : split_names(o.choices)) c += (c.empty() ? "" : " | ") + std::string(n);
    h += ": " + c;
  }
  return h + " (default " + option_value_text(o, defaults) + ")";
}

/// Parses `text` as any method's option called `name` would (a malformed number fails even for a method that ignores
/// the flag, as when CLI11 parsed them).
void check_text(const std::string& name, const std::string& text) {
  for (const MethodInfo& m : method_registry())
    if (const Option* o = find_option(option_table(m.defaults), name)) {
      parse_option(*o, text, flag_of(name));
      return;
    }
}

std::pair<std::string, std::string> split_tile(const std::string& tile) {
  const auto x = tile.find('x');
  std::size_t used_q = 0, used_k = 0;
  std::string q, k;
  try {
    require(x != std::string::npos, "");
    q = std::to_string(std::stoi(tile.substr(0, x), &used_q));
    k = std::to_string(std::stoi(tile.substr(x + 1), &used_k));
  } catch (const std::exception&) {
    used_q = 0;
  }
  require(used_q == x && used_k == tile.size() - x - 1 && used_q > 0, "--tile: expected MxN such as 32x32, got '", tile,
          "'");
  return {q, k};
}

}  // namespace

void add_method_flags(CLI::App* sub, MethodFlags& flags) {
  struct Entry {
    std::string name, help;
    OptionKind kind;
  };
  std::vector<Entry> entries;  // in registry order, each name once
  for (const MethodInfo& m : method_registry()) {
    const OptionTable& table = option_table(m.defaults);
    const void* defaults = std::visit([](const auto& c) -> const void* { return &c; }, m.defaults);
    for (const Option& o : table.options) {
      if (!o.by_name) continue;
      std::vector<std::string_view> names{o.name};
      for (std::string_view a : split_names(o.aliases)) names.push_back(a);
      for (std::string_view n : names) {
        const std::string help = help_of(table, o, n, defaults);
        auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == n; });
        if (it == entries.end()) {
          entries.push_back({std::string(n), help, o.field.kind});
        } else {
          require((it->kind == OptionKind::flag) == (o.field.kind == OptionKind::flag), "internal: option '", n,
                  "' is a flag in one method and takes a value in another");
          it->help += "; " + help;
        }
      }
    }
  }
  sub->add_option("--tile", flags.tile, "mask tiles MxN, e.g. 32x32: --tile-q M --tile-k N (default: the method's)");
  for (const Entry& e : entries) {
    MethodFlags::Flag& f = flags.flags.emplace_back();
    f.name = e.name;
    f.is_flag = e.kind == OptionKind::flag;
    if (f.is_flag) {
      f.option = sub->add_flag(flag_of(e.name), f.on, e.help);
    } else {
      // Numbers are parsed and range-checked by the library (one wording for every surface), not by CLI11.
      f.option = sub->add_option(flag_of(e.name), f.text, e.help);
      f.option->type_name(e.kind == OptionKind::integer ? "INT" : e.kind == OptionKind::real ? "FLOAT" : "NAME");
    }
  }
  std::string takes;
  for (const MethodInfo& m : method_registry())
    if (takes_params_file(m.name)) takes += (takes.empty() ? "" : "/") + std::string(m.name);
  sub->add_option(flag_of(kParamsOption), flags.params, takes + ": " + std::string(kParamsDoc))
      ->check(CLI::ExistingFile);
}

std::vector<NamedValue> given_options(const MethodFlags& flags, const std::string& method) {
  const OptionTable& table = option_table(method);
  std::vector<NamedValue> given;
  for (const MethodFlags::Flag& f : flags.flags) {
    if (f.option->count() == 0) continue;
    if (!flags.tile.empty() && (f.name == "tile_q" || f.name == "tile_k")) continue;  // --tile sets both
    if (f.is_flag) {
      given.push_back({f.name, f.on ? 1.0 : 0.0});
    } else {
      check_text(f.name, f.text);
      given.push_back({f.name, f.text});
    }
  }
  if (!flags.tile.empty()) {
    const auto [q, k] = split_tile(flags.tile);
    given.push_back({"tile_q", q});
    given.push_back({"tile_k", k});
  }
  for (const NamedValue& v : given) {
    const std::string_view reason = refusal(table, v.name);
    if (reason.empty()) continue;
    const bool tile = v.name == "tile_q" || v.name == "tile_k";
    const std::string other = v.name == "tile_q" ? "tile_k" : "tile_q";
    fail(tile ? "--tile/" : "", flag_of(v.name), ": ", reason,
         tile && find_option(table, other) ? "; give " + flag_of(other) : std::string());
  }
  if (!flags.params.empty()) given.push_back({std::string(kParamsOption), flags.params});
  return given;
}

}  // namespace spattn::cli
