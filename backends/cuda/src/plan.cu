// Plan (spattn/cuda/plan.hpp): a method's estimator, its device mask and the executor for one problem shape,
// allocated once; and the CUDA backend's estimate() / sparse_attention(), which run through one.
#include <cuda_runtime.h>

#include <cmath>
#include <sstream>

#include "device_memory.cuh"
#include "estimators.cuh"
#include "spattn/cuda/plan.hpp"
#include "spattn/error.hpp"

namespace spattn::cuda {
namespace {

using detail::check;
using detail::DeviceArray;

std::string joined(const std::vector<std::string>& why) {
  std::ostringstream s;
  for (const auto& w : why) s << " " << w << ";";
  return s.str();
}

/// The estimators read rows in 16-byte pieces.
bool rows_aligned(const TensorView& t) {
  return reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0 && t.stride_n % 8 == 0 && t.stride_h % 8 == 0 &&
         t.stride_b % 8 == 0;
}

bool pv_skip_requested(const AttendOptions& options) {
  bool pv = options.pv_threshold < INFINITY;
  for (float t : options.pv_threshold_per_head) pv = pv || t < INFINITY;
  return pv;
}

}  // namespace

std::vector<std::string> estimator_not_supported_reasons(const MethodConfig& config, const Problem& problem) {
  if (const auto* c = std::get_if<sparge::Config>(&config)) return sparge_not_supported_reasons(*c, problem);
  return {"the CUDA backend has no " + std::string(method_name(config)) + " estimator yet (SpargeAttn only)"};
}

/// The shape of the mask the device estimator of `config` builds (covered methods only).
MaskShape estimated_shape(const MethodConfig& config, const Problem& problem) {
  const auto& c = std::get<sparge::Config>(config);
  return MaskShape::of(problem, c.block_q, c.block_k);
}

std::unique_ptr<DeviceEstimator> make_estimator(const MethodConfig& config, const Problem& problem,
                                                const std::int64_t* cu_q, const std::int64_t* cu_kv) {
  if (const auto* c = std::get_if<sparge::Config>(&config)) return make_sparge_estimator(*c, problem, cu_q, cu_kv);
  fail("cuda plan: no estimator for ", method_name(config));
}

struct Plan::Impl {
  Problem problem;
  AttendOptions options;
  DeviceArray<std::int64_t> cu_q, cu_kv;
  std::unique_ptr<DeviceEstimator> estimator;
  std::unique_ptr<DeviceTileMask> mask;
  DeviceArray<float> thresholds;
  DeviceArray<int> empty_rows;
  DeviceArray<unsigned long long> skipped;
  DevicePvSkip pv;
  bool pv_on = false;
};

std::vector<std::string> Plan::not_supported_reasons(const MethodConfig& config, const Problem& problem) {
  std::vector<std::string> why = estimator_not_supported_reasons(config, problem);
  if (why.empty()) why = executor_not_supported_reasons(problem, estimated_shape(config, problem), attend_options_of(config));
  return why;
}

Plan::Plan(const MethodConfig& config, const Problem& problem, const AttendOptions& options)
    : impl_(std::make_unique<Impl>()) {
  problem.validate();
  validate(config, problem);
  Impl& m = *impl_;
  m.problem = problem;
  m.options = attend_options_of(config, options);
  std::vector<std::string> why = estimator_not_supported_reasons(config, problem);
  if (why.empty()) why = executor_not_supported_reasons(problem, estimated_shape(config, problem), m.options);
  if (!why.empty()) fail("cuda plan: ", method_name(config), " for ", problem.describe(), " is not supported —", joined(why));
  m.cu_q.assign(problem.cu_seqlens_q);
  m.cu_kv.assign(problem.cu_seqlens_kv);
  m.estimator = make_estimator(config, problem, m.cu_q.ptr, m.cu_kv.ptr);
  m.mask = std::make_unique<DeviceTileMask>(m.estimator->shape());
  m.empty_rows.assign({0});
  m.skipped.assign({0});
  m.pv_on = pv_skip_requested(m.options);
  if (m.pv_on) {
    std::vector<float> t = m.options.pv_threshold_per_head;
    if (t.empty()) t.assign(static_cast<std::size_t>(problem.heads_q), m.options.pv_threshold);
    m.thresholds.assign(t);
    m.pv.thresholds = m.thresholds.ptr;
    m.pv.vote_rows = m.options.pv_vote_rows == 0 ? 128 : m.options.pv_vote_rows;
    m.pv.exempt_last = m.options.pv_exempt_last;
    m.pv.skipped = m.skipped.ptr;
  }
}

Plan::~Plan() = default;

void Plan::estimate(const TensorView& q, const TensorView& k, CUstream_st* stream) {
  impl_->problem.validate(q, k);
  for (const TensorView* t : {&q, &k}) {
    if (t->memory != Memory::cuda) fail("cuda plan: q and k must be in CUDA memory");
    if (!rows_aligned(*t)) fail("cuda plan: q and k need 16-byte aligned rows (pointer and strides multiples of 8 elements)");
  }
  impl_->estimator->run(q, k, *impl_->mask, stream);
}

void Plan::attend(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                  CUstream_st* stream) {
  Impl& m = *impl_;
  m.problem.validate(q, k, v, o);
  const std::vector<std::string> why = tensor_not_supported_reasons(q, k, v, o);
  if (!why.empty()) fail("cuda plan: attend:", joined(why));
  check(cudaMemsetAsync(m.empty_rows.ptr, 0, sizeof(int), stream), "cudaMemsetAsync");
  check(cudaMemsetAsync(m.skipped.ptr, 0, sizeof(unsigned long long), stream), "cudaMemsetAsync");
  attend_async(m.problem, q, k, v, *m.mask, o, m.options.lse, m.cu_q.ptr, m.cu_kv.ptr, m.empty_rows.ptr, stream,
               m.pv_on ? &m.pv : nullptr);
}

void Plan::run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o, CUstream_st* stream) {
  estimate(q, k, stream);
  attend(q, k, v, o, stream);
}

