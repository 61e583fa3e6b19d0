// Device building blocks of the CUDA estimators' kernels (sparge.cu, …; the estimator objects that launch them:
// estimator_interface.cuh): where a sequence's rows are, an element as fp32,
// block-wide reductions, the selection order as a sort, and the write of one mask row. The decisions themselves are
// the core's (spattn/methods/*.hpp, topcdf.hpp, pooling.hpp, mask_policy.hpp); the estimator files are compiled
// with --fmad=false so the core's fp32 expressions round exactly as on the host (DESIGN.md §5.3).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/block/block_radix_sort.cuh>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "spattn/methods/sparge.hpp"
#include "spattn/pooling.hpp"
#include "spattn/problem.hpp"
#include "spattn/topcdf.hpp"

namespace spattn::cuda::detail {

/// The problem's sequences on the device: lengths and the row of element (b, ·, i) along N (packed varlen).
struct Seqs {
  int batch = 1;
  std::int64_t nq = 0, nkv = 0;  ///< fixed lengths (maxima when variable-length)
  const std::int64_t* cu_q = nullptr;
  const std::int64_t* cu_kv = nullptr;
  bool causal = false;
  /// The problem's sequences; cu_q / cu_kv: device copies of its offsets (null when not variable-length).
  static Seqs of(const Problem& p, const std::int64_t* cu_q, const std::int64_t* cu_kv) {
    return Seqs{static_cast<int>(p.batch), p.seqlen_q, p.seqlen_kv, cu_q, cu_kv, p.causal};
  }
  __device__ std::int64_t len_q(int b) const { return cu_q ? cu_q[b + 1] - cu_q[b] : nq; }
  __device__ std::int64_t len_kv(int b) const { return cu_kv ? cu_kv[b + 1] - cu_kv[b] : nkv; }
};

/// A [B, H, N, D] tensor of T (fp16/bf16) read as fp32 (exact conversion). Variable-length batches are packed
/// [1, H, total, D]: sequence b starts at row cu[b].
template <class T>
struct Rows {
  const T* data;
  std::int64_t sb, sh, sn;
  const std::int64_t* cu;  ///< offsets of a packed batch, or null
  __device__ const T* row(int b, int h, std::int64_t i) const {
    return data + (cu ? (cu[b] + i) * sn : b * sb + i * sn) + h * sh;
  }
};
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

/// Rows [first, first + rows) of (b, h) read by the whole block in 16-byte pieces (d a multiple of 8, rows 16-byte
/// aligned), four pieces in flight per thread; put(r, c, value) receives every element as fp32.
template <class T, class Put>
__device__ void stage_rows(const Rows<T>& x, int b, int h, std::int64_t first, int rows, int d, Put put) {
  const int per_row = d / 8, pieces = rows * per_row;
  constexpr int kInFlight = 4;
  for (int base = threadIdx.x; base < pieces; base += kInFlight * blockDim.x) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int p = base + u * blockDim.x;
      if (p < pieces) v[u] = *reinterpret_cast<const uint4*>(x.row(b, h, first + p / per_row) + (p % per_row) * 8);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int p = base + u * blockDim.x;
      if (p >= pieces) continue;
      const T* e = reinterpret_cast<const T*>(&v[u]);
#pragma unroll
      for (int i = 0; i < 8; ++i) put(p / per_row, (p % per_row) * 8 + i, to_float(e[i]));
    }
  }
}

