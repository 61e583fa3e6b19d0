// GPU-only: every method's decision rules (core/include/spattn/methods/*.hpp, mask_policy.hpp, pooling.hpp,
// topcdf.hpp) are device-callable and give the same bits on the GPU as on the host — the premise of DESIGN.md
// §5.2/5.3 that a GPU estimator following the core's fixed-order arithmetic reproduces the reference's masks.
// One kernel evaluates each rule on random inputs; the host evaluates the same calls; results compare bitwise.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <algorithm>

#include "../common.hpp"
#include "estimator_kernels.cuh"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/methods/bfla.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/methods/sale.hpp"
#include "spattn/methods/sparge.hpp"
#include "spattn/pooling.hpp"
#include "spattn/topcdf.hpp"

namespace spattn::test {
namespace {

constexpr int kD = 128, kRows = 64, kOut = 32, kScratch = kRows + kD;

/// Every rule once for input set t; out[0..kOut) as raw 32-bit words (floats bit-cast, integers truncated).
__host__ __device__ void evaluate(const float* x, const float* y, int t, std::uint32_t* out, float* scratch) {
  auto f = [&](int i, float v) { out[i] = float_to_bits(v); };
  auto n = [&](int i, long long v) { out[i] = static_cast<std::uint32_t>(v); };
  const float sl = scale_log2(0.0883883476f);
  f(0, sparge::self_similarity(x, kRows, kD, scratch));
  f(1, sparge::pooled_score(x, y, kD, sl));
  n(2, sparge::topk_count(0.5f, 37 + t));
  const sparge::BlockRange diag = sparge::diagonal_blocks(128 * t, 128 * t + 127, 300, 64, 40);
  n(3, diag.first * 1000 + diag.last);
  mean_rows(x, kRows, kD, scratch);
  f(4, scratch[t % kD]);
  f(5, sale::dequantize(x[t], y[t], sale::bias_units(x[t + 1] * 100.0f, 0.013f)));
  n(6, sale::quant_code(x[t + 2] * 3.0f, 7.0f / 2.5f, 7) + 16 * sale::quant_code(y[t] * 50.0f, 127.0f / 90.0f, 127));
  SoftmaxState st;
  float w[kRows];
  OnlineSoftmax::update(st, x, kRows, w);
  f(7, sale::threshold(st, 0.004f, sl));
  n(8, sale::candidate_segments(40 + t, 4, 0.004f) * 100 + sale::k_group(t * 7 + 3, sale::Groups::thread) +
           sale::q_group(t * 5 + 9, sale::Groups::thread) + 3 * sale::k_group(t * 29 + 5, sale::Groups::block) +
           5 * sale::q_group(t * 11 + 1, sale::Groups::block));
  const AnchorRegion r = sale::sink_local_region(500 + 13 * t, 9);
  n(9, r.sink_end + r.local_begin * 3 + r.local_end * 7);
  const anchor_attn::GroupKeys g = anchor_attn::group_keys(128, 128, 2048, 2048 * (t % 3), 2048 * (t % 3) + 2047, 5000, 7000, t % 2 == 0);
  n(10, g.sink_end + g.local.begin * 3 + g.local.end * 5 + g.candidates_end * 7 + g.after_begin * 11);
  const AnchorRegion ar = anchor_attn::row_anchor_region(128, g.local, 3000 + t);
  n(11, ar.sink_end + ar.local_begin * 3 + ar.local_end * 7);
  f(12, anchor_attn::stripe_margin(anchor_attn::stripe_score(x, y, kD, sl), anchor_attn::theta_log2(12.0f), x[t]));
  f(13, fg_attn::pooled_logit(x, y, kD, sl) + fg_attn::tail_weight(1000 + t, 48, true));
  n(14, bfla::causal_blocks(t, 3000, 5000, 256, true) + 100 * bfla::local_blocks(8, 32, 256));
  const bfla::Band b = bfla::band(t, 3000, 5000, 256, 2);
  n(15, b.first * 1000 + b.last);
  n(16, bfla::topk_floor(3, 0.3f, 20 + t) + 100 * bfla::stride_rescued(t, 7, 3, 5) + 1000 * bfla::random_rescued(t, 9, 2, 3, 0.3f));
  f(17, selection_weight(x[t], 3.0f) + selection_weight(y[t], 2.0f) + selection_weight(x[t + 3], 1.0f));
  n(18, mask_policy::row_key_end<long long>(t * 37, 1000, 1500, true) + 3 * mask_policy::row_sees<int>(t, 700, 1000, 1500, true));
  const std::int32_t tiles[5] = {0, 3, 4, 9, 12};
  n(19, mask_policy::key_at<int>(tiles, 5, 64, 10 * t, 700) + 4096 * mask_policy::visited_tiles<int>(tiles, 5, 64, 300 + 20 * t));
  n(20, mask_policy::pv_row_votes_skip(x[t] * 30.0f, y[t] * 30.0f, 4.0f) + 2 * mask_policy::empty_row(x[t]));
  float sorted[kRows];
  for (int i = 0; i < kRows; ++i) sorted[i] = w[i];
  for (int i = 1; i < kRows; ++i)  // insertion sort in the core's selection order
    for (int j = i; j > 0 && selection_before(sorted[j], j, sorted[j - 1], j - 1); --j) {
      const float tmp = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = tmp;
    }
  n(21, top_cdf_count(sorted, kRows, 0.9f, 1, false) + 100 * top_cdf_count(sorted, kRows, 0.7f, 1, true));
  f(22, dot_lanes8(x, y, kD) - dot_sequential(x, y, kD));
  f(23, exp2_det(x[t] * 10.0f) + log2_det(1.0f + y[t] * y[t]));
  sale::GroupMax gm;
  for (int i = 0; i < 8; ++i) gm.add(static_cast<long long>(x[t + i] * 1000.0f), y[t + i] * 10.0f, i == 3 ? 0.0f : 0.01f, 0.02f);
  f(24, gm.estimate());
  const mask_policy::RowKeys<int> keys(t * 37, 1000, 1500, t % 2 == 0);
  n(25, keys.sees(t * 40) + 2 * keys.sees(-1) + 4 * keys.sees(1499) + 8 * keys.end);
  float block[2][3];  // dot_sequential_block: each chain dot_sequential's bits
  dot_sequential_block<2, 3>(x, kD, y, kD, kD, block);
  f(26, block[1][2]);
  n(27, float_to_bits(block[0][1]) == float_to_bits(dot_sequential(x, y + kD, kD)) ? 1 : 0);
  for (int i = 28; i < kOut; ++i) out[i] = 0;
}

__global__ void evaluate_kernel(const float* x, const float* y, int sets, std::uint32_t* out, float* scratch) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < sets) evaluate(x + t * kRows * kD, y + t * kRows * kD, t, out + t * kOut, scratch + t * kScratch);
}

