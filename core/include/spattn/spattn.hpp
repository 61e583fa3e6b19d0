// spattn public entry points. Link spattn::spattn.
//
//   spattn::Problem p{...};                       // shapes, causal, dtype, scale
//   auto mask = spattn::TileMask::dense(spattn::MaskShape::of(p, 128, 128));   // or a method's estimate
//   spattn::attend(p, q, k, v, mask, o);          // exact attention over the kept tiles
//
// attend() validates everything (spattn::Error names the bad argument), then runs the first backend that
// covers the call — or the one named in options.backend, failing with its reasons if it cannot.
#pragma once

#include <memory>
#include <vector>

#include "spattn/backend.hpp"
#include "spattn/error.hpp"
#include "spattn/mask.hpp"
#include "spattn/problem.hpp"

namespace spattn {

/// Tile-sparse attention: O = softmax(scale · Q Kᵀ restricted to the mask and the causal rule) V.
AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                   const TileMask& mask, const TensorView& o, const AttendOptions& options = {});

/// Dense attention (every tile kept), the baseline every sparse result is compared with.
AttendStats attend_dense(const Problem& problem, const TensorView& q, const TensorView& k,
                         const TensorView& v, const TensorView& o, const AttendOptions& options = {});

/// The backends linked into this build, in the order "auto" tries them.
const std::vector<std::unique_ptr<Backend>>& backends();

}  // namespace spattn
