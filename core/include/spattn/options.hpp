// A method's options as data. Each method's header (methods/<method>.hpp) holds one OptionTable: for every option its
// public name, the Config member it sets, its range, paper symbol and one-line doc. Validation, the registry's
// summaries, the program's flags and help, Python keyword arguments, parameter files and the frontier's knobs all read
// these tables (method_config.hpp has the forms over MethodConfig), so adding an option to a method is one entry in its
// table and the rule that uses it. Host only: device code uses the Config members, never the tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace spattn {

enum class OptionKind : std::uint8_t { integer, real, flag, choice };

/// How many values a per-query-head option (a std::vector member) may hold; scalars ignore it.
enum class Heads : std::uint8_t {
  one_or_each,       ///< one value (all heads) or one per query head
  none_one_or_each,  ///< also none (off)
  none_or_each,      ///< none, or one per query head
};

/// The Config member an option sets, with type-erased accessors (a table is only ever used on its own Config).
/// Numbers travel as double: every integer member's range fits in 2^53, every real member is fp32.
struct Field {
  std::string_view member;  ///< the C++ member's name (range messages say "<method> <member>")
  OptionKind kind = OptionKind::real;
  bool per_head = false;  ///< a std::vector: one value for every head, or one per head
  int bits = 0;           ///< integer members: the width of the type (64 for int64)
  std::size_t (*count)(const void* config) = nullptr;
  double (*get)(const void* config, std::size_t i) = nullptr;
  std::int64_t (*get_integer)(const void* config, std::size_t i) = nullptr;  ///< integers: exact (int64 beyond 2^53)
  void (*set)(void* config, double value) = nullptr;  ///< a per-head member gets one value for every head
};

namespace detail {
template <class T>
struct VectorElement {
  using type = void;
};
template <class T, class A>
struct VectorElement<std::vector<T, A>> {
  using type = T;
};
template <class M>
struct MemberOf;
template <class C, class T>
struct MemberOf<T C::*> {
  using Class = C;
  using Type = T;
};
template <class T>
constexpr OptionKind kind_of() {
  if constexpr (std::is_same_v<T, bool>) return OptionKind::flag;
  else if constexpr (std::is_enum_v<T>) return OptionKind::choice;
  else if constexpr (std::is_floating_point_v<T>) return OptionKind::real;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return OptionKind::flag;  // per-head flags
  else return OptionKind::integer;
}
template <class T>
constexpr double to_double(T x) {
  if constexpr (std::is_enum_v<T>) return static_cast<double>(static_cast<std::underlying_type_t<T>>(x));
  else return static_cast<double>(x);
}
template <class T>
constexpr T from_double(double x) {
  if constexpr (std::is_enum_v<T>) return static_cast<T>(static_cast<std::underlying_type_t<T>>(x));
  else if constexpr (std::is_same_v<T, bool>) return x != 0.0;
  else return static_cast<T>(x);
}
}  // namespace detail

/// The Field of member M (&Config::member); SPATTN_FIELD(Config, member) also writes its name.
template <auto M>
constexpr Field field(std::string_view member) {
  using C = typename detail::MemberOf<decltype(M)>::Class;
  using T = typename detail::MemberOf<decltype(M)>::Type;
  using E = typename detail::VectorElement<T>::type;
  constexpr bool vec = !std::is_void_v<E>;
  using V = std::conditional_t<vec, E, T>;
  Field f;
  f.member = member;
  f.kind = detail::kind_of<V>();
  f.per_head = vec;
  f.bits = static_cast<int>(sizeof(V) * 8);
  f.count = []([[maybe_unused]] const void* c) -> std::size_t {
    if constexpr (vec) return (static_cast<const C*>(c)->*M).size();
    else return 1;
  };
  f.get = [](const void* c, [[maybe_unused]] std::size_t i) -> double {
    if constexpr (vec) return detail::to_double((static_cast<const C*>(c)->*M)[i]);
    else return detail::to_double(static_cast<const C*>(c)->*M);
  };
  f.get_integer = []([[maybe_unused]] const void* c, [[maybe_unused]] std::size_t i) -> std::int64_t {
    if constexpr (!std::is_integral_v<V>) return 0;
    else if constexpr (vec) return static_cast<std::int64_t>((static_cast<const C*>(c)->*M)[i]);
    else return static_cast<std::int64_t>(static_cast<const C*>(c)->*M);
  };
  f.set = [](void* c, double x) {
    if constexpr (vec) static_cast<C*>(c)->*M = T{detail::from_double<V>(x)};
    else static_cast<C*>(c)->*M = detail::from_double<V>(x);
  };
  return f;
}
#define SPATTN_FIELD(Config, member) ::spattn::field<&Config::member>(#member)

