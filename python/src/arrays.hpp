// The arrays of one call: how they are read (layout, DLPack stream) and the Problem their shapes
// describe. TensorView carries no extents, so the agreement of the arrays' shapes is checked here;
// everything else by Problem::validate.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>

#include "dlpack_tensor.hpp"
#include "spattn/problem.hpp"

namespace spattn::python {

struct Call {
  std::string layout = "bhnd";
  std::int64_t stream =
      1;  ///< DLPack stream of CUDA arrays (1: the legacy default stream the public API runs on)
};

DlpackTensor import_array(pybind11::handle object, const char* name, const Call& call);

/// Throws spattn::Error unless `t` (argument `name`) is on q's device.
void require_same_device(const DlpackTensor& t, const char* name, const DlpackTensor& q);

/// The problem of q [B, Hq, Nq, D], k [B, Hkv, Nkv, D] and (when given) v [B, Hkv, Nkv, Dv].
Problem problem_of(const DlpackTensor& q, const DlpackTensor& k, const DlpackTensor* v, bool causal,
                   std::optional<float> scale);

/// Throws spattn::Error unless out is [B, Hq, Nq, Dv] of the problem, on q's device.
void check_out(const DlpackTensor& o, const DlpackTensor& q, const Problem& p);

}  // namespace spattn::python
