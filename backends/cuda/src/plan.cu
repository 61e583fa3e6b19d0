// Plan (spattn/cuda/plan.hpp): a method's estimator, its device mask and the executor for one problem shape,
// allocated once; and the CUDA backend's estimate() / sparse_attention(), which run through one.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "estimator_interface.cuh"
#include "host_helpers.cuh"
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

}  // namespace

std::vector<std::string> estimator_not_supported_reasons(const MethodConfig& config, const Problem& problem) {
  if (const auto* c = std::get_if<sparge::Config>(&config)) return sparge_not_supported_reasons(*c, problem);
  if (const auto* c = std::get_if<fg_attn::Config>(&config)) return fg_attn_not_supported_reasons(*c, problem);
  if (const auto* c = std::get_if<bfla::Config>(&config)) return bfla_not_supported_reasons(*c, problem);
  if (const auto* c = std::get_if<anchor_attn::Config>(&config)) return anchor_attn_not_supported_reasons(*c, problem);
  if (const auto* c = std::get_if<sale::Config>(&config)) return sale_not_supported_reasons(*c, problem);
  return dense_not_supported_reasons(std::get<DenseConfig>(config), problem);
}

/// What a pipeline of `config` needs: its estimator, then the executor over the shape that estimator builds.
std::vector<std::string> pipeline_not_supported_reasons(const MethodConfig& config, const Problem& problem,
                                                        const AttendOptions& options) {
  std::vector<std::string> why = estimator_not_supported_reasons(config, problem);
  if (why.empty()) why = executor_not_supported_reasons(problem, estimated_mask_shape(config, problem), options);
  return why;
}

std::unique_ptr<DeviceEstimator> make_estimator(const MethodConfig& config, const Problem& problem,
                                                const std::int64_t* cu_q, const std::int64_t* cu_kv) {
  if (const auto* c = std::get_if<sparge::Config>(&config)) return make_sparge_estimator(*c, problem, cu_q, cu_kv);
  if (const auto* c = std::get_if<fg_attn::Config>(&config)) return make_fg_attn_estimator(*c, problem, cu_q, cu_kv);
  if (const auto* c = std::get_if<bfla::Config>(&config)) return make_bfla_estimator(*c, problem, cu_q, cu_kv);
  if (const auto* c = std::get_if<anchor_attn::Config>(&config)) return make_anchor_attn_estimator(*c, problem, cu_q, cu_kv);
  if (const auto* c = std::get_if<sale::Config>(&config)) return make_sale_estimator(*c, problem, cu_q, cu_kv);
  return make_dense_estimator(std::get<DenseConfig>(config), problem, cu_q, cu_kv);
}

struct Plan::Impl {
  Problem problem;
  std::unique_ptr<ExecutorState> executor;
  std::unique_ptr<DeviceEstimator> estimator;
  std::unique_ptr<DeviceTileMask> mask;
  bool resumed = false;  ///< the last estimate was estimate(q, k, v, o) of a resuming estimator
  bool qk_int8 = false;  ///< AttendOptions::qk_int8: every kept tile is computed from the codes, none resumed
};

std::vector<std::string> Plan::not_supported_reasons(const MethodConfig& config, const Problem& problem) {
  return pipeline_not_supported_reasons(config, problem, attend_options_of(config));
}

Plan::Plan(const MethodConfig& config, const Problem& problem, const AttendOptions& options)
    : impl_(std::make_unique<Impl>()) {
  build(config, problem, options);
}

Plan::Plan(const MethodConfig& config, const Problem& problem, const AttendOptions& options, Workspace workspace)
    : impl_(std::make_unique<Impl>()) {
  if (workspace.data == nullptr) fail("cuda plan: the workspace is null (a Workspace needs device memory)");
  if (reinterpret_cast<std::uintptr_t>(workspace.data) % detail::Arena::kAlign != 0)
    fail("cuda plan: the workspace must be ", detail::Arena::kAlign, "-byte aligned");
  detail::Arena arena(workspace.data, workspace.bytes);
  const detail::ArenaScope scope(arena);
  build(config, problem, options);
}

std::size_t Plan::required_bytes(const MethodConfig& config, const Problem& problem, const AttendOptions& options) {
  detail::Arena arena(nullptr, 0);
  {
    const detail::ArenaScope scope(arena);
    Plan measured(config, problem, options);
  }
  return arena.used();
}

