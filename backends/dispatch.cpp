// The dispatch layer: spattn::attend() validates a call and hands it to a backend. This file is the one
// place that knows which backends a build links (Kokkos Kernels' TPL pattern): each enabled backend
// folder adds itself to the list below, the reference last because it covers everything.
#include <sstream>

#include "spattn/reference/executor.hpp"
#if defined(SPATTN_HAVE_CUDA)
#include "spattn/cuda/backend.hpp"
#endif
#include "spattn/spattn.hpp"

namespace spattn {

const std::vector<std::unique_ptr<Backend>>& backends() {
  static const std::vector<std::unique_ptr<Backend>> list = [] {
    std::vector<std::unique_ptr<Backend>> l;
#if defined(SPATTN_HAVE_CUDA)
    l.push_back(std::make_unique<cuda::CudaBackend>());
#endif
    l.push_back(std::make_unique<reference::ReferenceBackend>());
    return l;
  }();
  return list;
}

AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                   const TileMask& mask, const TensorView& o, const AttendOptions& options) {
  problem.validate(q, k, v, o);
  mask.validate_for(problem);
  require(!(options.pv_threshold < 0.0f) && options.pv_threshold == options.pv_threshold,
          "pv_threshold: must be > 0 (+inf = off), got ", options.pv_threshold);
  require(options.pv_threshold_per_head.empty() ||
              static_cast<std::int64_t>(options.pv_threshold_per_head.size()) == problem.heads_q,
          "pv_threshold_per_head: give one threshold per query head (", problem.heads_q, "), got ",
          options.pv_threshold_per_head.size());
  for (float t : options.pv_threshold_per_head)
    require(t == t && !(t < 0.0f), "pv_threshold_per_head: thresholds must be > 0 (+inf = off), got ", t);
  require(options.pv_vote_rows >= 0 && options.pv_vote_rows <= 128, "pv_vote_rows: must be in [0, 128], got ",
          options.pv_vote_rows);
  require(options.pv_exempt_last >= 0, "pv_exempt_last: must be >= 0, got ", options.pv_exempt_last);
  require(options.quant_block_q >= 1 && options.quant_block_k >= 1, "quant_block_q/k: must be >= 1, got ",
          options.quant_block_q, " and ", options.quant_block_k);
  std::ostringstream why;
  for (const auto& backend : backends()) {
    if (options.backend != "auto" && options.backend != backend->name()) continue;
    const auto reasons = backend->not_supported_reasons(problem, q, k, v, mask, o, options);
    if (reasons.empty()) return backend->attend(problem, q, k, v, mask, o, options);
    why << " " << backend->name() << ":";
    for (const auto& r : reasons) why << " " << r << ";";
  }
  if (why.tellp() == 0) {
    std::ostringstream names;
    for (const auto& backend : backends()) names << " " << backend->name();
    fail("backend: '", options.backend, "' is not linked into this build (available: auto", names.str(), ")");
  }
  fail("backend: no backend covers ", problem.describe(), " —", why.str());
}

AttendStats attend_dense(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                         const TensorView& o, const AttendOptions& options) {
  problem.validate();
  return attend(problem, q, k, v, TileMask::dense(MaskShape::of(problem, 128, 128)), o, options);
}

}  // namespace spattn
