// spattn public entry points. Link spattn::spattn.
//
//   spattn::Problem p{...};                                   // shapes, causal, dtype, scale
//   auto config = spattn::default_config("sparge");          // or sparge::Config{...}, a calibrated config, …
//   auto r = spattn::sparse_attention(config, p, q, k, v, o);  // estimate the mask, then attend over it
//
//   auto est = spattn::estimate(config, p, q, k);            // Stage 1 alone: est.mask is a TileMask
//   spattn::attend(p, q, k, v, est.mask, o);                  // Stage 2 alone: exact attention over the kept tiles
//
// Every call validates its arguments (spattn::Error names the bad argument), then runs the first linked backend
// that covers it — or the one named in options.backend, failing with its reasons if it cannot.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "spattn/backend.hpp"
#include "spattn/error.hpp"
#include "spattn/estimate.hpp"
#include "spattn/mask.hpp"
#include "spattn/method_config.hpp"
#include "spattn/oracle.hpp"
#include "spattn/problem.hpp"
#include "spattn/tensor.hpp"

namespace spattn {

/// Tile-sparse attention: O = softmax(scale · Q Kᵀ restricted to the mask and the causal rule) V.
AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                   const TileMask& mask, const TensorView& o, const AttendOptions& options = {});

/// Dense attention (every tile kept), the baseline every sparse result is compared with.
AttendStats attend_dense(const Problem& problem, const TensorView& q, const TensorView& k,
                         const TensorView& v, const TensorView& o, const AttendOptions& options = {});

/// Stage 1 of a method: the TileMask (and margins, anchor state, counts) for these Q and K.
Estimate estimate(const MethodConfig& config, const Problem& problem, const TensorView& q, const TensorView& k,
                  const EstimateOptions& options = {});

/// estimate() then attend() over its mask, with the method's executor options (SpargeAttn's PV-skip) added to
/// `options`. options.backend names the backend of both stages ("auto": the first that covers each).
SparseAttentionResult sparse_attention(const MethodConfig& config, const Problem& problem, const TensorView& q,
                                       const TensorView& k, const TensorView& v, const TensorView& o,
                                       const AttendOptions& options = {});

/// The oracle (spattn/oracle.hpp): the exact attention mass of every reachable key tile of `shape` (tile_q, tile_k,
/// mask heads Hq or Hkv, the problem's batch, lengths and causality). It is not a method — it reads the true scores
/// and costs the Q·Kᵀ half of dense attention — so it is not a MethodConfig: it runs on the reference backend, on
/// host memory (spattn::Error otherwise), and its masses serve any number of budgets (oracle_mask below).
OracleMass oracle_tile_mass(const Problem& problem, const TensorView& q, const TensorView& k, const MaskShape& shape);

/// The oracle's mask for a budget: per mask row, the tiles of most mass first until the budget is met.
TileMask oracle_mask(const OracleMass& mass, const OracleBudget& budget);
/// Both steps at once.
TileMask oracle_mask(const Problem& problem, const TensorView& q, const TensorView& k, const MaskShape& shape,
                     const OracleBudget& budget);

/// One calibration input: its tensors in host memory, or all of them (and every other sample's) in one device memory
/// that a backend of this build allocates (CUDA memory with the CUDA backend) — then the search's estimates and
/// attends run on that device, and only each run's output is copied back to compare.
struct Sample {
  Problem problem;
  TensorView q, k, v;
};

struct CalibrationTargets {
  /// SpargeAttn: relative-L1 bounds of the τ search, then of the PV threshold search; 0 < l1 <= l2, finite. The
  /// paper's 0.08 / 0.09 cost +14.8 % / +17.9 % held-out loss on the trained LM of bench/results/quality.md (8K / 32K,
  /// 2026-11-28), so the default is rel_l1's level below (not yet measured with SpargeAttn itself).
  float l1 = 0.01f, l2 = 0.011f;
  int theta_steps = 16;          ///< SpargeAttn: θ grid over [−1, 1); [1, 256]
  float sale_theta = 0.4f;       ///< SALE: bound on Err = Σ|O − O_dense| / N; (0, inf)
  /// AnchorAttention, FG-Attn, BFLA: bound on every head's rel L1 (metrics.hpp) over the samples; (0, inf). Measured
  /// on the trained LM of bench/results/quality.md (2026-11-28, calibrated per layer on a training window, loss on
  /// held-out text at 8K / 32K): 0.01 kept 91 / 86 % (AnchorAttention), 68 / 72 % (FG-Attn), 86 / 87 % (BFLA) of the
  /// tiles for at most +0.12 %; 0.002 left AnchorAttention dense and the others at ≥ 94 %. Any one fixed setting of
  /// AnchorAttention or FG-Attn cost more than +1 % there: the layers differ, and calibration finds which to leave dense.
  float rel_l1 = 0.01f;
  std::string backend = "auto";  ///< backend of the estimates and attends the search runs
  std::function<void(double fraction, const std::string& what)> progress;  ///< optional
};

