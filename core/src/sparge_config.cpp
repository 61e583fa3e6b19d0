#include <cmath>

#include "spattn/error.hpp"
#include "spattn/methods/sparge.hpp"

namespace spattn::sparge {

void Config::validate(std::int64_t heads_q) const {
  require_in("sparge block_q", block_q, Interval<std::int32_t>{16, 2048});
  require_in("sparge block_k", block_k, Interval<std::int32_t>{1, 128});
  for (const auto* v : {&theta, &tau}) {
    const char* name = v == &theta ? "sparge theta" : "sparge tau";
    require(v->size() == 1 || static_cast<std::int64_t>(v->size()) == heads_q, name,
            ": give one value or one per query head (", heads_q, "), got ", v->size());
  }
  for (float x : theta) require_in("sparge theta", x, Interval<float>{-1.0f, 1.0f}, " (1 = no block self-similar: dense)");
  for (float x : tau) require_in("sparge tau", x, Interval<float>{0.0f, 1.0f});
  require_in("sparge topk", topk, Interval<float>{0.0f, 1.0f}, " (0 = TopCdf)");
  require(pv_threshold.empty() || pv_threshold.size() == 1 || static_cast<std::int64_t>(pv_threshold.size()) == heads_q,
          "sparge pv_threshold: give none, one value or one per query head (", heads_q, "), got ", pv_threshold.size());
  for (float t : pv_threshold) require_in("sparge pv_threshold", t, Interval<float>{0.0f, INFINITY}, " (inf = off)");
  require(dense_heads.empty() || static_cast<std::int64_t>(dense_heads.size()) == heads_q,
          "sparge dense_heads: give one flag per query head (", heads_q, "), got ", dense_heads.size());
}

}  // namespace spattn::sparge
