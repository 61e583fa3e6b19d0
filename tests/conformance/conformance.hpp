// The shared conformance table (ggml's test-backend-ops pattern): executor cases and estimator cases written once
// and run against every linked backend through a small memory adapter (host here, CUDA in tests/gpu), each backend
// compared with the reference — outputs within the dtype's tolerance, masks decision by decision.
//
// Which contract applies (DESIGN.md §5): executor outputs are compared within tolerances that fit the dtype (§5.4);
// estimator masks as the contract table (contract.hpp) states for each (backend, method): bit-identical where the
// backend follows the core's fixed-order arithmetic (§5.3) and for integer-domain decisions (§5.2), otherwise every
// differing decision within a stated margin of its threshold (the reference's own margins, where the method exports
// them: SALE) or at most a stated fraction of the decisions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spattn/method_config.hpp"
#include "spattn/spattn.hpp"
#include "spattn/tensor.hpp"
#include "spattn/workload.hpp"

namespace spattn::conformance {

/// Copies host tensors into a backend's memory space and results back. Buffers live as long as the adapter.
class MemoryAdapter {
 public:
  virtual ~MemoryAdapter() = default;
  virtual Memory memory() const = 0;
  /// A view of a copy of `t` in this memory (same layout and strides).
  virtual TensorView upload(const HostTensor& t) = 0;
  /// A buffer shaped like `t` in this memory, every byte set to 0xff (NaN in every float dtype): a kernel
  /// that forgets an element fails the comparison.
  virtual TensorView poisoned_like(const HostTensor& t) = 0;
  virtual float* poisoned_floats(std::size_t n) = 0;
  virtual void download(const TensorView& from, HostTensor& to) = 0;
  virtual void download(const float* from, std::vector<float>& to) = 0;
};

/// Host memory (copies, so a backend cannot see the reference's buffers).
std::unique_ptr<MemoryAdapter> host_adapter();

struct ExecutorCase {
  const char* name;
  std::int64_t batch, hq, hkv, nq, nkv, d, dv;  ///< dv = 0: d
  bool causal;
  DType dtype;
  Layout layout;
  std::int32_t tile_q, tile_k;
  double density;  ///< 1 = dense mask
  DType out = DType::f32;
  std::vector<std::int64_t> lens_q = {}, lens_kv = {};  ///< variable-length batch when not empty
};

/// The executor table: odd lengths, GQA, causal and not, Nq < Nkv and Nq > Nkv, head dims 32–256, Dv ≠ D, both
/// layouts, every dtype in and out, tile_q 16 … 2048, tile_k 1 … 128 (stripes, fine, coarse), empty rows,
/// variable-length batches, long sequences.
const std::vector<ExecutorCase>& executor_cases();

/// A case's inputs: seeded random Q, K (σ = 1.5), V, and a random mask of the case's density.
struct ExecutorInputs {
  Problem problem;
  HostTensor q, k, v;
  TileMask mask;
};
ExecutorInputs make_inputs(const ExecutorCase& c);

struct ExecutorOutcome {
  std::vector<std::string> not_supported;  ///< the backend's reasons; empty when it ran
  std::int64_t bad_outputs = 0, bad_lse = 0;
  double worst = 0.0;  ///< largest finite |got − reference|
  std::int64_t empty_rows = 0, reference_empty_rows = 0;
  std::int64_t visited_tiles = 0, reference_visited_tiles = 0;  ///< AttendStats::visited_tiles (the last call's)
  std::string backend;  ///< which backend ran (AttendStats::backend)
  std::string kernel;   ///< which of its kernels (AttendStats::kernel)
};
/// Runs the case on `backend` (through spattn::attend with options.backend) with its tensors in the adapter's
/// memory, and on the reference executor; compares outputs (tolerance of the input dtype: P is rounded to it before
/// P·V on GPUs), LSE and empty-row counts.
/// resumed: the backend runs the case in two calls (AttendOptions::state_out, then resume): the mask's tiles split at
/// random (seeded) between them, so that rows start empty, resume with no key left, or both; compared with the
/// reference's single call over the whole mask (the output's rounding counted twice), and the final states' m + log2 l
/// with the reference's LSE.
ExecutorOutcome check_executor(const ExecutorCase& c, const std::string& backend, MemoryAdapter& memory,
                               bool resumed = false);

/// A problem of the given shape; variable-length when lens_q is not empty (cu_seqlens from the lengths, the maxima
/// in seqlen_q / seqlen_kv). dv = 0: head_dim_v unset.
Problem problem_of(std::int64_t batch, std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nkv,
                   std::int64_t d, std::int64_t dv, bool causal, DType dtype, const std::vector<std::int64_t>& lens_q,
                   const std::vector<std::int64_t>& lens_kv);

struct EstimatorCase {
  const char* name;
  MethodConfig config;
  WorkloadKind kind;
  std::int64_t batch, hq, hkv, nq, nkv, d;
  bool causal;
  DType dtype;
  std::vector<std::int64_t> lens_q = {}, lens_kv = {};  ///< variable-length batch (random inputs) when not empty
};

/// The estimator table: every method × causal and not, Nq < Nkv, GQA, varlen, D 64–256, fp16/bf16, tails.
const std::vector<EstimatorCase>& estimator_cases();

/// A case's inputs as check_estimator builds them: the seeded workload of the case's kind, or random tensors for a
/// variable-length batch (packed [1, H, total, D]).
struct EstimatorInputs {
  Problem problem;
  HostTensor q, k;
};
EstimatorInputs estimator_inputs(const EstimatorCase& c);

struct EstimatorOutcome {
  std::vector<std::string> not_supported;
  std::int64_t decisions = 0;       ///< reachable (row of tiles, tile) decisions compared
  std::int64_t differing = 0;       ///< decisions that differ from the reference
  std::int64_t outside_margin = 0;  ///< differing decisions not explained by the reference's margin (|m| > tol)
  double density = 0.0;             ///< the reference mask's density
  std::string backend;
};
/// Estimates the case on `backend` (inputs in the adapter's memory) and on the reference with one thread (so a
/// host backend is also checked for thread-count determinism), and compares the masks decision by decision.
/// margin_tol: a differing SALE decision is explained when |reference margin| ≤ margin_tol (raw logits).
EstimatorOutcome check_estimator(const EstimatorCase& c, const std::string& backend, MemoryAdapter& memory,
                                 double margin_tol = 0.0);

struct PipelineOutcome {
  std::vector<std::string> not_supported;  ///< the backend's pipeline reasons; empty when it ran its pipeline
  bool same_mask = false;                  ///< the pipeline's mask is the backend's own estimate() of the case
  bool same_counts = false;                ///< candidates, selected, margins and anchor states as estimate()'s
  bool same_stats = false;                 ///< visited tiles and empty rows as the reference executor's on that mask
  std::int64_t bad_outputs = 0;            ///< outputs outside the dtype's tolerance of the reference executor's
  std::int64_t pv_skipped = 0;             ///< the pipeline's PV-skipped pairs (equal to the reference's: same_stats)
  std::string estimate_backend, attend_backend;
};
/// The case through sparse_attention() on `backend` when that backend runs it as one pipeline
/// (Backend::sparse_attention): random V, a poisoned O, the method's executor options. The pipeline must return
/// the mask the backend's estimate() gives (its estimator conformance is check_estimator's), and the output must be
/// the reference executor's over that mask.
PipelineOutcome check_pipeline(const EstimatorCase& c, const std::string& backend, MemoryAdapter& memory);

}  // namespace spattn::conformance