/// Block pooling (SpargeAttn's blocks, FG-Attn's tiles): block j (blockIdx.x) of (batch, head) blockIdx.y, its rows
/// (minus `centre` when given) staged as fp32 with row stride d + 1; the block mean (pooling.hpp's column_mean, one
/// thread per column) into mean[(bh·slots + j)·d + c]; with `sim`, also SpargeAttn's self-similarity (row norms in
/// parallel, column sums in parallel, the final sum by one thread: the core's three steps). Dynamic shared memory:
/// pool_bytes(block, d).
inline std::size_t pool_bytes(int block, std::int64_t d) {
  return static_cast<std::size_t>(block * (d + 1) + block + d) * sizeof(float);
}
template <class T>
__global__ void pool_kernel(Rows<T> x, Seqs seqs, bool is_q, int heads, int block, int d, int slots,
                            const float* centre, float* mean, float* sim) {
  extern __shared__ float stage[];
  const int j = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y), b = bh / heads, h = bh % heads;
  const std::int64_t n = is_q ? seqs.len_q(b) : seqs.len_kv(b), first = static_cast<std::int64_t>(j) * block;
  if (first >= n) return;
  const int rows = static_cast<int>(n - first < block ? n - first : block), ld = d + 1;
  float* inv = stage + rows * ld;
  float* u = inv + rows;
  const float* mu = centre ? centre + static_cast<std::int64_t>(bh) * d : nullptr;
  stage_rows(x, b, h, first, rows, d, [&](int r, int c, float v) { stage[r * ld + c] = mu ? v - mu[c] : v; });  // subtract_mean's op
  __syncthreads();
  const std::int64_t at = static_cast<std::int64_t>(bh) * slots + j;
  if (sim == nullptr) {
    for (int c = threadIdx.x; c < d; c += blockDim.x)
      mean[at * d + c] = column_mean([&](std::int64_t r) { return stage[r * ld + c]; }, rows);
    return;
  }
  const auto value = [&](std::int64_t r, std::int64_t c) { return stage[r * ld + c]; };
  for (int r = threadIdx.x; r < rows; r += blockDim.x) inv[r] = sparge::row_inv_norm(value, r, d);
  __syncthreads();
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    mean[at * d + c] = column_mean([&](std::int64_t r) { return stage[r * ld + c]; }, rows);
    u[c] = sparge::unit_sum(value, inv, rows, c);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int nonzero = 0;
    for (int r = 0; r < rows; ++r) nonzero += inv[r] >= 0.0f ? 1 : 0;
    sim[at] = sparge::similarity_of(u, nonzero, d);
  }
}

/// Sequence means (the key centring of SpargeAttn and SALE, pooling.hpp's sequence_mean), in two kernels:
/// chunk_sum_kernel: chunk t (blockIdx.x) of (batch, head) blockIdx.y — column_sum of its kMeanChunk rows, one thread
/// per column (blockDim.x = d), the rows staged in shared memory as fp32 kStageRows at a time with the sum carried
/// across (dynamic shared memory: chunk_bytes(d)); sequence_mean_kernel: per (batch, head) the mean over the chunk sums.
constexpr int kStageRows = 64;
inline std::size_t chunk_bytes(std::int64_t d) { return static_cast<std::size_t>(kStageRows * d) * sizeof(float); }
template <class T>
__global__ void chunk_sum_kernel(Rows<T> x, Seqs seqs, bool is_q, int heads, int d, int chunks, float* partial) {
  extern __shared__ float rows_f32[];  // kStageRows × d
  const int t = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y), b = bh / heads, h = bh % heads;
  const std::int64_t n = is_q ? seqs.len_q(b) : seqs.len_kv(b), first = t * kMeanChunk;
  if (first >= n) return;
  const std::int64_t end = first + kMeanChunk < n ? first + kMeanChunk : n;
  const int c = static_cast<int>(threadIdx.x);
  float s = 0.0f;
  for (std::int64_t at = first; at < end; at += kStageRows) {
    const int rows = static_cast<int>(end - at < kStageRows ? end - at : kStageRows);
    __syncthreads();
    stage_rows(x, b, h, at, rows, d, [&](int r, int cc, float v) { rows_f32[r * d + cc] = v; });
    __syncthreads();
    s = column_sum([&](std::int64_t r) { return rows_f32[r * d + c]; }, 0, rows, s);
  }
  partial[(static_cast<std::int64_t>(bh) * chunks + t) * d + c] = s;
}
/// mu[(b·heads + h)·d + c]: sequence_mean over the chunk sums, one thread per column (a template only so that the
/// header can define it for several files).
template <class = void>
__global__ void sequence_mean_kernel(const float* partial, Seqs seqs, bool is_q, int heads, int d, int chunks, float* mu) {
  const int bh = static_cast<int>(blockIdx.x), b = bh / heads;
  const std::int64_t n = is_q ? seqs.len_q(b) : seqs.len_kv(b);
  for (int c = threadIdx.x; c < d; c += blockDim.x)
    mu[static_cast<std::int64_t>(bh) * d + c] =
        sequence_mean([&](std::int64_t t) { return partial[(static_cast<std::int64_t>(bh) * chunks + t) * d + c]; }, n);
}

/// Limits of the estimators' select kernels: keys one row sorts in shared memory, and the shared memory of one block.
constexpr int kMaxSortKeys = 16384;
constexpr int kMaxSharedBytes = 227 * 1024;

