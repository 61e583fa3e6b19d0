#include <cmath>

#include "spattn/error.hpp"
#include "spattn/methods/sparge.hpp"

namespace spattn::sparge {

float self_similarity(const float* x, std::int64_t rows, std::int64_t d, std::vector<float>& scratch) {
  scratch.assign(static_cast<std::size_t>(d), 0.0f);
  std::int64_t nonzero = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * d;
    float sq = 0.0f;
    for (std::int64_t c = 0; c < d; ++c) sq += row[c] * row[c];
    if (!(sq > 0.0f)) continue;
    const float inv = 1.0f / std::sqrt(sq);
    for (std::int64_t c = 0; c < d; ++c) scratch[static_cast<std::size_t>(c)] += row[c] * inv;
    ++nonzero;
  }
  if (nonzero == 0) return -1.0f;
  float s = 0.0f;
  const float inv_n = 1.0f / static_cast<float>(nonzero);
  for (std::int64_t c = 0; c < d; ++c) {
    const float m = scratch[static_cast<std::size_t>(c)] * inv_n;
    s += m * m;
  }
  return s;
}


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
  require(dense_heads.empty() || static_cast<std::int64_t>(dense_heads.size()) == heads_q,
          "sparge dense_heads: give one flag per query head (", heads_q, "), got ", dense_heads.size());
}

}  // namespace spattn::sparge