/// One option of a method. Fields after `doc` are optional in a table entry (designated initializers, in this order).
struct Option {
  std::string_view name;    ///< the public name: Python keyword, parameter-file key, program flag --name-with-dashes
  Field field;              ///< the Config member it sets
  std::string_view symbol;  ///< the paper's symbol ("" when it has none)
  bool symbol_in_messages = false;  ///< range messages say "<method> <member> (<symbol>)" (FG-Attn's M and N)
  std::string_view doc;     ///< one line: what it does
  double lo = 0.0, hi = 0.0;  ///< the range (integers and reals; validate() checks every value)
  bool open_lo = false, open_hi = false;
  std::string_view note = {};        ///< what special values mean, in range messages: " (0 = off)"
  std::optional<double> also = {};   ///< one value outside the range that is also allowed (anchor θ = −inf)
  std::int64_t multiple_of = 1;      ///< integers: the value must be a multiple of this
  Heads heads = Heads::one_or_each;  ///< per-head members: how many values
  std::string_view choices = {};     ///< choice: the names of the enum's values 0, 1, …, separated by '|'
  std::string_view aliases = {};     ///< older public names still accepted (compatibility only), separated by '|'
  std::span<const double> sweep = {};  ///< the method's main knob: the settings `spattn frontier` sweeps
  bool by_name = true;  ///< settable by name (program, Python, files); false: set by the library (calibrate, params)
};

/// A public name that a method refuses with a reason (it sets that itself), e.g. AnchorAttention's tile_q.
struct Refusal {
  std::string_view names;  ///< separated by '|'
  std::string_view reason;
};

/// Every option of one method, and what ties them together.
struct OptionTable {
  std::string_view method;   ///< "sparge": the registry's name, the prefix of range messages
  std::string_view summary;  ///< one line; the registry appends the defaults from the options
  std::span<const Option> options;
  std::span<const Refusal> refusals = {};
  /// Rules between options given by name (SpargeAttn: τ given without ρ selects TopCdf); nullptr: none.
  void (*settle)(void* config, std::span<const std::string_view> given) = nullptr;
};

// ---- generic forms (core/src/options.cpp) ----

/// The option called `name` (its public name or an alias) among those settable by name; nullptr if none.
const Option* find_option(const OptionTable& table, std::string_view name);
/// The option whose public name is `name`, settable by name or not (parameter files); throws spattn::Error if none.
const Option& table_option(const OptionTable& table, std::string_view name);
/// The refusal reason of `name`, or "" when the method does not refuse it.
std::string_view refusal(const OptionTable& table, std::string_view name);
/// Whether `name` is one of the '|'-separated names of `list`.
bool listed(std::string_view list, std::string_view name);
/// The names in a '|'-separated list.
std::vector<std::string_view> split_names(std::string_view list);

/// Checks every option of `config` against its range (and per-head counts against heads_q; heads_q < 0: unknown):
/// throws spattn::Error "<method> <member>: must be in [lo, hi]<note>, got x".
void validate_options(const OptionTable& table, const void* config, std::int64_t heads_q);

/// Checks that `value` is a number `option` can hold, given as `given` (named in messages): an integer option needs an
/// integer that its member's type holds, a real one a number within fp32's range (inf allowed), a flag 0 or 1, a
/// choice the index of one. Ranges are validate()'s.
void check_option_value(const Option& option, double value, std::string_view given);
/// Sets `option` to a number (flags 0/1, choices their index) after check_option_value.
void set_option(const Option& option, void* config, double value, std::string_view given);
/// The number that `text` means for `option`: integers and reals as written (inf, nan too), flags true/false/1/0,
/// choices by name. Throws spattn::Error naming `given` and the text.
double parse_option(const Option& option, std::string_view text, std::string_view given);

/// The option's value in `config` as text: "0.9", "xor", "true", "-0.1" (per-head: the first value, or "none").
std::string option_value_text(const Option& option, const void* config);
/// "p = 0.9": the symbol (or the name) and its value in `config`.
std::string option_setting_text(const Option& option, const void* config);
/// The summary and the defaults: "FG-Attn: … (M = 32, N = 32, p = 0.9, …)".
std::string summary_with_defaults(const OptionTable& table, const void* defaults);
/// The option that `spattn frontier` sweeps (the one with a sweep), or nullptr.
const Option* main_knob(const OptionTable& table);

}  // namespace spattn