/// The smallest power of two >= n (n >= 1): the length of a row's sort.
inline int pow2_at_least(std::int64_t n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

/// Block-wide max and sum (any order: max is exact; the sum is of integers). `scratch` holds 32 entries.
template <class V, class Op>
__device__ V block_reduce(V v, Op op, V* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < warps; ++w) v = op(v, scratch[w]);
  return v;
}

// The selection order's 64-bit keys are the core's (spattn/topcdf.hpp).
using spattn::selection_key;
__device__ __forceinline__ float key_value(std::uint64_t key) { return selection_key_weight(key); }
__device__ __forceinline__ int key_index(std::uint64_t key) { return selection_key_index(key); }
constexpr std::uint64_t kNoKey = kNoSelectionKey;  ///< after every key
using spattn::signed_selection_key;

/// Ascending bitonic sort of n (a power of two) keys in shared memory by the whole block. (A variant running the
/// strides below 64 in registers with warp shuffles measured mixed on the H100 — FG-Attn's 32K estimate 2.56 → 2.94
/// ms, SpargeAttn's 128K one 10.8 → 9.4 ms — so the simple one stays; ncu: the select kernels are bound by issued
/// instructions, not by barriers.)
__device__ inline void block_sort(std::uint64_t* keys, int n) {
  for (int size = 2; size <= n; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int i = threadIdx.x; i < n / 2; i += blockDim.x) {
        const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const bool up = (lo & size) == 0;
        const std::uint64_t a = keys[lo], b = keys[hi];
        if ((a > b) == up) keys[lo] = b, keys[hi] = a;
      }
    }
  __syncthreads();
}

/// block_sort for keys built at their index — keys[j] = selection_key(weight, j) with a weight >= +0, or kNoKey, at
/// position j — by a stable radix sort (CUB's BlockRadixSort) of 32 bits: the weight's order (~bits of a weight >= +0
/// has its top bit set, dropped) and 0xffffffff for kNoKey, after every weight (+0 included). Among equal weights the
/// index order is kept, so the result is block_sort's. kThreads · kItems = n keys, blocked; CUB's scratch reuses the
/// keys' shared memory once they are in registers (when it fits; else block_sort).
template <int kThreads, int kItems>
__device__ void radix_sort_indexed(std::uint64_t* keys) {
  using Sort = cub::BlockRadixSort<std::uint32_t, kThreads, kItems, std::uint32_t>;
  if constexpr (sizeof(typename Sort::TempStorage) > sizeof(std::uint64_t) * kThreads * kItems) {
    block_sort(keys, kThreads * kItems);
  } else {
    std::uint32_t hi[kItems], lo[kItems];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const std::uint64_t k = keys[threadIdx.x * kItems + i];
      hi[i] = k == kNoKey ? 0xffffffffu : static_cast<std::uint32_t>(k >> 32) & 0x7fffffffu;
      lo[i] = static_cast<std::uint32_t>(k);
    }
    __syncthreads();  // every key is in registers: the array becomes CUB's scratch
    Sort(*reinterpret_cast<typename Sort::TempStorage*>(keys)).Sort(hi, lo);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kItems; ++i)
      keys[threadIdx.x * kItems + i] =
          hi[i] == 0xffffffffu ? kNoKey : (static_cast<std::uint64_t>(hi[i] | 0x80000000u) << 32) | lo[i];
    __syncthreads();
  }
}

/// The sort of a row of n keys (a power of two) in a block of kThreads threads: the radix sort's keys per thread for
/// 16 · kThreads ≤ n ≤ 32 · kThreads, else 0 (block_sort). Measured on the H100 (bench/results/gpu-pipeline.md): with
/// 32 keys per thread the radix sort takes FG-Attn's 128K estimate (4096 key tiles, 128 threads) from 65.7 to 45.6 ms;
/// with 2–8 keys per thread it is slower than block_sort (SpargeAttn 128K 10.8 → 13.1 ms, BFLA 6.95 → 7.87 ms).
template <int kThreads>
constexpr int sort_items(int n) {
  return n / kThreads == 16 || n / kThreads == 32 ? n / kThreads : 0;
}

/// Sorts n (a power of two) keys built at their index (see radix_sort_indexed) into the selection order: block_sort
/// when kItems is 0, else the radix sort of kItems keys per thread (kItems = sort_items<kThreads>(n)). A kernel that
/// sorts takes kItems as a template parameter and is launched in the variant its rows pick (with_sort_items): the
/// radix sort compiled into a kernel sets its registers for every launch (SpargeAttn's select kernel went from 40 to
/// 205 registers, one CTA an SM, and its 128K estimate from 11.0 to 16.0 ms on the H200, where it sorts by block_sort).
template <int kThreads, int kItems>
__device__ void sort_indexed(std::uint64_t* keys, int n) {
  if constexpr (kItems == 0) block_sort(keys, n);
  else radix_sort_indexed<kThreads, kItems>(keys);
}

