// Device building blocks of the CUDA estimators' kernels (sparge.cu, …; the estimator objects that launch them:
// estimator_interface.cuh): where a sequence's rows are, an element as fp32,
// block-wide reductions, the selection order as a sort, and the write of one mask row. The decisions themselves are
// the core's (spattn/methods/*.hpp, topcdf.hpp, pooling.hpp, mask_policy.hpp); the estimator files are compiled
// with --fmad=false so the core's fp32 expressions round exactly as on the host (DESIGN.md §5.3).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

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

/// Limits of the estimators' select kernels: keys one row holds in shared memory (radix_select's, or BFLA's sort of its
/// top-k floor), and the shared memory of one block.
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

// The selection order's 64-bit keys (BFLA's top-k floor sorts them) are the core's (spattn/topcdf.hpp).
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

/// The key of an entry in a radix select (radix_select): 1 + the float bits of its weight (>= +0, finite), so keys
/// order like weights; 0 is an entry that takes no part.
__device__ __forceinline__ std::uint32_t select_key(float weight) { return float_to_bits(weight) + 1u; }
__device__ __forceinline__ float select_key_weight(std::uint32_t key) { return bits_to_float(key - 1u); }

/// keys[j] = key_of(j) for j < n (select_key, or 0); returns the largest (to every thread). `scratch` holds 32 words.
template <class KeyOf>
__device__ std::uint32_t store_select_keys(int n, KeyOf key_of, std::uint32_t* keys, std::uint32_t* scratch) {
  std::uint32_t max_key = 0;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const std::uint32_t k = key_of(j);
    keys[j] = k;
    max_key = k > max_key ? k : max_key;
  }
  return block_reduce(max_key, [](std::uint32_t u, std::uint32_t v) { return u > v ? u : v; }, scratch);
}

/// Shared memory of radix_select for blocks of kThreads threads.
template <int kThreads>
struct RadixSelectShared {
  unsigned part[3][256];           ///< a radix pass's weight per digit, in three 14-bit parts (radix_select)
  unsigned long long bucket[256];  ///< the weight per digit
  unsigned long long warp_sums[32];
  unsigned long long remaining;
  std::uint32_t prefix;
  int state;  ///< after the first pass: 0 every entry kept, 1 the first entry reaches the target, 2 search on
};

