// Python keyword arguments -> MethodConfig through the method's option table (spattn/options.hpp) and the library's
// configure_method (spattn/params_file.hpp: the registry's default, a params file, then the options), the mapping the
// command line uses too: one name per option (the table's aliases also accepted), checked one way.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "spattn/method_config.hpp"

namespace spattn::python {

/// Throws spattn::Error on an unknown method, a keyword the method does not take (listing those it
/// takes), or a value of the wrong type; the values' ranges are checked by the library.
MethodConfig method_config_from_kwargs(const std::string& method, const pybind11::dict& config,
                                       std::int64_t heads_q);

}  // namespace spattn::python
