// The parts of the module _spattn beside its entry points (module.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace spattn::python {

/// spattn.TileMask: builders, properties, statistics, conversions, exports and files.
void bind_tile_mask(pybind11::module_& m);
/// spattn._spattn.Plan (spattn::cuda::Plan) where the library has the CUDA backend; sets has_cuda
/// either way.
void bind_plan(pybind11::module_& m);
/// spattn._spattn.check_attention (spattn/check.hpp), for spattn.testing.
void bind_check(pybind11::module_& m);

}  // namespace spattn::python
