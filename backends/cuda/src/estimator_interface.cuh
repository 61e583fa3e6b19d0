// The host-side interface of the CUDA estimators (their kernels' building blocks: estimator_kernels.cuh), behind
// Plan (plan.cu) and CudaBackend::estimate: one object per method and problem shape
// that allocates its workspace once and then only enqueues kernels (graph-capturable); the executor's coverage and
// its per-problem device state (backend.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host_helpers.cuh"
#include "spattn/cuda/backend.hpp"
#include "spattn/method_config.hpp"

namespace spattn::cuda {

class DeviceEstimator {
 public:
  virtual ~DeviceEstimator() = default;
  /// The shape of the mask run() fills.
  virtual MaskShape shape() const = 0;
  /// Enqueues the estimate of q, k (device tensors of the planned problem) into `mask` (built with shape()).
  virtual void run(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) = 0;
  virtual std::size_t workspace_bytes() const = 0;

  /// The keys run_resumed() covers with its exact pass (host mask, per query head or per KV head, of shape()'s
  /// tiles); null for an estimator without one. Then run_resumed() is run().
  virtual const TileMask* covered() const { return nullptr; }
  /// Like run(), but the estimator's exact pass over the covered() keys is part of the answer: it also writes O and
  /// each row's state over them (resume_states()), and `mask` gets the rest of the selection only — the executor
  /// then resumes the rows from resume_states() (AttendOptions::resume). v, o: device tensors of the problem.
  virtual void run_resumed(const TensorView& q, const TensorView& k, const TensorView& /*v*/, const TensorView& /*o*/,
                           DeviceTileMask& mask, cudaStream_t stream) {
    run(q, k, mask, stream);
  }
  /// [B·Hq·Nq] row states the last run_resumed() wrote (null without covered()).
  virtual const SoftmaxState* resume_states() const { return nullptr; }
};

/// Why the CUDA estimators cannot take `config` for `problem` (empty: they can).
std::vector<std::string> estimator_not_supported_reasons(const MethodConfig& config, const Problem& problem);
/// cu_q / cu_kv: device copies of the problem's sequence offsets (null when not variable-length), kept by the caller.
std::unique_ptr<DeviceEstimator> make_estimator(const MethodConfig& config, const Problem& problem,
                                                const std::int64_t* cu_q, const std::int64_t* cu_kv);

/// What the executor cannot run for this problem and mask shape / these tensors (backend.cu; empty: it can).
std::vector<std::string> executor_not_supported_reasons(const Problem& problem, const MaskShape& shape,
                                                        const AttendOptions& options);
std::vector<std::string> tensor_not_supported_reasons(const TensorView& q, const TensorView& k, const TensorView& v,
                                                      const TensorView& o);
/// Rows the kernels read in 16-byte pieces: pointer 16-byte aligned, strides multiples of 8 elements.
bool rows_aligned(const TensorView& t);

/// The executor's device-side arguments besides tensors and mask, set up once per problem (backend.cu): sequence
/// offsets, the empty-row and PV-skip counters, the per-head PV-skip thresholds. enqueue() zeroes the counters and
/// launches attend_async on `stream` (no allocation, no synchronisation); stats() waits for `stream` and reads them.
class Int8Quant;  // int8_quant.cuh

class ExecutorState {
 public:
  ExecutorState(const Problem& problem, const AttendOptions& options);
  ~ExecutorState();
  /// resume: device row states to start from (AttendOptions::resume), overriding the options'.
  void enqueue(const TensorView& q, const TensorView& k, const TensorView& v, const DeviceTileMask& mask,
               const TensorView& o, cudaStream_t stream, const SoftmaxState* resume = nullptr);
  /// `mask`: the host copy of the mask the last enqueue() ran (for the visited-tile count).
  AttendStats stats(const TileMask& mask, cudaStream_t stream) const;
  const std::int64_t* cu_q() const { return cu_q_.ptr; }
  const std::int64_t* cu_kv() const { return cu_kv_.ptr; }
  std::size_t bytes() const {
    return cu_q_.bytes() + cu_kv_.bytes() + empty_rows_.bytes() + skipped_.bytes() + thresholds_.bytes() +
           int8_bytes();
  }