TEST_CASE("core rules are device-callable and bit-identical on the GPU and the host") {
  constexpr int kSets = 40;
  std::vector<float> x(kSets * kRows * kD), y(x.size());
  for (auto& v : x) v = static_cast<float>(uniform(-2.0, 2.0));
  for (auto& v : y) v = static_cast<float>(uniform(-2.0, 2.0));
  for (int t = 0; t < kSets; t += 7)  // a zero block: the self-similarity guard
    std::memset(x.data() + t * kRows * kD, 0, kRows * kD * sizeof(float));
  std::vector<std::uint32_t> host(kSets * kOut), device(host.size());
  std::vector<float> scratch(kScratch);
  for (int t = 0; t < kSets; ++t) evaluate(x.data() + t * kRows * kD, y.data() + t * kRows * kD, t, host.data() + t * kOut, scratch.data());
  float *dx, *dy, *ds;
  std::uint32_t* dout;
  REQUIRE(cudaMalloc(&dx, x.size() * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&dy, y.size() * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&ds, kSets * kScratch * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&dout, device.size() * 4) == cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), y.size() * 4, cudaMemcpyHostToDevice);
  cudaMemset(dout, 0xff, device.size() * 4);
  evaluate_kernel<<<(kSets + 31) / 32, 32>>>(dx, dy, kSets, dout, ds);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  cudaMemcpy(device.data(), dout, device.size() * 4, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(ds);
  cudaFree(dout);
  int differ = 0;
  for (int t = 0; t < kSets; ++t)
    for (int i = 0; i < kOut; ++i)
      if (host[t * kOut + i] != device[t * kOut + i]) {
        ++differ;
        MESSAGE("set " << t << " rule " << i << ": host " << host[t * kOut + i] << " device " << device[t * kOut + i]);
      }
  CHECK(differ == 0);
}

