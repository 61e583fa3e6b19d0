#include "spattn/reference/sparge_tuner.hpp"

#include <cmath>

#include "spattn/error.hpp"
#include "spattn/reference/executor.hpp"
#include "spattn/reference/sparge.hpp"
#include "tensor_rows.hpp"

namespace spattn::reference {
namespace {

/// One query head of a sample as a single-head problem (views point into the sample's tensors).
struct Slice {
  Problem p;
  TensorView q, k, v;
  std::vector<float> dense;
};

double rel_l1(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) diff += std::fabs(double(got[i]) - want[i]), norm += std::fabs(double(want[i]));
  return norm > 0 ? diff / norm : diff;
}

struct Eval {
  double worst_l1 = 0.0, sparsity = 0.0;
};

Eval evaluate(std::vector<Slice>& slices, const sparge::Config& cfg, float pv_threshold) {
  Eval e;
  double executed = 0, reachable = 0;
  for (Slice& s : slices) {
    const TileMask mask = sparge_estimate(s.p, s.q, s.k, cfg).mask;
    HostTensor o(DType::f32, 1, 1, s.p.seqlen_q, s.p.dim_v());
    AttendOptions opt;
    opt.pv_threshold = pv_threshold;
    const AttendStats st = attend(s.p, s.q, s.k, s.v, mask, o.view(), opt);
    const auto ms = mask.stats();
    executed += static_cast<double>(ms.kept_tiles - st.pv_skipped);
    reachable += static_cast<double>(ms.reachable_tiles);
    e.worst_l1 = std::max(e.worst_l1, rel_l1(o.to_float(), s.dense));
  }
  e.sparsity = reachable > 0 ? 1.0 - executed / reachable : 0.0;
  return e;
}

}  // namespace

sparge::Params sparge_calibrate(const std::vector<Workload>& samples, const SpargeTuneOptions& opt) {
  require(!samples.empty(), "calibrate: no calibration inputs");
  require(opt.l1 > 0.0f && opt.l2 >= opt.l1, "calibrate: need 0 < l1 <= l2, got l1 = ", opt.l1, ", l2 = ", opt.l2);
  require(opt.theta_steps >= 1 && opt.theta_steps <= 256, "calibrate: theta_steps must be in [1, 256], got ",
          opt.theta_steps);
  const Problem& p0 = samples[0].problem;
  for (const Workload& w : samples)
    require(w.problem.heads_q == p0.heads_q && w.problem.heads_kv == p0.heads_kv && w.problem.head_dim == p0.head_dim,
            "calibrate: every input needs the same heads and head_dim as the first (", p0.describe(), ")");
  sparge::Params params;
  params.block_q = opt.block_q;
  params.block_k = opt.block_k;
  params.l1 = opt.l1;
  params.l2 = opt.l2;
  const std::int64_t heads = p0.heads_q;
  for (std::int64_t h = 0; h < heads; ++h) {
    std::vector<Slice> slices;
    for (const Workload& w : samples) {
      Slice s;
      s.p = w.problem;
      s.p.heads_q = s.p.heads_kv = 1;
      s.p.batch = 1;
      s.q = head_view(w.q, h);
      s.k = head_view(w.k, w.problem.kv_head_of(h));
      s.v = head_view(w.v, w.problem.kv_head_of(h));
      HostTensor dense(DType::f32, 1, 1, s.p.seqlen_q, s.p.dim_v());
      attend(s.p, s.q, s.k, s.v, TileMask::dense(MaskShape::of(s.p, opt.block_q, opt.block_k)), dense.view());
      s.dense = dense.to_float();
      slices.push_back(std::move(s));
    }
    sparge::HeadParams best;
    best.dense = true;
    best.sparsity = -1.0;
    for (int step = 0; step < opt.theta_steps; ++step) {
      const float theta = -1.0f + 2.0f * static_cast<float>(step) / static_cast<float>(opt.theta_steps);
      if (opt.progress)
        opt.progress((static_cast<double>(h) + static_cast<double>(step) / opt.theta_steps) / static_cast<double>(heads),
                     "head " + std::to_string(h + 1) + "/" + std::to_string(heads));
      sparge::Config cfg;
      cfg.block_q = opt.block_q;
      cfg.block_k = opt.block_k;
      cfg.theta = {theta};
      // τ: smallest passing value (larger τ keeps more blocks, lowering the error).
      float lo = 0.0f, hi = 1.0f, tau_ok = NAN;
      cfg.tau = {1.0f};
      if (!(evaluate(slices, cfg, INFINITY).worst_l1 < opt.l1)) continue;  // even τ = 1 fails at this θ
      tau_ok = 1.0f;
      while (hi - lo > 0.01f) {
        const float mid = 0.5f * (lo + hi);
        cfg.tau = {mid};
        if (evaluate(slices, cfg, INFINITY).worst_l1 < opt.l1) hi = tau_ok = mid;
        else lo = mid;
      }
      cfg.tau = {tau_ok};
      // PV-skip threshold: smallest passing value (a larger threshold skips less).
      float t_lo = 0.0f, t_hi = 50.0f, t_ok = INFINITY;
      if (evaluate(slices, cfg, 50.0f).worst_l1 < opt.l2) {
        t_ok = 50.0f;
        while (t_hi - t_lo > 0.5f) {
          const float mid = 0.5f * (t_lo + t_hi);
          if (evaluate(slices, cfg, mid).worst_l1 < opt.l2) t_hi = t_ok = mid;
          else t_lo = mid;
        }
      }
      const Eval e = evaluate(slices, cfg, t_ok);
      if (e.sparsity > best.sparsity) {
        best.theta = theta;
        best.tau = tau_ok;
        best.pv_threshold = t_ok;
        best.sparsity = e.sparsity;
        best.rel_l1 = e.worst_l1;
        best.dense = false;
      }
      if (e.sparsity < 0.1) break;
    }
    if (best.dense || best.sparsity <= 0.1) {  // not worth it: dense (exact, zero error)
      best = sparge::HeadParams{};
      best.dense = true;
    }
    params.heads.push_back(best);
  }
  if (opt.progress) opt.progress(1.0, "done");
  return params;
}

}  // namespace spattn::reference
