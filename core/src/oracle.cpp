#include "spattn/oracle.hpp"

#include "spattn/error.hpp"

namespace spattn {

void OracleBudget::validate() const {
  require(kind == Kind::mass || kind == Kind::density || kind == Kind::threshold,
          "oracle budget kind: must be mass, density or threshold, got ", static_cast<int>(kind));
  if (kind == Kind::threshold)
    require_in("oracle threshold budget", value, Interval<float>{0.0f, 1.0f}, " (0 = every tile)");
  else
    require_in(kind == Kind::mass ? "oracle mass budget" : "oracle density budget", value,
               Interval<float>{0.0f, 1.0f, true, false}, kind == Kind::mass ? " (1 = every tile)" : " (1 = dense)");
}

}  // namespace spattn
