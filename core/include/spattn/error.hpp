// spattn::Error: the one exception type of the library. Messages name the argument and its bad value.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace spattn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws spattn::Error with the streamed concatenation of the arguments.
template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  throw Error(out.str());
}

/// Throws spattn::Error unless `condition` holds.
template <class... Parts>
void require(bool condition, Parts&&... parts) {
  if (!condition) fail(std::forward<Parts>(parts)...);
}

/// The values a parameter may take: lo..hi, each end closed (included) or open. NaN lies in no interval.
template <class T>
struct Interval {
  T lo, hi;
  bool open_lo = false, open_hi = false;
  bool contains(T x) const { return (open_lo ? x > lo : x >= lo) && (open_hi ? x < hi : x <= hi); }
};

/// The one wording of every range check in the library: "<name>: must be in [lo, hi]<note>, got x" ("(" or ")"
/// for an open end); `note` says what special values mean, e.g. " (0 = off)".
template <class T, class... Note>
void require_in(std::string_view name, std::type_identity_t<T> x, const Interval<T>& range, Note&&... note) {
  // Unary + prints 8-bit integers as numbers.
  if (!range.contains(x))
    fail(name, ": must be in ", range.open_lo ? "(" : "[", +range.lo, ", ", +range.hi, range.open_hi ? ")" : "]",
         std::forward<Note>(note)..., ", got ", +x);
}

}  // namespace spattn
