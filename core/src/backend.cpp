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

std::vector<std::string> Backend::sparse_attention_not_supported_reasons(const MethodConfig&, const Problem&,
                                                                        const TensorView&, const TensorView&,
                                                                        const TensorView&, const TensorView&,
                                                                        const AttendOptions&) const {
  return {"this backend runs estimate and attend as separate calls"};
}

SparseAttentionResult Backend::sparse_attention(const MethodConfig& config, const Problem&, const TensorView&,
                                                const TensorView&, const TensorView&, const TensorView&,
                                                const AttendOptions&) const {
  fail("backend '", name(), "': no estimate → attend pipeline for ", method_name(config));
}

std::shared_ptr<void> Backend::allocate(Memory, std::size_t) const { return nullptr; }

bool Backend::download(Memory, void*, const void*, std::size_t) const { return false; }

bool Backend::upload(Memory, void*, const void*, std::size_t) const { return false; }

}  // namespace spattn