/// A cut of the selection order (weight descending, ties by ascending index) by a radix select, without sorting, in
/// a block of kThreads threads. keys[0, n) (n < 2^18) are select_key's (0: no part), in index order; max_key the largest. Each
/// entry taking part has an integer weight(key) (below 2^41, the total Z below 2^64); the cut is the entry at the
/// first position whose prefix of weights reaches target_of(Z) (target_of(Z) > Z: none, every entry taking part is
/// kept; 0: the first). Kept: the entries before the cut, and the cut itself when include_crossing (topcdf.hpp's
/// top_cdf_kept); at least one (step 6's min_keep 1). The sums do not depend on order, so four passes find the cut,
/// 8 bits of the key each from the top, each summing per next digit the weights of the entries that match the bits
/// found so far (the first pass also gives Z); then how far into the run of entries equal to the cut key the target
/// falls. Calls emit(at, j) for the kept entries j, at = 0, 1, … in ascending j, and returns (to every thread) how
/// many. Entries written before the call must be behind a barrier.
template <int kThreads, class Weight, class Target, class Emit>
__device__ int radix_select(const std::uint32_t* keys, int n, std::uint32_t max_key, Weight weight, Target target_of,
                            bool include_crossing, RadixSelectShared<kThreads>& s, Emit emit) {
  if (n <= 0 || max_key == 0) return 0;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // The first digit's weights give Z; warp 0 reads the target and where it falls.
  std::uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += kThreads) s.part[0][d] = s.part[1][d] = s.part[2][d] = 0;
    __syncthreads();
    // A weight (below 2^41) is added as three 14-bit parts by 32-bit shared atomics, native adds (a 64-bit shared
    // atomic is a compare-and-swap loop, and a warp's sum per digit by __reduce_add_sync over a divergent mask loops
    // once per distinct digit); each part's sum over n < 2^18 entries stays below 2^32. After the first pass few
    // entries match the prefix: a warp none of whose lanes does skips the step.
    for (int base = 0; base < n; base += kThreads) {
      const int j = base + static_cast<int>(threadIdx.x);
      const std::uint32_t b = j < n ? keys[j] : 0u;
      const std::uint64_t w = b != 0u && (b & mask) == prefix ? weight(b) : 0;
      if (w != 0) {
        const unsigned digit = (b >> shift) & 255u;
        atomicAdd(&s.part[0][digit], static_cast<unsigned>(w & 0x3fffu));
        atomicAdd(&s.part[1][digit], static_cast<unsigned>((w >> 14) & 0x3fffu));
        atomicAdd(&s.part[2][digit], static_cast<unsigned>(w >> 28));
      }
    }
    __syncthreads();
    for (int d = threadIdx.x; d < 256; d += kThreads)
      s.bucket[d] = s.part[0][d] + (static_cast<unsigned long long>(s.part[1][d]) << 14) +
                    (static_cast<unsigned long long>(s.part[2][d]) << 28);
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
        remaining = target_of(total);
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
  // The kept entries: those above cut and the first keep_equal of those equal to it (in index order).
  const int state = s.state;
  std::uint32_t cut = 1;  // state 0: every entry taking part
  int keep_equal = n;
  if (state != 0) {
    std::uint64_t position = 1;  // of the cut entry among those equal to it (1-based); state 1: the first entry
    cut = max_key;
    if (state == 2) {
      cut = prefix;
      const std::uint64_t w = weight(prefix);  // > 0: the entries equal to it hold the remaining weight
      position = (s.remaining + w - 1) / w;
    }
    keep_equal = top_cdf_kept(static_cast<int>(position), include_crossing);
    if (keep_equal == 0 && cut == max_key) keep_equal = 1;  // at least one entry (min_keep 1)
  }
  // Flag 0: above the cut; flag 1: equal to it, kept while its rank among the equal ones is below keep_equal.
  const unsigned long long all = block_rank(
      n,
      [&](int j) {
        const std::uint32_t b = keys[j];
        return (b > cut ? 1u : 0u) | (b == cut ? 2u : 0u);
      },
      s.warp_sums,
      [&](int j, unsigned f, unsigned above, unsigned equal) {
        const int e = static_cast<int>(equal);
        if ((f & 1u) || e < keep_equal) emit(static_cast<int>(above) + (e < keep_equal ? e : keep_equal), j);
      });
  const int equal = static_cast<int>(all >> 32);
  return static_cast<int>(all & 0xffffffffu) + (equal < keep_equal ? equal : keep_equal);
}

/// TopCdf (topcdf.hpp, steps 2-6 with min_keep 1) over the entries taking part, by radix_select: each weighs its
/// exact fixed-point weight (top_cdf_weight, scale from max_key's weight), the target is top_cdf_target(τ, Z) (τ >= 1:
/// every entry). The kept entries are top_cdf's, emitted in ascending j.
template <int kThreads, class Emit>
__device__ int top_cdf_select(const std::uint32_t* keys, int n, std::uint32_t max_key, float tau, bool include_crossing,
                              RadixSelectShared<kThreads>& s, Emit emit) {
  const int scale = max_key != 0 ? top_cdf_scale(select_key_weight(max_key)) : 0;
  return radix_select(
      keys, n, max_key, [scale](std::uint32_t k) { return top_cdf_weight(select_key_weight(k), scale); },
      [tau, include_crossing](std::uint64_t total) {
        return tau >= 1.0f ? total + 1 : top_cdf_target(tau, total, include_crossing);
      },
      include_crossing, s, emit);
}

/// The k >= 1 first entries taking part in the selection order (all of them when fewer), by radix_select with unit
/// weights: the entries a sort of their selection keys would list first, emitted in ascending j.
template <int kThreads, class Emit>
__device__ int top_k_select(const std::uint32_t* keys, int n, std::uint32_t max_key, std::int64_t k,
                            RadixSelectShared<kThreads>& s, Emit emit) {
  return radix_select(
      keys, n, max_key, [](std::uint32_t) { return std::uint64_t{1}; },
      [k](std::uint64_t) { return static_cast<std::uint64_t>(k); }, true, s, emit);
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
