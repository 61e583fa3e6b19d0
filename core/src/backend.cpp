#include "spattn/backend.hpp"

#include "spattn/error.hpp"

namespace spattn {

std::vector<std::string> Backend::estimate_not_supported_reasons(const MethodConfig&, const Problem&, const TensorView&,
                                                                 const TensorView&, const EstimateOptions&) const {
  return {"this backend has no estimators"};
}

Estimate Backend::estimate(const MethodConfig& config, const Problem&, const TensorView&, const TensorView&,
                           const EstimateOptions&) const {
  fail("backend '", name(), "': no estimator for ", method_name(config));
}

}  // namespace spattn