 private:
  Problem problem_;
  float* lse_ = nullptr;
  DeviceRowStates states_;
  detail::DeviceArray<std::int64_t> cu_q_, cu_kv_;
  detail::DeviceArray<int> empty_rows_;
  detail::DeviceArray<unsigned long long> skipped_;
  detail::DeviceArray<float> thresholds_;
  DevicePvSkip pv_;
  bool pv_on_ = false;
  std::unique_ptr<Int8Quant> int8_;  ///< AttendOptions::qk_int8: the codes' prologue and buffers
  std::size_t int8_bytes() const;
};

/// The executor's statistics pass (backend.cu; the mma.sync kernel in its kState mode): per row, the base-2
/// online-softmax state (m, l) over the keys `mask` keeps for it — the same scores and softmax as attend — into
/// state[(b·Hq + h)·Nq + i], on `stream`. The anchor passes of SALE and AnchorAttention. Rows past a sequence's
/// end are not written; a row that sees no kept key gets (−∞, 0) and counts in *empty_rows (device).
void state_pass_async(const Problem& problem, const TensorView& q, const TensorView& k, const DeviceTileMask& mask,
                      SoftmaxState* state, const std::int64_t* cu_q, const std::int64_t* cu_kv, int* empty_rows,
                      cudaStream_t stream);

// One factory per method (its .cu file).
std::vector<std::string> dense_not_supported_reasons(const DenseConfig& config, const Problem& problem);
std::unique_ptr<DeviceEstimator> make_dense_estimator(const DenseConfig& config, const Problem& problem,
                                                      const std::int64_t* cu_q, const std::int64_t* cu_kv);
std::vector<std::string> sparge_not_supported_reasons(const sparge::Config& config, const Problem& problem);
std::unique_ptr<DeviceEstimator> make_sparge_estimator(const sparge::Config& config, const Problem& problem,
                                                       const std::int64_t* cu_q, const std::int64_t* cu_kv);
std::vector<std::string> fg_attn_not_supported_reasons(const fg_attn::Config& config, const Problem& problem);
std::unique_ptr<DeviceEstimator> make_fg_attn_estimator(const fg_attn::Config& config, const Problem& problem,
                                                        const std::int64_t* cu_q, const std::int64_t* cu_kv);

/// BFLA's estimator (bfla.cu); its group scores are exposed for the GPU tests (tests/gpu), which check them against
/// the reference's within a rounding bound and the mask against reference::bfla_mask_from_scores fed with them.
class BflaEstimator : public DeviceEstimator {
 public:
  /// The device's flattened-group scores of (b, hq) after run(): [⌈Nq_b/g⌉][⌈Nkv_b/g⌉] row-major (unscaled), as
  /// reference::bfla_group_scores; only the entries of causal block pairs are computed (others: whatever the
  /// workspace held). Waits for `stream`.
  virtual std::vector<float> group_scores(std::int64_t b, std::int64_t hq, cudaStream_t stream) const = 0;
  /// The group-score workspace (workspace_bytes() bytes), for tests that poison it before run().
  virtual float* scores_workspace() const = 0;
};
/// AnchorAttention's estimator (anchor_attn.cu); its anchor states are exposed for the GPU tests (tests/gpu), which
/// check them against the reference's within a rounding bound and the mask against reference::anchor_attn_select
/// over them.
class AnchorAttnEstimator : public DeviceEstimator {
 public:
  /// The anchor pass's states of the last run(), [(b·Hq + h)·Nq + i] (rows past a sequence's end: whatever the
  /// workspace held). Waits for `stream`.
  virtual std::vector<SoftmaxState> anchors(cudaStream_t stream) const = 0;
  /// The anchor-state workspace (B·Hq·Nq states), for tests that poison it before run().
  virtual SoftmaxState* anchors_workspace() const = 0;
};
std::vector<std::string> anchor_attn_not_supported_reasons(const anchor_attn::Config& config, const Problem& problem);
std::unique_ptr<AnchorAttnEstimator> make_anchor_attn_estimator(const anchor_attn::Config& config, const Problem& problem,
                                                                const std::int64_t* cu_q, const std::int64_t* cu_kv);

/// SALE's estimator (sale.cu); its codes, scales, sink-local states and margins are exposed for the GPU tests
/// (tests/gpu), which check the codes bit for bit against the reference's, the states within a rounding bound, and the
/// margins and mask bit for bit against reference::sale_select over the device's states.
class SaleEstimator : public DeviceEstimator {
 public:
  /// Codes [n][d] and the per-row copy of each group's scale (reference::SaleQuantized's layout).
  struct Quantized {
    std::vector<std::int8_t> codes;
    std::vector<float> scale;
  };
  /// The codes of Q' of (b, query head h) after run(), rows of the sequence. Waits for `stream`.
  virtual Quantized q_codes(std::int64_t b, std::int64_t h, cudaStream_t stream) const = 0;
  /// The codes of K' of (b, KV head h) after run(), rows of the sequence. Waits for `stream`.
  virtual Quantized k_codes(std::int64_t b, std::int64_t h, cudaStream_t stream) const = 0;
  /// The sink-local states [(b·Hq + h)·Nq + i] of the last run() (in the smoothed domain q·k', like the reference's),
  /// rows past a sequence's end: whatever the workspace held. Waits for `stream`.
  virtual std::vector<SoftmaxState> sink_local(cudaStream_t stream) const = 0;
  /// Per (b, hq, query block, key block) the margin of each candidate block (reference::SaleEstimate::margins' layout;
  /// other entries: whatever the workspace held). Only for an estimator made with keep_margins. Waits for `stream`.
  virtual std::vector<float> margins(cudaStream_t stream) const = 0;
  /// Sets every workspace byte to 0xff (NaN states, scales and margins; codes −1), for tests. Synchronous.
  virtual void poison_workspace() = 0;
};
std::vector<std::string> sale_not_supported_reasons(const sale::Config& config, const Problem& problem);
/// keep_margins: also write every candidate's margin (B·Hq·Tq·Tk floats: tests only).
std::unique_ptr<SaleEstimator> make_sale_estimator(const sale::Config& config, const Problem& problem,
                                                   const std::int64_t* cu_q, const std::int64_t* cu_kv,
                                                   bool keep_margins = false);

std::vector<std::string> bfla_not_supported_reasons(const bfla::Config& config, const Problem& problem);
/// per_query_head: one mask per query head (the reference's option, for analysis and tests); Plan uses false.
std::unique_ptr<BflaEstimator> make_bfla_estimator(const bfla::Config& config, const Problem& problem,
                                                   const std::int64_t* cu_q, const std::int64_t* cu_kv,
                                                   bool per_query_head = false);

}  // namespace spattn::cuda
