// A loop over the estimator table's cases of one method, each case's name captured for the checks inside.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <variant>

#include "conformance.hpp"

namespace spattn::conformance {

/// Calls f(c, config) for every case c of estimator_cases() whose config is a Config; returns how many.
template <class Config, class F>
int for_each_case(F&& f) {
  int ran = 0;
  for (const EstimatorCase& c : estimator_cases()) {
    const Config* config = std::get_if<Config>(&c.config);
    if (config == nullptr) continue;
    const std::string case_name(c.name);
    CAPTURE(case_name);
    f(c, *config);
    ++ran;
  }
  return ran;
}

}  // namespace spattn::conformance
