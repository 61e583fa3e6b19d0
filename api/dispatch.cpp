// The dispatch layer: spattn::attend() and spattn::estimate() validate a call and hand it to the first backend
// that covers it; sparse_attention() is estimate + attend with the method's executor options. This file is the
// one place that knows which backends a build links (Kokkos Kernels' TPL pattern): each enabled backend folder
// adds itself to the list below, the reference last because it covers everything.
#include <optional>
#include <sstream>

#include "spattn/input_range.hpp"
#include "spattn/reference/executor.hpp"
#if defined(SPATTN_HAVE_CUDA)
#include "spattn/cuda/backend.hpp"
#endif
#if defined(SPATTN_HAVE_KOKKOS)
#include "spattn/kokkos/backend.hpp"
#endif
#include "spattn/spattn.hpp"

namespace spattn {

const std::vector<std::unique_ptr<Backend>>& backends() {
  static const std::vector<std::unique_ptr<Backend>> list = [] {
    std::vector<std::unique_ptr<Backend>> l;
#if defined(SPATTN_HAVE_CUDA)
    l.push_back(std::make_unique<cuda::CudaBackend>());
#endif
#if defined(SPATTN_HAVE_KOKKOS)
    l.push_back(std::make_unique<kokkos::KokkosBackend>());
#endif
    l.push_back(std::make_unique<reference::ReferenceBackend>());
    return l;
  }();
  return list;
}

namespace {

/// The first backend (or the one named) whose `reasons(backend)` is empty, or an Error listing every reason.
template <class Reasons>
const Backend& pick(const std::string& wanted, const std::string& what, Reasons reasons) {
  std::ostringstream why;
  for (const auto& backend : backends()) {
    if (wanted != "auto" && wanted != backend->name()) continue;
    const std::vector<std::string> r = reasons(*backend);
    if (r.empty()) return *backend;
    why << " " << backend->name() << ":";
    for (const auto& x : r) why << " " << x << ";";
  }
  if (why.tellp() == 0) {
    std::ostringstream names;
    for (const auto& backend : backends()) names << " " << backend->name();
    fail("backend: '", wanted, "' is not linked into this build (available: auto", names.str(), ")");
  }
  fail("backend: no backend covers ", what, " —", why.str());
}

/// The input range rule (spattn/input_range.hpp) on every call. Host tensors are scanned here before a backend is
/// chosen; tensors in device memory by the backend chosen to run the call (Backend::input_range: the CUDA backend
/// scans on the GPU and synchronises), after the choice, so that a call no backend covers says so first. A device
/// tensor the chosen backend cannot summarise is not checked.
bool on_host(const TensorView& q, const TensorView& k, const TensorView* v) {
  return q.memory == Memory::host && k.memory == Memory::host && (v == nullptr || v->memory == Memory::host);
}

void check_host_inputs(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView* v) {
  if (on_host(q, k, v)) check_input_range(problem, q, k, v);  // stops at the first failure without reading the rest
}

void check_device_inputs(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView* v,
                         const Backend& backend) {
  if (on_host(q, k, v)) return;
  const auto range_of = [&](const TensorView& t, bool is_q, std::int64_t heads, std::int64_t dim) {
    return t.memory == Memory::host ? std::optional<TensorRange>(scan_range(problem, t, is_q, heads, dim))
                                    : backend.input_range(problem, t, is_q, heads, dim);
  };
  const std::optional<TensorRange> rq = range_of(q, true, problem.heads_q, problem.head_dim);
  const std::optional<TensorRange> rk = range_of(k, false, problem.heads_kv, problem.head_dim);
  if (!rq || !rk) return;
  std::optional<TensorRange> rv;
  if (v != nullptr && !(rv = range_of(*v, false, problem.heads_kv, problem.dim_v()))) return;
  check_input_range(problem, *rq, *rk, rv ? &*rv : nullptr);
}

}  // namespace

AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                   const TileMask& mask, const TensorView& o, const AttendOptions& options) {
  problem.validate(q, k, v, o);
  mask.validate_for(problem);
  options.validate(problem.heads_q);
  check_host_inputs(problem, q, k, &v);
  const Backend& backend = pick(options.backend, problem.describe(), [&](const Backend& be) {
    return be.not_supported_reasons(problem, q, k, v, mask, o, options);
  });
  check_device_inputs(problem, q, k, &v, backend);
  return backend.attend(problem, q, k, v, mask, o, options);
}

AttendStats attend_dense(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                         const TensorView& o, const AttendOptions& options) {
  problem.validate();
  return attend(problem, q, k, v, TileMask::dense(MaskShape::of(problem, 128, 128)), o, options);
}

Estimate estimate(const MethodConfig& config, const Problem& problem, const TensorView& q, const TensorView& k,
                  const EstimateOptions& options) {
  problem.validate(q, k);
  validate(config, problem);
  check_host_inputs(problem, q, k, nullptr);
  const std::string what = std::string(method_name(config)) + " estimate for " + problem.describe();
  const Backend& backend = pick(options.backend, what, [&](const Backend& be) {
    return be.estimate_not_supported_reasons(config, problem, q, k, options);
  });
  check_device_inputs(problem, q, k, nullptr, backend);
  Estimate e = backend.estimate(config, problem, q, k, options);
  e.mask.validate_for(problem);
  return e;
}

SparseAttentionResult sparse_attention(const MethodConfig& config, const Problem& problem, const TensorView& q,
                                       const TensorView& k, const TensorView& v, const TensorView& o,
                                       const AttendOptions& options) {
  problem.validate(q, k, v, o);
  validate(config, problem);
  require(options.resume == nullptr,
          "sparse_attention: AttendOptions::resume is attend()'s option (a pipeline resumes from its own estimator)");
  const AttendOptions with_method = attend_options_of(config, options);
  with_method.validate(problem.heads_q);
  check_host_inputs(problem, q, k, &v);
  // A backend that keeps the mask in its own memory between the stages runs both; otherwise the two calls (each
  // checks its inputs).
  for (const auto& be : backends()) {
    if (options.backend != "auto" && options.backend != be->name()) continue;
    if (!be->sparse_attention_not_supported_reasons(config, problem, q, k, v, o, with_method).empty()) continue;
    check_device_inputs(problem, q, k, &v, *be);
    SparseAttentionResult r = be->sparse_attention(config, problem, q, k, v, o, with_method);
    r.estimate.mask.validate_for(problem);
    return r;
  }
  EstimateOptions eo;
  eo.backend = options.backend;
  SparseAttentionResult r;
  r.estimate = estimate(config, problem, q, k, eo);
  r.attend = attend(problem, q, k, v, r.estimate.mask, o, with_method);
  return r;
}

}  // namespace spattn