/// detail::block_sort (the bitonic sort of BFLA's top-k floor) of keys in any arrangement, one block.
__global__ void sort_kernel(const std::uint64_t* in, int n, std::uint64_t* out) {
  extern __shared__ std::uint64_t keys[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) keys[i] = in[i];
  cuda::detail::block_sort(keys, n);
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = keys[i];
}

TEST_CASE("device block_sort equals std::sort (every power of two to 16384)") {
  std::uint64_t *din, *dout;
  REQUIRE(cudaMalloc(&din, 16384 * 8) == cudaSuccess);
  REQUIRE(cudaMalloc(&dout, 16384 * 8) == cudaSuccess);
  REQUIRE(cudaFuncSetAttribute(sort_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 16384 * 8) == cudaSuccess);
  int cases = 0;
  for (int n = 1; n <= 16384; n *= 2)
    for (const int threads : {128, 256}) {
      CAPTURE(n);
      CAPTURE(threads);
      // Selection keys of weights in [0, 1] (some repeated: ties broken by the index; some +0) and padding (kNoKey).
      std::vector<std::uint64_t> keys(static_cast<std::size_t>(n));
      for (int j = 0; j < n; ++j) {
        const float w = j % 5 == 0 ? 0.25f : j % 7 == 0 ? 0.0f : static_cast<float>(uniform(1e-6, 1.0));
        keys[static_cast<std::size_t>(j)] = uniform(0.0, 1.0) < 0.25 ? ~std::uint64_t{0} : selection_key(w, j);
      }
      std::shuffle(keys.begin(), keys.end(), rng());
      cudaMemcpy(din, keys.data(), keys.size() * 8, cudaMemcpyHostToDevice);
      cudaMemset(dout, 0xaa, keys.size() * 8);
      sort_kernel<<<1, threads, static_cast<std::size_t>(n) * 8>>>(din, n, dout);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      std::vector<std::uint64_t> got(keys.size());
      cudaMemcpy(got.data(), dout, got.size() * 8, cudaMemcpyDeviceToHost);
      std::sort(keys.begin(), keys.end());
      CHECK(got == keys);
      ++cases;
    }
  cudaFree(din);
  cudaFree(dout);
  MESSAGE("device block_sort: " << cases << " cases, n = 1 … 16384");
}

/// detail::top_cdf_select (k < 0) or detail::top_k_select (k >= 1) — the radix select without a sort — over n
/// select keys, one block of kThreads: keep[j] = 1 for the entries it emits (order checked: ascending, at = 0, 1, …),
/// whether the emit order and the returned count agree in keep[n].
template <int kThreads>
__global__ void select_kernel(const std::uint32_t* keys, int n, float tau, bool crossing, long long k, std::uint8_t* keep) {
  extern __shared__ std::uint32_t row[];
  __shared__ cuda::detail::RadixSelectShared<kThreads> shared;
  __shared__ std::uint32_t reduce[32];
  __shared__ int order_ok;
  if (threadIdx.x == 0) order_ok = 1;
  const std::uint32_t max_key = cuda::detail::store_select_keys(n, [&](int j) { return keys[j]; }, row, reduce);
  int* at_of = reinterpret_cast<int*>(row + n);  // the emit position of each entry, −1: not emitted
  for (int i = threadIdx.x; i < n; i += blockDim.x) at_of[i] = -1;
  __syncthreads();
  const auto mark = [&](int at, int j) { at_of[j] = at; };
  const int count = k >= 1 ? cuda::detail::top_k_select(row, n, max_key, k, shared, mark)
                           : cuda::detail::top_cdf_select(row, n, max_key, tau, crossing, shared, mark);
  __syncthreads();
  if (threadIdx.x == 0) {  // emitted positions 0 … count − 1, ascending with j
    int next = 0;
    for (int j = 0; j < n; ++j)
      if (at_of[j] >= 0 && at_of[j] != next++) order_ok = 0;
    if (next != count) order_ok = 0;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) keep[i] = at_of[i] >= 0 ? 1 : 0;
  if (threadIdx.x == 0) keep[n] = order_ok ? 1 : 0;
}

