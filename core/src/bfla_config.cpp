#include "spattn/error.hpp"
#include "spattn/methods/bfla.hpp"

namespace spattn::bfla {

void Config::validate() const {
  validate_options(kOptionTable, this, -1);
  require(block % group == 0, "bfla group: must divide block (", block, "), got ", group);
  require(block % tile == 0, "bfla tile: must divide block (", block, "), got ", tile);
  require(block % tile_q() == 0, "bfla block: must be a multiple of the query tile ", tile_q());
}

}  // namespace spattn::bfla
