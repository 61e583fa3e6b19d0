#include "spattn/reference/fg_attn.hpp"

#include <tbb/parallel_for.h>

#include <cmath>

#include "spattn/error.hpp"
#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"
#include "spattn/topcdf.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::reference {
namespace {

/// Means of consecutive `tile` rows of (b, h): fp32 sums in token order, divided by the true count.
std::vector<float> tile_means(const Problem& p, const TensorView& t, bool is_q, std::int64_t b, std::int64_t h,
                              std::int64_t n, std::int64_t tile) {
  const std::int64_t d = p.head_dim, tiles = (n + tile - 1) / tile;
  std::vector<float> means(static_cast<std::size_t>(tiles * d)), rows(static_cast<std::size_t>(tile * d));
  for (std::int64_t j = 0; j < tiles; ++j) {  // one tile's rows at a time
    const std::int64_t count = std::min(tile, n - j * tile);
    for (std::int64_t r = 0; r < count; ++r) load_row(t, row_offset(t, p, is_q, b, h, j * tile + r), d, rows.data() + r * d);
    mean_rows(rows.data(), count, d, means.data() + j * d);
  }
  return means;
}

}  // namespace

std::vector<float> fg_attn_logits(const Problem& p, const TensorView& q, const TensorView& k,
                                  const fg_attn::Config& cfg, std::int64_t b, std::int64_t hq) {
  const MaskShape shape = MaskShape::of(p, cfg.tile_q, cfg.tile_k);
  const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b), d = p.head_dim;
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles();
  const std::vector<float> qbar = tile_means(p, q, true, b, hq, nq, cfg.tile_q);
  const std::vector<float> kbar = tile_means(p, k, false, b, p.kv_head_of(hq), nkv, cfg.tile_k);
  const float sl = scale_log2(p.softmax_scale());
  std::vector<float> logits(static_cast<std::size_t>(tq * tk), -INFINITY);
  const float tail_weight = fg_attn::tail_weight(nkv, cfg.tile_k, cfg.size_weighted_tail);
  for (std::int64_t i = 0; i * cfg.tile_q < nq; ++i) {
    const std::int64_t reachable = shape.reachable_k_tiles(b, i);
    for (std::int64_t j = 0; j < reachable; ++j) {
      float x = fg_attn::pooled_logit(qbar.data() + i * d, kbar.data() + j * d, d, sl);
      if (fg_attn::is_tail_tile(j, nkv, cfg.tile_k)) x += tail_weight;
      logits[static_cast<std::size_t>(i * tk + j)] = x;
    }
  }
  return logits;
}

TileMask fg_attn_estimate(const Problem& p, const TensorView& q, const TensorView& k, const fg_attn::Config& cfg) {
  cfg.validate();
  p.validate();
  const MaskShape shape = MaskShape::of(p, cfg.tile_q, cfg.tile_k);
  const std::int64_t tq = shape.num_q_tiles(), tk = shape.num_k_tiles();
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(shape.num_rows()));
  tbb::parallel_for(std::int64_t{0}, p.batch * p.heads_q, [&](std::int64_t bh) {
    const std::int64_t b = bh / p.heads_q, h = bh % p.heads_q;
    const std::vector<float> logits = fg_attn_logits(p, q, k, cfg, b, h);
    std::vector<float> prob(static_cast<std::size_t>(tk));
    std::vector<std::uint8_t> valid(static_cast<std::size_t>(tk)), keep(static_cast<std::size_t>(tk));
    std::vector<int> order;
    for (std::int64_t i = 0; i * cfg.tile_q < p.seqlen_q_of(b); ++i) {
      const float* x = logits.data() + i * tk;
      const std::int64_t reachable = shape.reachable_k_tiles(b, i);
      auto& row = rows[static_cast<std::size_t>((b * p.heads_q + h) * tq + i)];
      float m = -INFINITY;
      bool finite = true;
      for (std::int64_t j = 0; j < reachable; ++j) {
        finite = finite && std::isfinite(x[j]);
        m = x[j] > m ? x[j] : m;
      }
      if (fg_attn::keep_all_tiles(finite, cfg.top_p)) {  // dense fallback (NaN/Inf inputs) or p >= 1
        for (std::int64_t j = 0; j < reachable; ++j) row.push_back(static_cast<std::int32_t>(j));
        continue;
      }
      for (std::int64_t j = 0; j < tk; ++j) {
        valid[static_cast<std::size_t>(j)] = j < reachable;
        prob[static_cast<std::size_t>(j)] = j < reachable ? selection_weight(x[j], m) : 0.0f;
      }
      top_cdf(prob.data(), valid.data(), static_cast<int>(tk), {cfg.top_p, 1, true}, keep.data(), order);
      for (std::int64_t j = 0; j < tk; ++j)
        if (keep[static_cast<std::size_t>(j)]) row.push_back(static_cast<std::int32_t>(j));
    }
  });
  return TileMask::from_rows(shape, std::move(rows));
}

}  // namespace spattn::reference
