#include "spattn/methods/sparge.hpp"

namespace spattn::sparge {

void Config::validate(std::int64_t heads_q) const { validate_options(kOptionTable, this, heads_q); }

}  // namespace spattn::sparge
