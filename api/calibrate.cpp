// calibrate(): per-head parameter searches of SpargeAttn and SALE and the main-knob search of the other methods,
// every estimate and attend through the
// dispatcher (so any backend that covers the samples runs them: samples in device memory calibrate on that device,
// their outputs in device scratch from the backend that owns the memory, read back to compare on the host).
#include <cmath>
#include <memory>
#include <string>

#include "spattn/error.hpp"
#include "spattn/metrics.hpp"
#include "spattn/spattn.hpp"
#include "spattn/tensor.hpp"

namespace spattn {
namespace {

/// An f32 [B, Hq, Nq, Dv] output of problem p in the samples' memory: a host tensor, or device memory of the backend
/// that owns that memory (Backend::allocate; read back with Backend::download to compare on the host).
class SliceOutput {
 public:
  SliceOutput(const Problem& p, Memory memory)
      : host_(DType::f32, p.batch, p.heads_q, p.seqlen_q, p.dim_v()), memory_(memory) {
    if (memory == Memory::host) return;
    for (const auto& be : backends())
      if ((device_ = be->allocate(memory, host_.size_bytes())) != nullptr) {
        owner_ = be.get();
        return;
      }
    fail("calibrate: the samples are in ", to_string(memory), " memory, and no backend in this build allocates it");
  }
  TensorView view() {
    TensorView v = host_.view();
    if (device_ != nullptr) {
      v.data = device_.get();
      v.memory = memory_;
    }
    return v;
  }
  std::vector<float> to_float() {
    if (device_ != nullptr && !owner_->download(memory_, host_.data(), device_.get(), host_.size_bytes()))
      fail("calibrate: backend '", owner_->name(), "' could not copy its ", to_string(memory_), " memory to the host");
    return host_.to_float();
  }

