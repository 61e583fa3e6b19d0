#include "spattn/error.hpp"
#include "spattn/methods/anchor_attn.hpp"

namespace spattn::anchor_attn {

void Config::validate() const {
  validate_options(kOptionTable, this, -1);
  require_in("anchor block×step (rows per group)", std::int64_t{block} * step, Interval<std::int64_t>{16, 2048});
}

}  // namespace spattn::anchor_attn