/// A calibrated method: per-head parameters (SpargeAttn, SALE) or the main knob's setting for the samples' layer
/// (the others), and what the search measured. Saved and loaded as JSON by spattn/params_file.hpp.
using Calibration = std::variant<sparge::Params, sale::Params, KnobParams>;
/// The configuration a calibration gives estimate() and sparse_attention().
MethodConfig config_of(const Calibration& calibration);

/// Searches per-head parameters of `base`'s method (SpargeAttn: θ, τ, PV threshold; SALE: τ) on the samples, every
/// estimate and attend through the dispatcher, against dense attention:
/// - SpargeAttn (research/spargeattn.md §6): for θ = −1, −1 + 2/steps, …: bisect τ ∈ [0, 1] for the smallest τ whose
///   worst relative L1 over the samples is < l1 (interval 0.01), then the PV threshold t ∈ [0, 50] for the
///   smallest t still < l2 (interval 0.5; none passing = off); stop when sparsity drops below 0.1. The head takes the
///   θ with the largest sparsity (1 − (kept − skipped) / reachable tiles; ties: lower θ); ≤ 0.1 → dense. Deviations
///   from the code: every candidate is verified on all inputs at once; the best passing value is kept.
/// - SALE (research/sale.md §4): τ = 0.008, halved until Err(τ) < sale_theta on every sample; τ ≤ 1e-4 → 0 (dense).
/// - AnchorAttention, FG-Attn, BFLA (their papers calibrate one threshold against an error bound; their options hold
///   one value for every head): every setting of the method's main knob in its option table's sweep (θ, top-p, BFLA's
///   keep ratio) runs on every sample, all heads at once (BFLA's masks are per KV head); of the settings whose every
///   head's rel L1 is ≤ rel_l1, the one keeping the fewest tiles (ties: the earlier in the sweep); none → dense. Call
///   it on one layer's samples to calibrate that layer.
/// "dense" has no calibration (Error). Samples must share heads, head_dim and memory.
Calibration calibrate(const MethodConfig& base, const std::vector<Sample>& samples, const CalibrationTargets& targets = {});

/// A device copy of a host tensor: the same dtype, extents and strides in `memory()` (CUDA memory with the CUDA
/// backend), allocated and copied by the linked backend that owns that memory — so a caller needs no backend type
/// of its own. view() is a TensorView of it for attend(), estimate(), calibrate()'s samples, …; copies of a
/// DeviceBuffer share the memory, freed with the last one.
class DeviceBuffer {
 public:
  TensorView view() const { return view_; }
  Memory memory() const { return view_.memory; }
  std::size_t size_bytes() const { return bytes_; }
  /// Copies the device contents into `host` (the same number of bytes; synchronous).
  void download(HostTensor& host) const;

 private:
  friend DeviceBuffer upload(const HostTensor& host, Memory memory);
  std::shared_ptr<void> data_;
  TensorView view_;
  std::size_t bytes_ = 0;
  const Backend* owner_ = nullptr;
};

/// Copies `host` into `memory` (a device memory: Memory::cuda, …) through the first linked backend that allocates
/// it (synchronous). spattn::Error when no backend of this build does (Memory::cuda without the CUDA backend).
DeviceBuffer upload(const HostTensor& host, Memory memory);

/// The backends linked into this build, in the order "auto" tries them.
const std::vector<std::unique_ptr<Backend>>& backends();

}  // namespace spattn
