#include <cmath>

#include "spattn/error.hpp"
#include "spattn/methods/sparge.hpp"

namespace spattn::sparge {

void Config::validate(std::int64_t heads_q) const {
  require(block_q >= 16 && block_q <= 2048, "sparge block_q: must be in [16, 2048], got ", block_q);
  require(block_k >= 1 && block_k <= 128, "sparge block_k: must be in [1, 128], got ", block_k);
  for (const auto* v : {&theta, &tau}) {
    const char* name = v == &theta ? "sparge theta" : "sparge tau";
    require(v->size() == 1 || static_cast<std::int64_t>(v->size()) == heads_q, name,
            ": give one value or one per query head (", heads_q, "), got ", v->size());
    for (float x : *v) require(x == x, name, ": NaN value");
  }
  require(topk == topk && topk >= 0.0f && topk <= 1.0f, "sparge topk: must be in [0, 1] (0 = TopCdf), got ", topk);
  require(pv_threshold.empty() || pv_threshold.size() == 1 || static_cast<std::int64_t>(pv_threshold.size()) == heads_q,
          "sparge pv_threshold: give none, one value or one per query head (", heads_q, "), got ", pv_threshold.size());
  for (float t : pv_threshold)
    require(t == t && t >= 0.0f, "sparge pv_threshold: must be >= 0 (+inf = off), got ", t);
  require(dense_heads.empty() || static_cast<std::int64_t>(dense_heads.size()) == heads_q,
          "sparge dense_heads: give one flag per query head (", heads_q, "), got ", dense_heads.size());
}

}  // namespace spattn::sparge
