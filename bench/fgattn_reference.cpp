// FG-Attn on the CPU reference: mask density before and after merging into 128-row work items, accuracy
// and estimation cost, on the `video` workload. Prints the markdown table of bench/results/fgattn-reference.md.
//   ./spattn_bench_fgattn [seqlen=16384] [heads=2]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "spattn/methods/fg_attn.hpp"
#include "spattn/metrics.hpp"
#include "spattn/reference/fg_attn.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

using namespace spattn;
using Clock = std::chrono::steady_clock;

static double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  WorkloadSpec spec;
  spec.kind = WorkloadKind::video;
  spec.seqlen = argc > 1 ? std::atoll(argv[1]) : 16384;
  spec.heads_q = argc > 2 ? std::atoll(argv[2]) : 2;
  spec.heads_kv = 1;
  spec.head_dim = 128;
  spec.seed = 1;
  const Workload w = make_workload(spec);
  const Problem& p = w.problem;
  HostTensor dense(DType::f32, 1, p.heads_q, p.seqlen_q, p.head_dim), out = dense;
  auto t0 = Clock::now();
  attend_dense(p, w.q.view(), w.k.view(), w.v.view(), dense.view());
  const double dense_ms = ms_since(t0);
  const std::vector<float> ref = dense.to_float();
  std::printf("video workload: %s, dense attention %.1f ms\n\n", p.describe().c_str(), dense_ms);
  std::printf("| tile | p | density | after merge-XOR | after consecutive | redundant load XOR / consecutive | rel L1 | "
              "estimate / dense |\n|---|---|---|---|---|---|---|---|\n");
  for (auto [m, n] : {std::pair{16, 16}, {32, 32}, {64, 64}, {128, 32}})
    for (float top_p : {0.8f, 0.9f, 0.95f}) {
      fg_attn::Config cfg;
      cfg.tile_q = m;
      cfg.tile_k = n;
      cfg.top_p = top_p;
      t0 = Clock::now();
      const TileMask mask = reference::fg_attn_estimate(p, w.q.view(), w.k.view(), cfg);
      const double est_ms = ms_since(t0);
      const fg_attn::MergePlan x = fg_attn::merge_plan(mask, cfg);
      cfg.merge = fg_attn::Merge::consecutive;
      const fg_attn::MergePlan c = fg_attn::merge_plan(mask, cfg);
      attend(p, w.q.view(), w.k.view(), w.v.view(), mask, out.view());
      const std::vector<float> got = out.to_float();
      const double rel_l1_err = spattn::rel_l1(got, ref);
      std::printf("| %dx%d | %.2f | %.3f | %.3f | %.3f | %.2f / %.2f | %.4f | %.4f |\n", m, n, double(top_p),
                  x.density_before, x.density_after, c.density_after, x.redundant_load, c.redundant_load, rel_l1_err,
                  est_ms / dense_ms);
      std::fflush(stdout);
    }
  return 0;
}
