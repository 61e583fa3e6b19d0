// The program's method flags, generated from the methods' option tables (spattn/options.hpp): one flag per public
// name or alias of any method's option (--top-p, --sim-threshold, …), its help the docs and defaults of the methods
// that take it, plus --tile MxN and --params. run and frontier share them: a flag that the chosen method does not take
// is ignored, one that it refuses (AnchorAttention's tiles) is an error.
#pragma once

#include <CLI/CLI.hpp>

#include <deque>
#include <string>
#include <vector>

#include "spattn/method_config.hpp"

namespace spattn::cli {

struct MethodFlags {
  struct Flag {
    std::string name;  ///< the option's public name (or alias), as the tables spell it
    bool is_flag = false;
    std::string text;  ///< the value as typed
    bool on = false;   ///< is_flag
    CLI::Option* option = nullptr;
  };
  std::deque<Flag> flags;  ///< stable addresses: CLI11 writes into them
  std::string tile;        ///< --tile MxN: tile_q and tile_k
  std::string params;      ///< --params FILE
};

/// Adds every method's flags to `sub`, writing into `flags`.
void add_method_flags(CLI::App* sub, MethodFlags& flags);

/// The options given on the command line, by name, for method `method` (--tile as tile_q and tile_k): throws
/// spattn::Error on a malformed --tile or a flag the method refuses.
std::vector<NamedValue> given_options(const MethodFlags& flags, const std::string& method);

}  // namespace spattn::cli
