#include <cmath>

#include "spattn/error.hpp"
#include "spattn/methods/bfla.hpp"

namespace spattn::bfla {

void Config::validate() const {
  require_in("bfla block", block, Interval<std::int32_t>{16, 4096});
  require(group >= 1 && block % group == 0, "bfla group: must divide block (", block, "), got ", group);
  require_in("bfla tile", tile, Interval<std::int32_t>{1, 128});
  require(block % tile == 0, "bfla tile: must divide block (", block, "), got ", tile);
  require(block % tile_q() == 0, "bfla block: must be a multiple of the query tile ", tile_q());
  require_in("bfla gamma", gamma, Interval<float>{0.0f, 1.0f}, " (1 = dense, 0 = no mass rule)");
  require_in("bfla n_local", n_local, Interval<std::int32_t>{0, 1 << 20});
  require_in("bfla eta", eta, Interval<std::int64_t>{0, std::int64_t{1} << 31}, " (0 = off)");
  require_in("bfla rho", rho, Interval<float>{0.0f, 1.0f}, " (0 = off)");
  require_in("bfla seed", seed, Interval<std::int64_t>{0, std::int64_t{1} << 31});
  require_in("bfla prob_threshold", prob_threshold, Interval<float>{0.0f, INFINITY}, " (> 1 = off)");
  require_in("bfla keep_ratio", keep_ratio, Interval<float>{0.0f, 1.0f}, " (0 = off)");
  require_in("bfla min_keep_blocks", min_keep_blocks, Interval<std::int32_t>{0, 1 << 30});
}

}  // namespace spattn::bfla
