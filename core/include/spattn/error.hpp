// spattn::Error: the one exception type of the library. Messages name the argument and its bad value.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
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

}  // namespace spattn
