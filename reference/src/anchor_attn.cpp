#include "spattn/reference/anchor_attn.hpp"

#include <tbb/parallel_for.h>

#include <Eigen/Core>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "spattn/error.hpp"
#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::reference {
namespace {
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// The estimator; `given`: anchors to select with instead of its own anchor pass (anchor_attn_select).
AnchorEstimate estimate(const Problem& p, const TensorView& q, const TensorView& k, const anchor_attn::Config& c,
                        const std::vector<AnchorStats>* given, std::vector<float>* margins) {
  c.validate();
  p.validate();
  require(given == nullptr || given->size() == static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q),
          "anchor_attn_select: anchors must hold batch·heads_q·seqlen_q states");
  const std::int32_t group = c.group_rows();
  const MaskShape shape = MaskShape::of(p, group, 1);
  const std::int64_t tq = shape.num_q_tiles(), d = p.head_dim;
  const float sl = scale_log2(p.softmax_scale());
  const float theta2 = anchor_attn::theta_log2(c.theta);  // θ in base-2 units, like every score below
  AnchorEstimate out;
  if (given) out.anchors = *given;
  else out.anchors.assign(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q), AnchorStats{});
  if (margins) margins->assign(static_cast<std::size_t>(p.batch * p.heads_q * tq * p.seqlen_kv), NAN);
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(shape.num_rows()));
  std::atomic<std::int64_t> candidates{0}, selected{0};

  tbb::parallel_for(std::int64_t{0}, p.batch * p.heads_q * tq, [&](std::int64_t task) {
    const std::int64_t t = task % tq, bh = task / tq, b = bh / p.heads_q, h = bh % p.heads_q;
    const std::int64_t hkv = p.kv_head_of(h), nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
    const std::int64_t first = t * group;
    if (first >= nq) return;
    const std::int64_t last = std::min(first + group, nq) - 1;
    const anchor_attn::GroupKeys keys = anchor_attn::group_keys(c.n_sink, c.local_lead, group, first, last, nq, nkv, p.causal);
    const anchor_attn::Window win = keys.local;
    const std::int64_t rows_in_group = last - first + 1;

    // Queries of the group and K rows, as fp32.
    std::vector<float> qg(static_cast<std::size_t>(rows_in_group * d)), krow(static_cast<std::size_t>(d));
    for (std::int64_t r = 0; r < rows_in_group; ++r)
      load_row(q, row_offset(q, p, true, b, h, first + r), d, qg.data() + r * d);
    auto key = [&](std::int64_t j) {
      load_row(k, row_offset(k, p, false, b, hkv, j), d, krow.data());
      return krow.data();
    };

    // Anchor pass: exact base-2 stats over sink ∪ local, per row (keys ascending). The region's scores are one
    // Eigen product per group (deterministic for a given build; the anchors feed decisions that other
    // backends match up to a reported margin, DESIGN.md §5.3).
    std::vector<float> anchor(static_cast<std::size_t>(rows_in_group));
    if (given) {
      for (std::int64_t r = 0; r < rows_in_group; ++r)
        anchor[static_cast<std::size_t>(r)] = (*given)[static_cast<std::size_t>(bh * p.seqlen_q + first + r)].m;
    } else {
      std::vector<std::int64_t> region;
      for (std::int64_t j = 0; j < keys.sink_end; ++j) region.push_back(j);
      for (std::int64_t j = win.begin; j < win.end; ++j) region.push_back(j);
      RowMatrix kr(static_cast<Eigen::Index>(region.size()), d);
      for (std::size_t c2 = 0; c2 < region.size(); ++c2)
        load_row(k, row_offset(k, p, false, b, hkv, region[c2]), d, kr.row(static_cast<Eigen::Index>(c2)).data());
      const Eigen::Map<const RowMatrix> qm(qg.data(), rows_in_group, d);
      RowMatrix scores = qm * kr.transpose();
      std::vector<float> w(region.size());
      for (std::int64_t r = 0; r < rows_in_group; ++r) {
        const AnchorRegion own = anchor_attn::row_anchor_region(c.n_sink, win, p.visible_keys(b, first + r));
        float* x = scores.row(r).data();
        for (std::size_t c2 = 0; c2 < region.size(); ++c2) x[c2] = own.contains(region[c2]) ? x[c2] * sl : -INFINITY;
        AnchorStats st;
        if (!region.empty()) OnlineSoftmax::update(st, x, static_cast<int>(region.size()), w.data());
        anchor[static_cast<std::size_t>(r)] = st.m;
        out.anchors[static_cast<std::size_t>(bh * p.seqlen_q + first + r)] = st;
      }
    }

    // Pooled blocks: mean query and mean anchor (fp32, sequential, true counts).
    const std::int64_t blocks = (rows_in_group + c.block - 1) / c.block;
    std::vector<float> qbar(static_cast<std::size_t>(blocks * d)), abar(static_cast<std::size_t>(blocks));
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      const std::int64_t count = std::min<std::int64_t>(c.block, rows_in_group - blk * c.block);
      mean_rows(qg.data() + blk * c.block * d, count, d, qbar.data() + blk * d);
      mean_rows(anchor.data() + blk * c.block, count, 1, abar.data() + blk);
    }

    // Stripes: candidate j is kept when some pooled block has q̄·k_j·scale + θ >= ā (base 2).
    auto& row = rows[static_cast<std::size_t>((b * p.heads_q + h) * tq + t)];
    for (std::int64_t j = 0; j < keys.sink_end; ++j) row.push_back(static_cast<std::int32_t>(j));
    std::int64_t cand = 0, sel = 0;
    auto consider = [&](std::int64_t j) {
      ++cand;
      const float* kj = key(j);
      if (margins) {  // every pooled block's margin, then the same decision as below (any block selects)
        float best = -INFINITY;
        bool keep = false;
        for (std::int64_t blk = 0; blk < blocks; ++blk) {
          const float s = anchor_attn::stripe_score(qbar.data() + blk * d, kj, static_cast<int>(d), sl);
          best = std::max(best, anchor_attn::stripe_margin(s, theta2, abar[static_cast<std::size_t>(blk)]));
          keep = keep || anchor_attn::stripe_selected(s, theta2, abar[static_cast<std::size_t>(blk)]);
        }
        (*margins)[static_cast<std::size_t>(task * p.seqlen_kv + j)] = best;
        if (keep) row.push_back(static_cast<std::int32_t>(j)), ++sel;
        return;
      }
      for (std::int64_t blk = 0; blk < blocks; ++blk)
        if (anchor_attn::stripe_selected(anchor_attn::stripe_score(qbar.data() + blk * d, kj, static_cast<int>(d), sl), theta2,
                                         abar[static_cast<std::size_t>(blk)])) {
          row.push_back(static_cast<std::int32_t>(j));
          ++sel;
          return;
        }
    };
    for (std::int64_t j = keys.sink_end; j < keys.candidates_end; ++j) consider(j);
    for (std::int64_t j = win.begin; j < win.end; ++j) row.push_back(static_cast<std::int32_t>(j));
    for (std::int64_t j = keys.after_begin; j < nkv; ++j) consider(j);
    candidates += cand;
    selected += sel;
  });
  out.mask = TileMask::from_rows(shape, std::move(rows));
  out.candidates = candidates.load();
  out.selected = selected.load();
  return out;
}

}  // namespace

AnchorEstimate anchor_attn_estimate(const Problem& p, const TensorView& q, const TensorView& k,
                                    const anchor_attn::Config& c) {
  return estimate(p, q, k, c, nullptr, nullptr);
}

AnchorEstimate anchor_attn_select(const Problem& p, const TensorView& q, const TensorView& k,
                                  const anchor_attn::Config& c, const std::vector<AnchorStats>& anchors,
                                  std::vector<float>* margins) {
  return estimate(p, q, k, c, &anchors, margins);
}

}  // namespace spattn::reference
