// SALE on the CPU reference: density, error, Err(τ) and estimation cost, int4 and int8, the paper's example
// τ = 0.004 and τ calibrated (θ = 0.4) on a separate 4K sample. Prints bench/results/sale-reference.md's table.
//   ./spattn_bench_sale
#include <chrono>
#include <cmath>
#include <cstdio>

#include "spattn/metrics.hpp"
#include "spattn/reference/sale.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

using namespace spattn;
using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

int main() {
  std::printf("| N | bits | τ | density | rel L1 | Err(τ) = ‖O − O_dense‖₁ / N per head | estimate / dense |\n"
              "|---|---|---|---|---|---|---|\n");
  for (std::int64_t n : {8192, 32768}) {
    WorkloadSpec spec;
    spec.seqlen = n;
    spec.heads_q = 2;
    spec.heads_kv = 1;
    spec.head_dim = 128;
    spec.seed = 1;
    const Workload w = make_workload(spec);
    const Problem& p = w.problem;
    HostTensor dense(DType::f32, 1, 2, n, 128), out = dense;
    auto t0 = Clock::now();
    attend_dense(p, w.q.view(), w.k.view(), w.v.view(), dense.view());
    const double dense_ms = ms_since(t0);
    const std::vector<float> ref = dense.to_float();
    WorkloadSpec cal = spec;
    cal.seqlen = 4096;
    cal.seed = 100;
    for (int bits : {4, 8}) {
      sale::Config base;
      base.bits = bits;
      const Workload sample = make_workload(cal);
      CalibrationTargets targets;
      targets.sale_theta = 0.4f;
      const sale::Params tuned =
          std::get<sale::Params>(calibrate(base, {{sample.problem, sample.q.view(), sample.k.view(), sample.v.view()}}, targets));
      for (int variant = 0; variant < 2; ++variant) {
        sale::Config cfg = base;
        if (variant == 1) cfg.tau = tuned.tau;
        t0 = Clock::now();
        const auto est = reference::sale_estimate(p, w.q.view(), w.k.view(), cfg);
        const double est_ms = ms_since(t0);
        attend(p, w.q.view(), w.k.view(), w.v.view(), est.mask, out.view());
        const std::vector<float> got = out.to_float();
        const spattn::OutputError err = spattn::output_error(got, ref);
        char tau[64];
        if (variant == 0) std::snprintf(tau, sizeof tau, "0.004");
        else std::snprintf(tau, sizeof tau, "calibrated (%g, %g)", double(tuned.tau[0]), double(tuned.tau[1]));
        std::printf("| %lld | %d | %s | %.4f | %.2e | %.3f | %.3f |\n", static_cast<long long>(n), bits, tau,
                    est.mask.stats().density, err.rel_l1, err.l1 / double(n) / 2.0, est_ms / dense_ms);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
