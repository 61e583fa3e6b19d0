// A method end to end on the GPU for one problem shape: estimate → mask in device memory → attend, with no host
// round trip between the stages. The constructor validates and allocates everything once (estimator workspace,
// the device mask, sequence offsets, PV-skip thresholds); estimate() / attend() / run() then only enqueue kernels
// on the caller's stream — no allocation, no synchronisation — so a run can be captured in a CUDA graph and
// replayed on new inputs in the same buffers. sparse_attention() on CUDA tensors uses one per call.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "spattn/cuda/backend.hpp"

namespace spattn::cuda {

/// Device memory a caller lends a Plan instead of the plan allocating its own (cuda::Plan's workspace option, e.g.
/// from a framework's caching allocator): `bytes` bytes at `data`, 256-byte aligned, at least Plan::required_bytes,
/// alive and used by nothing else while the plan lives. The plan never frees it.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

class Plan {
 public:
  /// Why this backend cannot plan `config` for `problem` (estimator and executor; empty: it can).
  static std::vector<std::string> not_supported_reasons(const MethodConfig& config, const Problem& problem);
  /// Throws spattn::Error with the reasons when not supported. options: the executor's (lse, PV-skip, …); the
  /// method's own executor options (SpargeAttn's pv_threshold) are added as sparse_attention() does.
  Plan(const MethodConfig& config, const Problem& problem, const AttendOptions& options = {});
  /// The same plan with every device buffer (estimator workspace, mask, executor state) carved from `workspace`: the
  /// constructor allocates no device memory. Throws spattn::Error when it is null, misaligned or too small.
  Plan(const MethodConfig& config, const Problem& problem, const AttendOptions& options, Workspace workspace);
  /// The bytes a Workspace for this plan needs (no device memory is allocated to find out). Throws like the
  /// constructor when the plan is not supported.
  static std::size_t required_bytes(const MethodConfig& config, const Problem& problem, const AttendOptions& options = {});
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  /// Enqueues the estimate of q, k into mask(): the method's whole selection.
  void estimate(const TensorView& q, const TensorView& k, CUstream_st* stream = nullptr);
  /// The estimate as the start of the answer: for a method whose estimator runs an exact pass over part of each
  /// row (AnchorAttention: its anchor region), that pass writes those keys' part of o and each row's state, and
  /// mask() gets the rest of the selection; the next attend() (same o) resumes the rows (AttendOptions::resume),
  /// so those keys are computed once. Other methods: estimate(q, k).
  void estimate(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                CUstream_st* stream = nullptr);
  /// Enqueues the executor over mask() (the last estimate enqueued before it on `stream`; resumed after
  /// estimate(q, k, v, o)).
  void attend(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
              CUstream_st* stream = nullptr);
  /// estimate(q, k, v, o) then attend().
  void run(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
           CUstream_st* stream = nullptr);

  /// The mask the executor runs: after estimate(q, k, v, o) of a resuming method, without the keys its pass covered.
  const DeviceTileMask& mask() const;
  /// The method's whole selection on the host (waits for `stream`): mask() with the keys the estimator's pass
  /// covered when the last estimate resumed. `downloaded`: the caller's mask().download(), if it has one.
  TileMask selection(CUstream_st* stream = nullptr, const TileMask* downloaded = nullptr) const;
  /// Device bytes held: estimator workspace + mask + counters (in the caller's Workspace when given one).
  std::size_t workspace_bytes() const;
  /// Counts of the last attend() (empty rows, PV-skipped pairs, visited tiles — of the whole selection): waits for
  /// `stream`. `downloaded`: the caller's selection(), if it has one; otherwise it is downloaded here.
  AttendStats stats(CUstream_st* stream = nullptr, const TileMask* downloaded = nullptr) const;

 private:
  void build(const MethodConfig& config, const Problem& problem, const AttendOptions& options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spattn::cuda
