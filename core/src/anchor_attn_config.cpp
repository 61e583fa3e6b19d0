#include <cmath>

#include "spattn/checked.hpp"
#include "spattn/error.hpp"
#include "spattn/methods/anchor_attn.hpp"

namespace spattn::anchor_attn {

void Config::validate() const {
  require_in("anchor block", block, Interval<std::int32_t>{1, 2048});
  require_in("anchor step", step, Interval<std::int32_t>{1, 2048});
  require_in("anchor block×step (rows per group)", std::int64_t{block} * step, Interval<std::int64_t>{16, 2048});
  if (theta != -INFINITY) require_in("anchor theta", theta, Interval<float>{0.0f, INFINITY}, " (inf = dense; or -inf: the anchor region only)");
  require_in("anchor n_sink", n_sink, Interval<std::int64_t>{0, kMaxAllocationBytes});
  require_in("anchor local_lead", local_lead, Interval<std::int64_t>{0, kMaxAllocationBytes});
}

}  // namespace spattn::anchor_attn