/// Host side: f(std::integral_constant<int, sort_items<kThreads>(n)>{}), the kernel variant for rows of n keys.
template <int kThreads, class F>
void with_sort_items(int n, F&& f) {
  switch (sort_items<kThreads>(n)) {
    case 16: return f(std::integral_constant<int, 16>{});
    case 32: return f(std::integral_constant<int, 32>{});
    default: return f(std::integral_constant<int, 0>{});
  }
}

/// TopCdf on the device (topcdf.hpp's steps 3-6) in a block of kThreads threads: sorts keys[0, n) (sort_indexed) — n a power of
/// two, keys[j] = selection_key(weight_j, j) for the n_valid valid entries and kNoKey for the rest, each at its index
/// j — into the selection order, and returns (to every thread) how many of them the rule keeps: the exact fixed-point
/// weights summed by the block in any order (the same Z), then one thread walks the sorted row to the first prefix
/// reaching the target (top_cdf_cut_by: top_cdf_count's result). `total` and `cut` are shared words.
template <int kThreads, int kItems>
__device__ int top_cdf_sorted(std::uint64_t* keys, int n, int n_valid, float tau, int min_keep, bool include_crossing,
                              unsigned long long* total, int* cut) {
  sort_indexed<kThreads, kItems>(keys, n);
  if (threadIdx.x == 0) *total = 0;
  __syncthreads();
  const int scale = n_valid > 0 ? top_cdf_scale(key_value(keys[0])) : 0;  // the largest weight comes first
  unsigned long long mine = 0;
  for (int t = threadIdx.x; t < n_valid; t += blockDim.x) mine += top_cdf_weight(key_value(keys[t]), scale);
  atomicAdd(total, mine);
  __syncthreads();
  if (threadIdx.x == 0)
    *cut = top_cdf_cut_by([&](int t) { return top_cdf_weight(key_value(keys[t]), scale); }, n_valid, *total, tau,
                          min_keep, include_crossing);
  __syncthreads();
  const int c = *cut;
  __syncthreads();
  return c;
}

/// Exclusive prefix sum over the block of one value per thread (blockDim.x a multiple of 32): returns the sum over the
/// threads before this one and sets `total` to the block's sum (every thread). `warp_sums` holds 32 values.
template <class T>
__device__ T block_exclusive_scan(T mine, T* warp_sums, T& total) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  T inclusive = mine;
  for (int o = 1; o < 32; o <<= 1) {
    const T up = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += up;
  }
  __syncthreads();  // warp_sums may still be read by a previous scan
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  T before = 0;
  total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) {
    const T sum = warp_sums[w];
    before += w < warp ? sum : T{};
    total += sum;
  }
  return before + inclusive - mine;
}

/// Ranks in index order over the block: flags(j) gives entry j < n up to two flags (bits 0 and 1), and visit(j, f,
/// r0, r1) is called for every entry with flags f != 0, r_k = the number of entries before j with flag k. Each warp
/// walks one contiguous chunk of whole 32-entry steps, its lanes on consecutive entries (a shared array is read
/// without bank conflicts), and counts by ballot; one scan over the warps' counts places the chunks. flags(j) is
/// called twice per entry. Returns both totals (flag 1's in the high word). `warp_sums` holds 32 words; entries
/// written before the call must be behind a barrier.
template <class Flags, class Visit>
__device__ unsigned long long block_rank(int n, Flags flags, unsigned long long* warp_sums, Visit visit) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int steps = (n + 31) / 32, warps = static_cast<int>(blockDim.x) / 32;
  const int chunk = (steps + warps - 1) / warps * 32, first = warp * chunk;
  const int last = first + chunk < n ? first + chunk : n;  // warp-uniform: the ballots see every lane
  unsigned c0 = 0, c1 = 0;
  for (int base = first; base < last; base += 32) {
    const int j = base + lane;
    const unsigned f = j < last ? static_cast<unsigned>(flags(j)) : 0u;
    c0 += __popc(__ballot_sync(0xffffffffu, f & 1u));
    c1 += __popc(__ballot_sync(0xffffffffu, f & 2u));
  }
  unsigned long long total = 0;
  const unsigned long long mine = lane == 0 ? (static_cast<unsigned long long>(c1) << 32) | c0 : 0ull;
  const unsigned long long before = __shfl_sync(0xffffffffu, block_exclusive_scan(mine, warp_sums, total), 0);
  unsigned r0 = static_cast<unsigned>(before), r1 = static_cast<unsigned>(before >> 32);
  const unsigned lower = (1u << lane) - 1u;  // the lanes before this one
  for (int base = first; base < last; base += 32) {
    const int j = base + lane;
    const unsigned f = j < last ? static_cast<unsigned>(flags(j)) : 0u;
    const unsigned b0 = __ballot_sync(0xffffffffu, f & 1u), b1 = __ballot_sync(0xffffffffu, f & 2u);
    if (f != 0u) visit(j, f, r0 + __popc(b0 & lower), r1 + __popc(b1 & lower));
    r0 += __popc(b0);
    r1 += __popc(b1);
  }
  __syncthreads();  // what visit wrote is seen by every thread
  return total;
}

