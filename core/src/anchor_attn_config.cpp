#include "spattn/methods/anchor_attn.hpp"

#include "spattn/error.hpp"

namespace spattn::anchor_attn {

void Config::validate() const {
  require(block >= 1, "anchor block: must be >= 1, got ", block);
  require(step >= 1, "anchor step: must be >= 1, got ", step);
  require(group_rows() >= 16 && group_rows() <= 2048, "anchor block×step: the group of ", group_rows(),
          " rows must be in [16, 2048]");
  require(theta == theta, "anchor theta: is NaN (use ±inf for all/no stripes)");
  require(n_sink >= 0, "anchor n_sink: must be >= 0, got ", n_sink);
  require(local_lead >= 0, "anchor local_lead: must be >= 0, got ", local_lead);
}

}  // namespace spattn::anchor_attn
