// The methods the program can run: name -> estimator producing a TileMask. Each method issue adds a row.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "spattn/mask.hpp"
#include "spattn/problem.hpp"

namespace spattn::cli {

struct MethodInputs {
  const Problem& problem;
  const TensorView& q;
  const TensorView& k;
  std::int32_t tile_q, tile_k;
};

struct Method {
  std::string name;
  std::string summary;
  std::function<TileMask(const MethodInputs&)> estimate;
};

const std::vector<Method>& methods();
/// The method called `name`; throws spattn::Error listing the known ones.
const Method& find_method(const std::string& name);

}  // namespace spattn::cli
