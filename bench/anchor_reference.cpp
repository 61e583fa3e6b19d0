// AnchorAttention on the CPU reference: density, accuracy, recall of attention mass and estimation cost on
// the `llm` workload. Prints the markdown table of bench/results/anchor-reference.md.
//   ./spattn_bench_anchor [heads=2] N...
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "spattn/metrics.hpp"
#include "spattn/reference/anchor_attn.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

using namespace spattn;
using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  const std::int64_t heads = argc > 1 ? std::atoll(argv[1]) : 2;
  std::vector<std::int64_t> lengths;
  for (int i = 2; i < argc; ++i) lengths.push_back(std::atoll(argv[i]));
  if (lengths.empty()) lengths = {8192, 32768};
  std::printf("| N | θ | density (kept / causal keys) | stripes kept / candidates | rel L1 | recall of attention mass | "
              "estimate / dense |\n|---|---|---|---|---|---|---|\n");
  for (std::int64_t n : lengths) {
    WorkloadSpec spec;
    spec.kind = WorkloadKind::llm;
    spec.seqlen = n;
    spec.heads_q = heads;
    spec.heads_kv = 1;
    spec.head_dim = 128;
    spec.seed = 1;
    const Workload w = make_workload(spec);
    const Problem& p = w.problem;
    HostTensor dense(DType::f32, 1, heads, n, 128), out = dense;
    std::vector<float> lse_dense(static_cast<std::size_t>(heads * n)), lse(lse_dense.size());
    AttendOptions with_lse;
    with_lse.lse = lse_dense.data();
    auto t0 = Clock::now();
    attend_dense(p, w.q.view(), w.k.view(), w.v.view(), dense.view(), with_lse);
    const double dense_ms = ms_since(t0);
    const std::vector<float> ref = dense.to_float();
    for (float theta : {8.0f, 10.0f, 12.0f, 14.0f}) {
      anchor_attn::Config cfg;
      cfg.theta = theta;
      t0 = Clock::now();
      const auto est = reference::anchor_attn_estimate(p, w.q.view(), w.k.view(), cfg);
      const double est_ms = ms_since(t0);
      with_lse.lse = lse.data();
      attend(p, w.q.view(), w.k.view(), w.v.view(), est.mask, out.view(), with_lse);
      const std::vector<float> got = out.to_float();
      const double rel_l1_err = spattn::rel_l1(got, ref);
      double recall = 0;
      for (std::size_t i = 0; i < lse.size(); ++i) recall += std::exp(double(lse[i]) - double(lse_dense[i]));  // Σ_kept p_ij
      std::printf("| %lld | %.0f | %.4f | %lld / %lld | %.2e | %.5f | %.3f |\n", static_cast<long long>(n), double(theta),
                  est.mask.stats().pair_density, static_cast<long long>(est.selected), static_cast<long long>(est.candidates),
                  rel_l1_err, recall / double(lse.size()), est_ms / dense_ms);
      std::fflush(stdout);
    }
  }
  return 0;
}
