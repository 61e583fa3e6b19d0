#include "spattn/error.hpp"
#include "spattn/methods/bfla.hpp"

namespace spattn::bfla {

void Config::validate() const {
  require(block >= 16 && block <= 4096, "bfla block: must be in [16, 4096], got ", block);
  require(group >= 1 && block % group == 0, "bfla group: must divide block (", block, "), got ", group);
  require(tile >= 1 && tile <= 128 && block % tile == 0, "bfla tile: must divide block (", block,
          ") and be in [1, 128], got ", tile);
  require(block % tile_q() == 0, "bfla block: must be a multiple of the query tile ", tile_q());
  require(gamma == gamma, "bfla gamma: is NaN");
  require(n_local >= 0, "bfla n_local: must be >= 0, got ", n_local);
  require(eta >= 0, "bfla eta: must be >= 0 (0 = off), got ", eta);
  require(rho == rho && rho >= 0.0f, "bfla rho: must be >= 0 (0 = off), got ", rho);
  require(prob_threshold == prob_threshold, "bfla prob_threshold: is NaN");
  require(keep_ratio == keep_ratio && keep_ratio >= 0.0f, "bfla keep_ratio: must be >= 0, got ", keep_ratio);
  require(min_keep_blocks >= 0, "bfla min_keep_blocks: must be >= 0, got ", min_keep_blocks);
}

}  // namespace spattn::bfla