const DeviceTileMask& Plan::mask() const { return *impl_->mask; }

std::size_t Plan::workspace_bytes() const {
  return impl_->estimator->workspace_bytes() + impl_->mask->bytes() + sizeof(int) + sizeof(unsigned long long);
}

AttendStats Plan::stats(CUstream_st* stream) const {
  const Impl& m = *impl_;
  check(cudaStreamSynchronize(stream), "synchronize");
  int empty = 0;
  unsigned long long skipped = 0;
  check(cudaMemcpy(&empty, m.empty_rows.ptr, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(&skipped, m.skipped.ptr, sizeof(skipped), cudaMemcpyDeviceToHost), "cudaMemcpy");
  AttendStats s;
  s.backend = "cuda";
  s.empty_rows = empty;
  s.pv_skipped = static_cast<std::int64_t>(skipped);
  const TileMask mask = m.mask->download(stream);
  const Problem& p = m.problem;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t t = 0; t * mask.shape.tile_q < p.seqlen_q_of(b); ++t)
        s.visited_tiles += static_cast<std::int64_t>(mask.row(b, mask.mask_head_of(h, p.heads_q), t).size());
  return s;
}

// ---- CudaBackend's estimators and pipeline ----

std::vector<std::string> CudaBackend::estimate_not_supported_reasons(const MethodConfig& config, const Problem& problem,
                                                                     const TensorView& q, const TensorView& k,
                                                                     const EstimateOptions&) const {
  std::vector<std::string> why = estimator_not_supported_reasons(config, problem);
  if (q.memory != Memory::cuda || k.memory != Memory::cuda) why.push_back("tensors must be in CUDA memory");
  if (!rows_aligned(q) || !rows_aligned(k)) why.push_back("q/k need 16-byte aligned rows (pointer and strides multiples of 8 elements)");
  if (problem.dtype != DType::f16 && problem.dtype != DType::bf16) why.push_back("inputs must be f16 or bf16");
  return why;
}

Estimate CudaBackend::estimate(const MethodConfig& config, const Problem& problem, const TensorView& q,
                               const TensorView& k, const EstimateOptions&) const {
  const DeviceArray<std::int64_t> cu_q(problem.cu_seqlens_q), cu_kv(problem.cu_seqlens_kv);
  const std::unique_ptr<DeviceEstimator> est = make_estimator(config, problem, cu_q.ptr, cu_kv.ptr);
  DeviceTileMask mask(est->shape());
  est->run(q, k, mask, nullptr);
  Estimate e;
  e.method = std::string(method_name(config));
  e.backend = "cuda";
  e.mask = mask.download(nullptr);
  return e;
}

std::vector<std::string> CudaBackend::sparse_attention_not_supported_reasons(
    const MethodConfig& config, const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
    const TensorView& o, const AttendOptions& options) const {
  std::vector<std::string> why = estimator_not_supported_reasons(config, problem);
  if (!why.empty()) return why;
  why = executor_not_supported_reasons(problem, estimated_shape(config, problem), options);
  for (std::string& s : tensor_not_supported_reasons(q, k, v, o)) why.push_back(std::move(s));
  return why;
}

SparseAttentionResult CudaBackend::sparse_attention(const MethodConfig& config, const Problem& problem,
                                                    const TensorView& q, const TensorView& k, const TensorView& v,
                                                    const TensorView& o, const AttendOptions& options) const {
  Plan plan(config, problem, options);
  plan.run(q, k, v, o, nullptr);
  SparseAttentionResult r;
  r.attend = plan.stats(nullptr);
  r.estimate.method = std::string(method_name(config));
  r.estimate.backend = "cuda";
  r.estimate.mask = plan.mask().download(nullptr);
  return r;
}

}  // namespace spattn::cuda
