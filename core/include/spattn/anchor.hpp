// Anchor regions and their exact statistics.
//
// The anchor region of a query row is where SALE and AnchorAttention look first: the initial "sink" keys
// and a local window ending at the row's diagonal. Regions are defined so that sink, local window and
// candidates are disjoint and together cover the row's visible keys (the authors' code overlaps or
// leaves gaps: research/anchorattention.md §5, sale.md §3.2):
//   sink      = [0, min(sink, visible))
//   local     = [max(sink_end, visible - local), visible)
//   candidate = [sink_end, local_begin)
// where `visible` is the number of keys the row may see (i + Nkv - Nq + 1 when causal, Nkv otherwise).
// AnchorStats holds the base-2 running max m and sum l over the region — the same SoftmaxState the
// executor uses, so a later pass can resume from it.
#pragma once

#include <cstdint>

#include "spattn/config.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn {

struct AnchorRegion {
  std::int64_t sink_end = 0;     ///< sink keys are [0, sink_end)
  std::int64_t local_begin = 0;  ///< local keys are [local_begin, local_end)
  std::int64_t local_end = 0;    ///< = visible keys of the row

  SPATTN_HD std::int64_t size() const { return sink_end + (local_end - local_begin); }
  SPATTN_HD bool contains(std::int64_t j) const { return j < sink_end || (j >= local_begin && j < local_end); }
  /// Candidate keys (neither sink nor local) are [sink_end, local_begin).
  SPATTN_HD std::int64_t candidates() const { return local_begin - sink_end; }
};

/// Region of a row that sees `visible` keys, with `sink` initial keys and a `local` window (both >= 0).
SPATTN_INLINE AnchorRegion anchor_region(std::int64_t visible, std::int64_t sink, std::int64_t local) {
  AnchorRegion r;
  r.sink_end = sink < visible ? sink : visible;
  const std::int64_t lb = visible - local;
  r.local_begin = lb > r.sink_end ? lb : r.sink_end;
  r.local_end = visible;
  return r;
}

/// Exact base-2 softmax statistics over a row's anchor region.
using AnchorStats = SoftmaxState;

}  // namespace spattn
