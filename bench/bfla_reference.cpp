// BFLA on the CPU reference: density, accuracy and estimation cost on the `llm` workload, prefill and
// chunked prefill. Prints the markdown table of bench/results/bfla-reference.md.
//   ./spattn_bench_bfla [heads=4] N...
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "spattn/metrics.hpp"
#include "spattn/reference/bfla.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

using namespace spattn;
using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  const std::int64_t heads = argc > 1 ? std::atoll(argv[1]) : 4;
  std::vector<std::int64_t> lengths;
  for (int i = 2; i < argc; ++i) lengths.push_back(std::atoll(argv[i]));
  if (lengths.empty()) lengths = {8192, 32768};
  std::printf("| N | queries | γ | η | density (tiles) | pair density | rel L1 | estimate / dense |\n"
              "|---|---|---|---|---|---|---|---|\n");
  for (std::int64_t n : lengths)
    for (std::int64_t nq : {n, n / 4 + 100}) {  // prefill, and a chunk whose offset is not a multiple of b
      WorkloadSpec spec;
      spec.kind = WorkloadKind::llm;
      spec.seqlen = n;
      spec.seqlen_q = nq;
      spec.heads_q = heads;
      spec.heads_kv = heads / 2;
      spec.head_dim = 128;
      spec.seed = 1;
      const Workload w = make_workload(spec);
      const Problem& p = w.problem;
      HostTensor dense(DType::f32, 1, heads, p.seqlen_q, 128), out = dense;
      auto t0 = Clock::now();
      attend_dense(p, w.q.view(), w.k.view(), w.v.view(), dense.view());
      const double dense_ms = ms_since(t0);
      const std::vector<float> ref = dense.to_float();
      for (float gamma : {0.95f, 0.99f})
        for (std::int64_t eta : {0, 16}) {
          bfla::Config cfg;
          cfg.gamma = gamma;
          cfg.eta = eta;
          t0 = Clock::now();
          const TileMask mask = reference::bfla_estimate(p, w.q.view(), w.k.view(), cfg);
          const double est_ms = ms_since(t0);
          attend(p, w.q.view(), w.k.view(), w.v.view(), mask, out.view());
          const std::vector<float> got = out.to_float();
          const double rel_l1_err = spattn::rel_l1(got, ref);
          const auto st = mask.stats();
          std::printf("| %lld | %lld | %.2f | %lld | %.4f | %.4f | %.2e | %.4f |\n", static_cast<long long>(n),
                      static_cast<long long>(p.seqlen_q), double(gamma), static_cast<long long>(eta), st.density,
                      st.pair_density, rel_l1_err, est_ms / dense_ms);
          std::fflush(stdout);
        }
    }
  return 0;
}