 private:
  HostTensor host_;
  Memory memory_;
  const Backend* owner_ = nullptr;
  std::shared_ptr<void> device_;
};

/// One query head of a sample as a single-head problem (views point into the sample's tensors), with the dense
/// output it is measured against and the buffer each estimate → attend writes.
struct Slice {
  Problem p;
  TensorView q, k, v;
  std::vector<float> dense;
  std::unique_ptr<SliceOutput> out;
};

std::vector<Slice> slices_of(const std::vector<Sample>& samples, std::int64_t h, const CalibrationTargets& t) {
  std::vector<Slice> out;
  for (const Sample& w : samples) {
    Slice s;
    s.p = w.problem;
    s.p.heads_q = s.p.heads_kv = 1;
    s.q = w.q.head(h);
    s.k = w.k.head(w.problem.kv_head_of(h));
    s.v = w.v.head(w.problem.kv_head_of(h));
    s.out = std::make_unique<SliceOutput>(s.p, w.q.memory);
    AttendOptions opt;
    opt.backend = t.backend;
    attend_dense(s.p, s.q, s.k, s.v, s.out->view(), opt);
    s.dense = s.out->to_float();
    out.push_back(std::move(s));
  }
  return out;
}

void check_samples(const std::vector<Sample>& samples) {
  require(!samples.empty(), "calibrate: no calibration inputs");
  const Problem& p0 = samples[0].problem;
  const Memory memory = samples[0].q.memory;
  for (const Sample& w : samples) {
    require(w.problem.heads_q == p0.heads_q && w.problem.heads_kv == p0.heads_kv && w.problem.head_dim == p0.head_dim,
            "calibrate: every input needs the same heads and head_dim as the first (", p0.describe(), ")");
    require(!w.problem.varlen(), "calibrate: variable-length samples are not supported; pass one sample per sequence");
    for (const TensorView* v : {&w.q, &w.k, &w.v})
      require(v->memory == memory, "calibrate: every sample tensor must be in one memory (the first sample's q is in ",
              to_string(memory), " memory, another tensor in ", to_string(v->memory), " memory)");
    w.problem.validate(w.q, w.k);
  }
}

/// One slice estimated with `config` and attended over its mask (PV-skip at pv_threshold), through the dispatcher.
struct SliceRun {
  std::vector<float> out;
  TileMask::Stats mask;
  AttendStats stats;
};
SliceRun run_slice(const Slice& s, const MethodConfig& config, float pv_threshold, const CalibrationTargets& t) {
  EstimateOptions eo;
  eo.backend = t.backend;
  const TileMask mask = estimate(config, s.p, s.q, s.k, eo).mask;
  AttendOptions opt;
  opt.backend = t.backend;
  opt.pv_threshold = pv_threshold;
  SliceRun r;
  r.stats = attend(s.p, s.q, s.k, s.v, mask, s.out->view(), opt);
  r.mask = mask.stats();
  r.out = s.out->to_float();
  return r;
}

struct Eval {
  double worst_l1 = 0.0, sparsity = 0.0;
};

Eval evaluate(const std::vector<Slice>& slices, const sparge::Config& cfg, float pv_threshold, const CalibrationTargets& t) {
  Eval e;
  double executed = 0, reachable = 0;
  for (const Slice& s : slices) {
    const SliceRun r = run_slice(s, cfg, pv_threshold, t);
    executed += static_cast<double>(r.mask.kept_tiles - r.stats.pv_skipped);
    reachable += static_cast<double>(r.mask.reachable_tiles);
    e.worst_l1 = std::max(e.worst_l1, rel_l1(r.out, s.dense));
  }
  e.sparsity = reachable > 0 ? 1.0 - executed / reachable : 0.0;
  return e;
}

sparge::Params calibrate_sparge(const sparge::Config& base, const std::vector<Sample>& samples, const CalibrationTargets& t) {
  require_in("calibrate l1", t.l1, Interval<float>{0.0f, INFINITY, true, true});
  require(t.l2 >= t.l1, "calibrate: need l1 <= l2, got l1 = ", t.l1, ", l2 = ", t.l2);
  require_in("calibrate theta_steps", t.theta_steps, Interval<int>{1, 256});
  sparge::Params params;
  params.block_q = base.block_q;
  params.block_k = base.block_k;
  params.l1 = t.l1;
  params.l2 = t.l2;
  const std::int64_t heads = samples[0].problem.heads_q;
  for (std::int64_t h = 0; h < heads; ++h) {
    const std::vector<Slice> slices = slices_of(samples, h, t);
    sparge::HeadParams best;
    best.dense = true;
    best.sparsity = -1.0;
    for (int step = 0; step < t.theta_steps; ++step) {
      const float theta = -1.0f + 2.0f * static_cast<float>(step) / static_cast<float>(t.theta_steps);
      if (t.progress)
        t.progress((static_cast<double>(h) + static_cast<double>(step) / t.theta_steps) / static_cast<double>(heads),
                   "head " + std::to_string(h + 1) + "/" + std::to_string(heads));
      sparge::Config cfg;
      cfg.block_q = base.block_q;
      cfg.block_k = base.block_k;
      cfg.attention_sink = base.attention_sink;
      cfg.topk = 0.0f;  // the search is over τ (TopCdf)
      cfg.theta = {theta};
      // τ: smallest passing value (larger τ keeps more blocks, lowering the error).
      float lo = 0.0f, hi = 1.0f, tau_ok = NAN;
      cfg.tau = {1.0f};
      if (!(evaluate(slices, cfg, INFINITY, t).worst_l1 < t.l1)) continue;  // even τ = 1 fails at this θ
      tau_ok = 1.0f;
      while (hi - lo > 0.01f) {
        const float mid = 0.5f * (lo + hi);
        cfg.tau = {mid};
        if (evaluate(slices, cfg, INFINITY, t).worst_l1 < t.l1) hi = tau_ok = mid;
        else lo = mid;
      }
      cfg.tau = {tau_ok};
      // PV-skip threshold: smallest passing value (a larger threshold skips less).
      float t_lo = 0.0f, t_hi = 50.0f, t_ok = INFINITY;
      if (evaluate(slices, cfg, 50.0f, t).worst_l1 < t.l2) {
        t_ok = 50.0f;
        while (t_hi - t_lo > 0.5f) {
          const float mid = 0.5f * (t_lo + t_hi);
          if (evaluate(slices, cfg, mid, t).worst_l1 < t.l2) t_hi = t_ok = mid;
          else t_lo = mid;
        }
      }
      const Eval e = evaluate(slices, cfg, t_ok, t);
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
  if (t.progress) t.progress(1.0, "done");
  return params;
}

sale::Params calibrate_sale(const sale::Config& base, const std::vector<Sample>& samples, const CalibrationTargets& t) {
  require_in("calibrate theta", t.sale_theta, Interval<float>{0.0f, INFINITY, true, true});
  sale::Params params;
  params.bits = base.bits;
  params.groups = base.groups;
  params.local_window = base.local_window;
  params.theta = t.sale_theta;
  const std::int64_t heads = samples[0].problem.heads_q;
  for (std::int64_t h = 0; h < heads; ++h) {
    const std::vector<Slice> slices = slices_of(samples, h, t);
    float tau = 0.008f;
    while (tau > 0.0f) {
      if (t.progress) t.progress(static_cast<double>(h) / static_cast<double>(heads), "head " + std::to_string(h + 1));
      bool ok = true;
      for (const Slice& s : slices) {
        sale::Config cfg = base;
        cfg.tau = {tau};
        const double err = output_error(run_slice(s, cfg, INFINITY, t).out, s.dense).l1;  // Err(τ) = ‖O − O_dense‖₁ / N
        if (!(err / static_cast<double>(s.p.seqlen_q) < t.sale_theta)) ok = false;
      }
      if (ok) break;
      tau *= 0.5f;
      if (tau <= 1e-4f) tau = 0.0f;
    }
    params.tau.push_back(tau);
  }
  if (t.progress) t.progress(1.0, "done");
  return params;
}

/// Head h's elements of an f32 [B, H, N, Dv] output, in element order (batch, row, column).
std::vector<float> head_of(const std::vector<float>& o, const Problem& p, std::int64_t h) {
  const std::size_t row = static_cast<std::size_t>(p.seqlen_q * p.dim_v());
  std::vector<float> out;
  out.reserve(row * static_cast<std::size_t>(p.batch));
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const auto first = o.begin() + static_cast<std::ptrdiff_t>((b * p.heads_q + h) * static_cast<std::int64_t>(row));
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(row));
  }
  return out;
}

KnobParams calibrate_knob(const MethodConfig& base, const std::vector<Sample>& samples, const CalibrationTargets& t) {
  require_in("calibrate rel_l1", t.rel_l1, Interval<float>{0.0f, INFINITY, true, true});
  const Option* knob = main_knob(option_table(base));
  require(knob != nullptr, "calibrate: method '", method_name(base), "' has no main knob in its option table");
  KnobParams best;
  best.method = std::string(method_name(base));
  best.option = std::string(knob->name);
  std::visit(
      [&](const auto& c) {
        for (const Option& o : option_table(c).options)
          if (o.by_name && o.field.count(&c) == 1) best.base.push_back({std::string(o.name), o.field.get(&c, 0)});
      },
      base);
  best.dense = true;
  best.bound = t.rel_l1;
  // Every sample whole (all heads: BFLA's masks are per KV head), with its dense output.
  struct Whole {
    const Sample* sample;
    std::vector<float> dense;
    std::unique_ptr<SliceOutput> out;
  };
  std::vector<Whole> wholes;
  AttendOptions opt;
  opt.backend = t.backend;
  for (const Sample& w : samples) {
    Whole x{&w, {}, std::make_unique<SliceOutput>(w.problem, w.q.memory)};
    attend_dense(w.problem, w.q, w.k, w.v, x.out->view(), opt);
    x.dense = x.out->to_float();
    wholes.push_back(std::move(x));
  }
  const std::int64_t heads = samples[0].problem.heads_q;
  for (std::size_t i = 0; i < knob->sweep.size(); ++i) {
    if (t.progress)
      t.progress(static_cast<double>(i) / static_cast<double>(knob->sweep.size()),
                 best.option + " " + std::to_string(knob->sweep[i]));
    MethodConfig c = base;
    const NamedValue setting{best.option, knob->sweep[i]};
    set_options(c, {&setting, 1}, UnknownOptions::error);
    double worst = 0.0, kept = 0.0, reachable = 0.0;
    for (Whole& x : wholes) {
      const Sample& w = *x.sample;
      const SparseAttentionResult r = sparse_attention(c, w.problem, w.q, w.k, w.v, x.out->view(), opt);
      const TileMask::Stats stats = r.estimate.mask.stats();
      kept += static_cast<double>(stats.kept_tiles);
      reachable += static_cast<double>(stats.reachable_tiles);
      const std::vector<float> got = x.out->to_float();
      for (std::int64_t h = 0; h < heads; ++h) {
        const double e = rel_l1(head_of(got, w.problem, h), head_of(x.dense, w.problem, h));
        worst = std::isnan(e) ? e : std::max(worst, e);  // NaN never passes
      }
    }
    const double density = reachable > 0 ? kept / reachable : 1.0;
    if (worst <= t.rel_l1 && (best.dense || density < best.density)) {
      best.dense = false;
      best.value = knob->sweep[i];
      best.worst_rel_l1 = worst;
      best.density = density;
    }
  }
  if (t.progress) t.progress(1.0, "done");
  return best;
}

}  // namespace

MethodConfig config_of(const Calibration& calibration) {
  return std::visit([](const auto& params) -> MethodConfig { return params.config(); }, calibration);
}

Calibration calibrate(const MethodConfig& base, const std::vector<Sample>& samples, const CalibrationTargets& targets) {
  check_samples(samples);
  validate(base, samples[0].problem);
  if (const auto* s = std::get_if<sparge::Config>(&base)) return calibrate_sparge(*s, samples, targets);
  if (const auto* s = std::get_if<sale::Config>(&base)) return calibrate_sale(*s, samples, targets);
  require(!std::holds_alternative<DenseConfig>(base), "calibrate: method 'dense' has nothing to calibrate");
  return calibrate_knob(base, samples, targets);
}

}  // namespace spattn
