// The interface every executor backend implements, and what an attend() call returns. A backend declares
// which calls it covers by answering not_supported_reasons() in words (xformers' pattern); the
// dispatcher (spattn.hpp) picks the first that covers a call, or reports every backend's reasons.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spattn/mask.hpp"
#include "spattn/problem.hpp"

namespace spattn {

struct AttendOptions {
  std::string backend = "auto";  ///< "auto" or a backend's name ("reference", …)
  /// Optional [B, Hq, Nq] fp32 output: each row's natural-log log-sum-exp (-inf for a row with no key).
  /// Variable-length batches: row n of sequence b is at (b·Hq + h)·seqlen_q + n.
  float* lse = nullptr;
};

struct AttendStats {
  std::string backend;           ///< which backend ran
  std::int64_t empty_rows = 0;   ///< query rows that attended to no key (output zeros)
  std::int64_t visited_tiles = 0;  ///< (query-tile row, key tile) pairs processed, summed over query heads
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  /// Empty when this backend computes the call; otherwise one sentence per missing capability.
  virtual std::vector<std::string> not_supported_reasons(const Problem& problem, const TensorView& q,
                                                         const TensorView& k, const TensorView& v,
                                                         const TileMask& mask, const TensorView& o) const = 0;
  virtual AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k,
                             const TensorView& v, const TileMask& mask, const TensorView& o,
                             const AttendOptions& options) const = 0;
};

}  // namespace spattn