void Plan::build(const MethodConfig& config, const Problem& problem, const AttendOptions& options) {
  problem.validate();
  validate(config, problem);
  Impl& m = *impl_;
  m.problem = problem;
  m.qk_int8 = options.qk_int8;
  const AttendOptions with_method = attend_options_of(config, options);
  if (options.resume != nullptr)
    fail("cuda plan: AttendOptions::resume is attend()'s option; a plan resumes from its own estimator's pass");
  const std::vector<std::string> why = pipeline_not_supported_reasons(config, problem, with_method);
  if (!why.empty()) fail("cuda plan: ", method_name(config), " for ", problem.describe(), " is not supported —", joined(why));
  m.executor = std::make_unique<ExecutorState>(problem, with_method);
  m.estimator = make_estimator(config, problem, m.executor->cu_q(), m.executor->cu_kv());
  m.mask = std::make_unique<DeviceTileMask>(m.estimator->shape());
}

Plan::~Plan() = default;

void Plan::estimate(const TensorView& q, const TensorView& k, CUstream_st* stream) {
  impl_->problem.validate(q, k);
  for (const TensorView* t : {&q, &k}) {
    if (t->memory != Memory::cuda) fail("cuda plan: q and k must be in CUDA memory");
    if (!rows_aligned(*t)) fail("cuda plan: q and k need 16-byte aligned rows (pointer and strides multiples of 8 elements)");
  }
  impl_->estimator->run(q, k, *impl_->mask, stream);
  impl_->resumed = false;
}

void Plan::estimate(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                    CUstream_st* stream) {
  Impl& m = *impl_;
  // The int8 mode computes every kept tile from the codes: the estimator's exact pass cannot be part of its answer.
  if (m.estimator->covered() == nullptr || m.qk_int8) return estimate(q, k, stream);
  m.problem.validate(q, k, v, o);
  const std::vector<std::string> why = tensor_not_supported_reasons(q, k, v, o);
  if (!why.empty()) fail("cuda plan: estimate:", joined(why));
  m.estimator->run_resumed(q, k, v, o, *m.mask, stream);
  m.resumed = true;
}

void Plan::attend(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                  CUstream_st* stream) {
  Impl& m = *impl_;
  m.problem.validate(q, k, v, o);
  const std::vector<std::string> why = tensor_not_supported_reasons(q, k, v, o);
  if (!why.empty()) fail("cuda plan: attend:", joined(why));
  m.executor->enqueue(q, k, v, *m.mask, o, stream, m.resumed ? m.estimator->resume_states() : nullptr);
}

void Plan::run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o, CUstream_st* stream) {
  estimate(q, k, v, o, stream);
  attend(q, k, v, o, stream);
}

const DeviceTileMask& Plan::mask() const { return *impl_->mask; }

TileMask Plan::selection(CUstream_st* stream, const TileMask* downloaded) const {
  const Impl& m = *impl_;
  TileMask rest = downloaded != nullptr ? *downloaded : m.mask->download(stream);
  if (!m.resumed) return rest;
  // Per row: the covered keys (disjoint from the rest: the estimator selects outside them) merged in, ascending.
  const TileMask& covered = *m.estimator->covered();
  const MaskShape& s = rest.shape;
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(s.num_rows()));
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.mask_heads; ++h)
      for (std::int64_t t = 0; t < s.num_q_tiles(); ++t) {
        const auto a = rest.row(b, h, t), c = covered.row(b, covered.mask_head_of(h, m.problem.heads_q), t);
        auto& row = rows[static_cast<std::size_t>((b * s.mask_heads + h) * s.num_q_tiles() + t)];
        row.resize(a.size() + c.size());
        std::merge(a.begin(), a.end(), c.begin(), c.end(), row.begin());
      }
  return TileMask::from_rows(s, std::move(rows));
}

std::size_t Plan::workspace_bytes() const {
  return impl_->estimator->workspace_bytes() + impl_->mask->bytes() + impl_->executor->bytes();
}

AttendStats Plan::stats(CUstream_st* stream, const TileMask* downloaded) const {
  if (downloaded != nullptr) return impl_->executor->stats(*downloaded, stream);
  return impl_->executor->stats(selection(stream), stream);
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
  std::vector<std::string> why = pipeline_not_supported_reasons(config, problem, options);
  for (std::string& s : tensor_not_supported_reasons(q, k, v, o)) why.push_back(std::move(s));
  return why;
}

SparseAttentionResult CudaBackend::sparse_attention(const MethodConfig& config, const Problem& problem,
                                                    const TensorView& q, const TensorView& k, const TensorView& v,
                                                    const TensorView& o, const AttendOptions& options) const {
  Plan plan(config, problem, options);
  plan.run(q, k, v, o, nullptr);
  SparseAttentionResult r;
  r.estimate.method = std::string(method_name(config));
  r.estimate.backend = "cuda";
  r.estimate.mask = plan.selection(nullptr);
  r.attend = plan.stats(nullptr, &r.estimate.mask);
  return r;
}

}  // namespace spattn::cuda