/// The bits of n weights, bits[j] = float bits of weight(j) (finite and >= +0, so their bits order like their values),
/// stored for top_cdf_select; returns the largest (to every thread). `scratch` holds 32 words.
template <class Weight>
__device__ std::uint32_t store_weight_bits(int n, Weight weight, std::uint32_t* bits, std::uint32_t* scratch) {
  std::uint32_t max_bits = 0;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const std::uint32_t w = float_to_bits(weight(j));
    bits[j] = w;
    max_bits = w > max_bits ? w : max_bits;
  }
  return block_reduce(max_bits, [](std::uint32_t u, std::uint32_t v) { return u > v ? u : v; }, scratch);
}

/// Shared memory of top_cdf_select for blocks of kThreads threads.
template <int kThreads>
struct TopCdfSelectShared {
  unsigned long long bucket[256];  ///< a radix pass's weight per digit
  unsigned long long warp_sums[32];
  unsigned long long remaining;
  std::uint32_t prefix;
  int state;  ///< after the first pass: 0 every entry kept, 1 the first entry reaches the target, 2 search on
};

/// TopCdf (topcdf.hpp, steps 2-6 with min_keep 1) by a radix select, without sorting, in a block of kThreads
/// threads: bits[0, n) are the float bits of n weights >= +0 (finite, in index order; their bits order like their
/// values: store_weight_bits), max_bits the largest of them. Calls emit(at, j) for the kept entries j, at = 0, 1, …
/// in ascending j, and returns (to every thread) how many. The exact fixed-point sums do not depend on order, so the
/// cut is the entry at the first position (in the selection order) whose prefix reaches top_cdf_target: four passes
/// over the weights' bits, 8 bits each from the top, each summing per next digit the weights of the entries that
/// match the bits found so far (the first pass also gives Z); then the cut entry's bits w* and how far into the run
/// of entries equal to w* the target falls (ties go to the lower index). Kept: every entry above w* and the first
/// top_cdf_kept of those equal to it.
template <int kThreads, class Emit>
__device__ int top_cdf_select(const std::uint32_t* bits, int n, std::uint32_t max_bits, float tau, bool include_crossing,
                              TopCdfSelectShared<kThreads>& s, Emit emit) {
  if (n <= 0) return 0;
  const int scale = top_cdf_scale(bits_to_float(max_bits));
  const auto weight = [scale](std::uint32_t b) { return top_cdf_weight(bits_to_float(b), scale); };
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // The first digit's weights give Z; warp 0 reads the target and where it falls.
  std::uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += kThreads) s.bucket[d] = 0;
    __syncthreads();
    // Lanes of a warp with the same digit add their weights first (most weights fall in a few digits: one shared
    // atomic per digit and warp step, not per entry). A weight is below 2^41: two 21-bit halves, each summed over
    // at most 32 lanes without overflow. After the first pass few entries match the prefix: a warp none of whose
    // lanes does skips the step.
    for (int base = 0; base < n; base += kThreads) {
      const int j = base + static_cast<int>(threadIdx.x);
      const std::uint32_t b = j < n ? bits[j] : 0u;
      const std::uint64_t w = j < n && (b & mask) == prefix ? weight(b) : 0;
      if (__ballot_sync(0xffffffffu, w != 0) == 0u) continue;
      const unsigned digit = w != 0 ? (b >> shift) & 255u : 256u;  // 256: adds nothing
      const unsigned peers = __match_any_sync(0xffffffffu, digit);
      if (digit != 256u) {
        const unsigned low = __reduce_add_sync(peers, static_cast<unsigned>(w & 0x1fffffu));
        const unsigned high = __reduce_add_sync(peers, static_cast<unsigned>(w >> 21));
        if (lane == __ffs(peers) - 1)
          atomicAdd(&s.bucket[digit], (static_cast<unsigned long long>(high) << 21) + low);
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // lane l: digits 255 − 8l down to 248 − 8l, the selection order's way
      std::uint64_t sum = 0;
      for (int k = 0; k < 8; ++k) sum += s.bucket[255 - 8 * lane - k];
      std::uint64_t inclusive = sum;
      for (int o = 1; o < 32; o <<= 1) {
        const std::uint64_t up = __shfl_up_sync(0xffffffffu, inclusive, o);
        if (lane >= o) inclusive += up;
      }
      std::uint64_t remaining = s.remaining;
      if (shift == 24) {  // Z, the target, and whether a search is needed
        const std::uint64_t total = __shfl_sync(0xffffffffu, inclusive, 31);
        remaining = tau >= 1.0f ? total + 1 : top_cdf_target(tau, total, include_crossing);
        if (lane == 0) s.state = remaining > total ? 0 : remaining == 0 ? 1 : 2;
      }
      if (remaining > 0 && remaining <= __shfl_sync(0xffffffffu, inclusive, 31)) {
        const unsigned reached = __ballot_sync(0xffffffffu, inclusive >= remaining);
        if (lane == __ffs(reached) - 1) {  // the first lane whose digits reach the remaining weight
          std::uint64_t c = inclusive - sum;
          for (int k = 0; k < 8; ++k) {
            const int digit = 255 - 8 * lane - k;
            if (c + s.bucket[digit] >= remaining) {
              s.prefix = prefix | (static_cast<std::uint32_t>(digit) << shift);
              s.remaining = remaining - c;
              break;
            }
            c += s.bucket[digit];
          }
        }
      }
    }
    __syncthreads();
    if (s.state != 2) break;  // every entry, or the first: no search
    prefix = s.prefix;
    mask |= 255u << shift;
  }
  // The kept entries: those above cut_bits and the first keep_equal of those equal to it (in index order).
  const int state = s.state;
  std::uint32_t cut_bits = 0;
  int keep_equal = n;  // state 0: every entry
  if (state != 0) {
    std::uint64_t position = 1;  // of the cut entry among those equal to it (1-based); state 1: the first entry
    cut_bits = max_bits;
    if (state == 2) {
      cut_bits = prefix;
      const std::uint64_t w = weight(prefix);  // > 0: the entries equal to it hold the remaining weight
      position = (s.remaining + w - 1) / w;
    }
    keep_equal = top_cdf_kept(static_cast<int>(position), include_crossing);
    if (keep_equal == 0 && cut_bits == max_bits) keep_equal = 1;  // step 6: at least one entry (min_keep 1)
  }
  // Flag 0: above the cut; flag 1: equal to it, kept while its rank among the equal ones is below keep_equal.
  const unsigned long long all = block_rank(
      n,
      [&](int j) {
        const std::uint32_t b = bits[j];
        return (b > cut_bits ? 1u : 0u) | (b == cut_bits ? 2u : 0u);
      },
      s.warp_sums,
      [&](int j, unsigned f, unsigned above, unsigned equal) {
        const int e = static_cast<int>(equal);
        if ((f & 1u) || e < keep_equal) emit(static_cast<int>(above) + (e < keep_equal ? e : keep_equal), j);
      });
  const int equal = static_cast<int>(all >> 32);
  return static_cast<int>(all & 0xffffffffu) + (equal < keep_equal ? equal : keep_equal);
}

/// Calls emit(at, j) for the indices j < n with keep[j] != 0, at = 0, 1, … in ascending j; returns their count (to
/// every thread). `warp_sums` holds 32 words.
template <class Emit>
__device__ int compact_kept(const std::uint8_t* keep, int n, unsigned long long* warp_sums, Emit emit) {
  return static_cast<int>(block_rank(
      n, [&](int j) { return keep[j] ? 1u : 0u; }, warp_sums, [&](int j, unsigned, unsigned at, unsigned) { emit(static_cast<int>(at), j); }));
}

/// Writes the indices j < n with keep[j] != 0, ascending, to out; returns their count (to every thread).
__device__ inline int write_kept(const std::uint8_t* keep, int n, std::int32_t* out, unsigned long long* warp_sums) {
  return compact_kept(keep, n, warp_sums, [&](int at, int j) { out[at] = j; });
}

}  // namespace spattn::cuda::detail
