// The interface every backend implements: the executor (attend) and the estimators (estimate). A backend
// declares which calls it covers by answering not_supported_reasons() / estimate_not_supported_reasons() in
// words (xformers' pattern); the dispatcher (spattn.hpp) picks the first that covers a call, or reports every
// backend's reasons. Backends register in one place: api/dispatch.cpp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spattn/attend_options.hpp"
#include "spattn/estimate.hpp"
#include "spattn/input_range.hpp"
#include "spattn/mask.hpp"
#include "spattn/method_config.hpp"
#include "spattn/problem.hpp"

namespace spattn {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  /// The range summary (spattn/input_range.hpp) of a tensor in memory this backend owns (e.g. CUDA memory) —
  /// q (is_q) or k/v, `heads` heads of `dim` elements — computed where it lives; nullopt when `t` is not such
  /// memory. The dispatcher checks device inputs with it (host inputs: the core's scan).
  virtual std::optional<TensorRange> input_range(const Problem& /*problem*/, const TensorView& /*t*/, bool /*is_q*/,
                                                 std::int64_t /*heads*/, std::int64_t /*dim*/) const {
    return std::nullopt;
  }
  /// Empty when this backend computes the call; otherwise one sentence per missing capability.
  virtual std::vector<std::string> not_supported_reasons(const Problem& problem, const TensorView& q,
                                                         const TensorView& k, const TensorView& v,
                                                         const TileMask& mask, const TensorView& o,
                                                         const AttendOptions& options) const = 0;
  virtual AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k,
                             const TensorView& v, const TileMask& mask, const TensorView& o,
                             const AttendOptions& options) const = 0;

  /// Empty when this backend estimates `config`'s method for the call; otherwise one sentence per missing
  /// capability. The default: a backend without estimators.
  virtual std::vector<std::string> estimate_not_supported_reasons(const MethodConfig& config, const Problem& problem,
                                                                  const TensorView& q, const TensorView& k,
                                                                  const EstimateOptions& options) const;
  /// Stage 1 of the method; arguments already validated and covered.
  virtual Estimate estimate(const MethodConfig& config, const Problem& problem, const TensorView& q,
                            const TensorView& k, const EstimateOptions& options) const;

  /// Empty when this backend runs estimate → attend as one pipeline that keeps the mask in its own memory (no
  /// host round trip between the stages); the dispatcher otherwise runs estimate() and attend() separately.
  /// The default: no such pipeline. `options` already carry the method's executor options.
  virtual std::vector<std::string> sparse_attention_not_supported_reasons(const MethodConfig& config,
                                                                          const Problem& problem, const TensorView& q,
                                                                          const TensorView& k, const TensorView& v,
                                                                          const TensorView& o,
                                                                          const AttendOptions& options) const;
  virtual SparseAttentionResult sparse_attention(const MethodConfig& config, const Problem& problem,
                                                 const TensorView& q, const TensorView& k, const TensorView& v,
                                                 const TensorView& o, const AttendOptions& options) const;

  /// Scratch for library-level algorithms that run the stages on a caller's device tensors (calibrate(): its
  /// outputs beside the samples; spattn::upload: a host tensor's device copy): `bytes` of `memory`, a device memory
  /// this backend owns, freed when the last handle goes; null when this backend does not own `memory` (the default:
  /// a host-only backend).
  virtual std::shared_ptr<void> allocate(Memory memory, std::size_t bytes) const;
  /// Copies `bytes` from `memory` (what allocate() serves) into host memory; false when this backend does not own
  /// `memory` (the default).
  virtual bool download(Memory memory, void* host_dst, const void* src, std::size_t bytes) const;
  /// Copies `bytes` from host memory into `memory` (what allocate() serves; spattn::upload); false when this backend
  /// does not own `memory` (the default).
  virtual bool upload(Memory memory, void* dst, const void* host_src, std::size_t bytes) const;
};

}  // namespace spattn