TEST_CASE("device radix select: TopCdf keeps top_cdf's entries, top-k a sort's first k (ties, zeros, subnormals, "
          "entries taking no part)") {
  constexpr int kMax = 20000;
  std::uint32_t* dkeys;
  std::uint8_t* dkeep;
  REQUIRE(cudaMalloc(&dkeys, kMax * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&dkeep, kMax + 1) == cudaSuccess);
  REQUIRE(cudaFuncSetAttribute(select_kernel<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMax * 8) == cudaSuccess);
  REQUIRE(cudaFuncSetAttribute(select_kernel<256>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMax * 8) == cudaSuccess);
  int cases = 0, rows_cut = 0, topk_cases = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int n = trial < 40 ? 1 + trial : static_cast<int>(uniform(1, trial % 50 == 0 ? kMax : 5000));
    const int kind = trial % 6;  // FG-Attn-like 2^(x − max); coarse ties; zeros; one dominant; subnormal; equal
    // Every third row has entries taking no part (key 0, as SpargeAttn's non-candidates); at least one takes part.
    const double absent = trial % 3 == 2 ? uniform(0, 0.8) : 0.0;
    std::vector<float> w;
    std::vector<int> at;  // the index of each entry taking part
    std::vector<std::uint32_t> keys(static_cast<std::size_t>(n), 0u);
    for (int j = 0; j < n; ++j) {
      if (j > 0 && uniform(0, 1) < absent) continue;
      const float v = kind == 0   ? std::exp2(static_cast<float>(uniform(-30, 0)))
                      : kind == 1 ? static_cast<float>(std::floor(uniform(0, 5))) / 4.0f
                      : kind == 2 ? (uniform(0, 1) < 0.4 ? 0.0f : static_cast<float>(uniform(0, 1)))
                      : kind == 3 ? (uniform(0, 1) < 0.02 ? 1.0f : static_cast<float>(uniform(0, 1e-9)))
                      : kind == 4 ? static_cast<float>(uniform(0, 1)) * 1e-41f
                                  : 0.5f;
      w.push_back(v);
      at.push_back(j);
      keys[static_cast<std::size_t>(j)] = float_to_bits(v) + 1u;  // detail::select_key
    }
    const int valid = static_cast<int>(w.size());
    cudaMemcpy(dkeys, keys.data(), keys.size() * 4, cudaMemcpyHostToDevice);
    const auto run = [&](float tau, bool crossing, long long k) {
      cudaMemset(dkeep, 0x77, static_cast<std::size_t>(n) + 1);
      if (trial % 2 == 0) select_kernel<128><<<1, 128, static_cast<std::size_t>(n) * 8>>>(dkeys, n, tau, crossing, k, dkeep);
      else select_kernel<256><<<1, 256, static_cast<std::size_t>(n) * 8>>>(dkeys, n, tau, crossing, k, dkeep);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      std::vector<std::uint8_t> got(static_cast<std::size_t>(n) + 1);
      cudaMemcpy(got.data(), dkeep, got.size(), cudaMemcpyDeviceToHost);
      CHECK(got.back() == 1);  // emitted in ascending order, as many as returned
      got.pop_back();
      return got;
    };
    for (const float tau : {static_cast<float>(uniform(0, 1)), 0.9f, 0.99f, 0.0f, 1.0f})
      for (const bool crossing : {true, false}) {
        CAPTURE(n);
        CAPTURE(kind);
        CAPTURE(absent);
        CAPTURE(tau);
        CAPTURE(crossing);
        std::vector<std::uint8_t> kept_valid(w.size()), want(static_cast<std::size_t>(n), 0);
        std::vector<int> order;
        const int kept = top_cdf(w.data(), nullptr, valid, {tau, 1, crossing}, kept_valid.data(), order);
        for (int t = 0; t < valid; ++t) want[static_cast<std::size_t>(at[static_cast<std::size_t>(t)])] = kept_valid[static_cast<std::size_t>(t)];
        rows_cut += kept < valid ? 1 : 0;
        REQUIRE(run(tau, crossing, -1) == want);
        ++cases;
      }
    // top-k: the first k of the entries taking part sorted by selection_key (weight descending, index ascending).
    std::vector<std::uint64_t> sorted;
    for (int t = 0; t < valid; ++t) sorted.push_back(selection_key(w[static_cast<std::size_t>(t)], at[static_cast<std::size_t>(t)]));
    std::sort(sorted.begin(), sorted.end());
    for (const long long k : {1LL, static_cast<long long>(uniform(1, valid + 1)), static_cast<long long>(valid),
                              static_cast<long long>(valid) + 3}) {
      CAPTURE(n);
      CAPTURE(kind);
      CAPTURE(absent);
      CAPTURE(k);
      std::vector<std::uint8_t> want(static_cast<std::size_t>(n), 0);
      for (long long t = 0; t < std::min<long long>(k, valid); ++t) want[static_cast<std::size_t>(selection_key_index(sorted[static_cast<std::size_t>(t)]))] = 1;
      REQUIRE(run(0.0f, true, k) == want);
      ++topk_cases;
    }
  }
  cudaFree(dkeys);
  cudaFree(dkeep);
  MESSAGE("device radix select: " << cases << " TopCdf rows (" << rows_cut << " cut below n), " << topk_cases
                                  << " top-k rows, n = 1 … " << kMax);
  CHECK(rows_cut > cases / 3);
}

