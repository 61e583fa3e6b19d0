#include "methods.hpp"

#include <sstream>

#include "spattn/error.hpp"

namespace spattn::cli {

const std::vector<Method>& methods() {
  static const std::vector<Method> list = {
      {"dense", "every tile kept: exact dense attention (the baseline)",
       [](const MethodInputs& in) { return TileMask::dense(MaskShape::of(in.problem, in.tile_q, in.tile_k)); }},
  };
  return list;
}

const Method& find_method(const std::string& name) {
  std::ostringstream known;
  for (const Method& m : methods()) {
    if (m.name == name) return m;
    known << (known.tellp() > 0 ? ", " : "") << m.name;
  }
  fail("--method: unknown method '", name, "' (implemented: ", known.str(), ")");
}

}  // namespace spattn::cli
