// Python keyword arguments -> MethodConfig, through the program's own mapping (tools/methods.cpp:
// the registry's default, a params file, then the options), so Python and the command line
// configure a method one way.
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