/// detail::compact_kept over keep[0, n): out[at] = j for the emitted entries, the count in *count.
__global__ void compact_kernel(const std::uint8_t* keep, int n, std::int32_t* out, int* count) {
  extern __shared__ std::uint8_t staged[];
  __shared__ unsigned long long warp_sums[32];
  for (int i = threadIdx.x; i < n; i += blockDim.x) staged[i] = keep[i];
  __syncthreads();
  const int c = cuda::detail::compact_kept(staged, n, warp_sums, [&](int at, int j) { out[at] = j; });
  if (threadIdx.x == 0) *count = c;
}

TEST_CASE("device compact_kept lists the kept indices in ascending order (any n, 32 to 1024 threads)") {
  constexpr int kMax = 40000;
  std::uint8_t* dkeep;
  std::int32_t* dout;
  int* dcount;
  REQUIRE(cudaMalloc(&dkeep, kMax) == cudaSuccess);
  REQUIRE(cudaMalloc(&dout, (kMax + 1) * 4) == cudaSuccess);
  REQUIRE(cudaMalloc(&dcount, 4) == cudaSuccess);
  REQUIRE(cudaFuncSetAttribute(compact_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMax) == cudaSuccess);
  int cases = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = trial < 70 ? 1 + trial : static_cast<int>(uniform(1, trial % 25 == 0 ? kMax : 5000));
    const double density = trial % 4 == 0 ? 1.0 : trial % 4 == 1 ? 0.0 : uniform(0, 1);
    const int threads = 32 << (trial % 6);  // 32 … 1024
    std::vector<std::uint8_t> keep(static_cast<std::size_t>(n));
    std::vector<std::int32_t> want;
    for (int j = 0; j < n; ++j) {
      keep[static_cast<std::size_t>(j)] = uniform(0, 1) < density ? static_cast<std::uint8_t>(1 + j % 200) : 0;
      if (keep[static_cast<std::size_t>(j)]) want.push_back(j);
    }
    CAPTURE(n);
    CAPTURE(threads);
    cudaMemcpy(dkeep, keep.data(), keep.size(), cudaMemcpyHostToDevice);
    cudaMemset(dout, 0xff, (kMax + 1) * 4);
    compact_kernel<<<1, threads, static_cast<std::size_t>(n)>>>(dkeep, n, dout, dcount);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    int count = -1;
    cudaMemcpy(&count, dcount, 4, cudaMemcpyDeviceToHost);
    std::vector<std::int32_t> got(want.size() + 1);
    cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost);
    CHECK(count == static_cast<int>(want.size()));
    CHECK(got.back() == -1);  // nothing written past the count
    got.pop_back();
    REQUIRE(got == want);
    ++cases;
  }
  cudaFree(dkeep);
  cudaFree(dout);
  cudaFree(dcount);
  MESSAGE("device compact_kept: " << cases << " rows, n = 1 … " << kMax);
}
}  // namespace
}  // namespace spattn::test
