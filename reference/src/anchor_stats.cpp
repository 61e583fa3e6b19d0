#include "spattn/reference/anchor_stats.hpp"

#include <tbb/parallel_for.h>

#include <vector>

#include "spattn/error.hpp"
#include "spattn/numerics.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::reference {

std::vector<AnchorStats> anchor_stats(const Problem& p, const TensorView& q, const TensorView& k,
                                      std::int64_t sink, std::int64_t local) {
  p.validate();
  require(sink >= 0, "sink: must be >= 0, got ", sink);
  require(local >= 0, "local: must be >= 0, got ", local);
  std::vector<AnchorStats> out(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q));
  const float sl = scale_log2(p.softmax_scale());
  const std::int64_t d = p.head_dim;
  tbb::parallel_for(std::int64_t{0}, p.batch * p.heads_q, [&](std::int64_t bh) {
    const std::int64_t b = bh / p.heads_q, h = bh % p.heads_q, hkv = p.kv_head_of(h);
    std::vector<float> qi(static_cast<std::size_t>(d)), kj(static_cast<std::size_t>(d));
    for (std::int64_t i = 0; i < p.seqlen_q_of(b); ++i) {
      load_row(q, row_offset(q, p, true, b, h, i), d, qi.data());
      const AnchorRegion region = anchor_region(p.visible_keys(b, i), sink, local);
      AnchorStats st;
      auto fold = [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t j = begin; j < end; ++j) {
          load_row(k, row_offset(k, p, false, b, hkv, j), d, kj.data());
          float x = dot_sequential(qi.data(), kj.data(), d) * sl, w;
          OnlineSoftmax::update(st, &x, 1, &w);
        }
      };
      fold(0, region.sink_end);
      fold(region.local_begin, region.local_end);
      out[static_cast<std::size_t>(bh * p.seqlen_q + i)] = st;
    }
  });
  return out;
}

}  // namespace spattn::reference
