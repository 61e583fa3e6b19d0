// CPU reference throughput against the machine's Eigen GEMM rate (PERF.md: dense attention within 2× of
// the GEMM rate for the same FLOPs). Attention FLOPs are counted as 4·N²·D per head (QKᵀ and PV,
// non-causal; half that when causal); the GEMM is M = N, N = N, K = D, i.e. one of those two products.
// GEMM arguments {M, N, K}: the attention-shaped product, a large square one, and one executor tile.
// Attention arguments: {N, threads}. Counters: GFLOP/s.
//   ./spattn_bench_reference --benchmark_filter=. --benchmark_min_time=1
#include <benchmark/benchmark.h>
#include <tbb/global_control.h>

#include <Eigen/Core>
#include <random>

#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace {

constexpr std::int64_t kDim = 128;

/// C[m×n] = A[m×k]·B[n×k]ᵀ, single thread (Eigen does not thread here), output touched before timing.
void BM_EigenGemm(benchmark::State& state) {
  const auto m = state.range(0), n = state.range(1), k = state.range(2);
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M a = M::Random(m, k), b = M::Random(n, k), c = M::Zero(m, n);
  for (auto _ : state) {
    c.noalias() = a * b.transpose();
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(m) * double(n) * double(k) * double(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void attention(benchmark::State& state, bool causal) {
  const auto n = state.range(0);
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(state.range(1)));
  spattn::WorkloadSpec spec;
  spec.kind = spattn::WorkloadKind::random;
  spec.seqlen = n;
  spec.head_dim = kDim;
  spec.dtype = spattn::DType::f32;
  spattn::Workload w = spattn::make_workload(spec);
  w.problem.causal = causal;
  spattn::HostTensor o(spattn::DType::f32, 1, 1, n, kDim);
  for (auto _ : state) {
    spattn::attend_dense(w.problem, w.q.view(), w.k.view(), w.v.view(), o.view());
    benchmark::DoNotOptimize(o.data());
  }
  const double flops = 4.0 * double(n) * double(n) * kDim * (causal ? 0.5 : 1.0);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * double(state.iterations()), benchmark::Counter::kIsRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_DenseAttention(benchmark::State& state) { attention(state, false); }
void BM_DenseAttentionCausal(benchmark::State& state) { attention(state, true); }

BENCHMARK(BM_EigenGemm)
    ->Args({8192, 8192, kDim})
    ->Args({2048, 2048, 2048})
    ->Args({128, 256, kDim})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK(BM_DenseAttention)->Args({8192, 1})->Args({8192, 2})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_DenseAttentionCausal)->Args({8192, 1})->Args({8192, 2})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
