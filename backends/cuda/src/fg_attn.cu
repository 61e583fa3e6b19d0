// FG-Attn's estimator on the GPU (research/fgattn.md §2; the rules: spattn/methods/fg_attn.hpp), with the
// reference's bits: tile means in pooling.hpp's order, pooled logits by fg_attn::pooled_logit (the core's sequential
// fma chain), the tail weight, exp2_det weights and TopCdf's exact fixed-point cut; this file is compiled with
// --fmad=false. Three kernels, all on the caller's stream:
//   1. pool (twice): the mean of every M-row query tile and N-row key tile (one CTA per tile, one thread per column);
//   2. logits: one CTA per 32 query tiles of a (batch, query head); key-tile means staged 128 at a time in shared
//      memory, each thread 4 × 4 sequential dot products per stage in lockstep (dot_sequential_block: the same bits);
//      the logits of the reachable tiles to a workspace;
//   3. select: one CTA per (batch, query head, query tile): the finite check and row max, the dense fallback, the
//      TopCdf with the crossing tile included by a radix select (detail::top_cdf_select: no sort of the row); the kept
//      tiles are written ascending into the row's slot of the DeviceTileMask, whose build_work_order() then merges
//      16/32-row tiles into the executor's 64-row items on the device.
//   4. UNION semantics only (fg_attn::effective_mask): the merge plan's groups — consecutive, or the greedy merge-XOR
//      (bits: each row's key-tile bitset; distance: every pair's XOR distance, 64 × 64 pairs per CTA over the whole
//      GPU; xor_groups: one CTA per (batch, head) runs the greedy loop, anchors in turn, the R − 1 nearest by block
//      argmin rounds over fg_attn::merge_key) — then union_rows: one CTA per group writes the members' union, clipped
//      to each member's reach, into their rows.
//      EXACT masks do not depend on the plan (the executor merges consecutive tiles into its items).
// Workspace (allocated once per shape): tile means [B·Hq·Tq·D] and [B·Hkv·Tk·D] and the logits [B·Hq·Tq·Tk] (fp32);
// for UNION the groups [B·Hq·Tq] (int32) and, for merge-XOR, the bitsets [B·Hq·Tq·⌈Tk/64⌉] (uint64) and the pair
// distances [B·Hq·Tq·Tq] (uint16: 1 GiB at 128K with 32 × 32 tiles and 32 heads).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "estimator_interface.cuh"
#include "estimator_kernels.cuh"
#include "host_helpers.cuh"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/fg_attn.hpp"
#include "spattn/topcdf.hpp"

namespace spattn::cuda {
namespace {

using detail::check;
using detail::DeviceArray;
using detail::Rows;
using detail::Seqs;

constexpr int kPoolThreads = 128, kThreads = 256, kSelectThreads = 128;
// Logits kernel: 32 query tiles × 128 key tiles per stage; each thread 4 × 4 of them.
constexpr int kBlockRows = 4, kBlockKeys = 4;
constexpr int kRowsPerCta = kThreads / 32 * kBlockRows, kKeysPerStage = 32 * kBlockKeys;

struct LogitArgs {
  Seqs seqs;
  int heads_q, heads_kv, d, tile_q, tile_k, tq, tk;
  float scale_log2;
  bool size_weighted_tail;
  const float *q_mean, *k_mean;
  float* logits;  ///< [B·Hq·Tq·Tk]; entry (row, j) written for the row's reachable j only
};

/// Thread (row group g = tid / 32, lane) forms the 4 × 4 logits of query tiles i0 + 4g … i0 + 4g + 3 and key tiles
/// j0 + lane + 32u (u < 4) of each stage: dot_sequential_block's chains (dot_sequential's bits), their loads shared.
__global__ void __launch_bounds__(kThreads) logits_kernel(LogitArgs a) {
  extern __shared__ float smem[];
  float* qs = smem;                        // kRowsPerCta × d
  float* ks = qs + kRowsPerCta * a.d;      // kKeysPerStage × (d + 1): lanes read rows d + 1 apart (no bank conflict)
  const int ld = a.d + 1;
  const int bh = static_cast<int>(blockIdx.y), b = bh / a.heads_q, h = bh % a.heads_q;
  const int hkv = h / (a.heads_q / a.heads_kv), i0 = static_cast<int>(blockIdx.x) * kRowsPerCta;
  const std::int64_t nq = a.seqs.len_q(b), nkv = a.seqs.len_kv(b);
  const std::int64_t left = (nq + a.tile_q - 1) / a.tile_q - i0;
  const int rows = static_cast<int>(left < kRowsPerCta ? left : kRowsPerCta);
  if (rows <= 0) return;
  for (int e = threadIdx.x; e < kRowsPerCta * a.d; e += blockDim.x)  // rows past the sequence: zeros, not written
    qs[e] = e < rows * a.d ? a.q_mean[(static_cast<std::int64_t>(bh) * a.tq + i0) * a.d + e] : 0.0f;
  // Reachable key tiles grow with the query tile: the CTA's last row reaches furthest.
  const auto reach_of = [&](int i) {
    return static_cast<int>(mask_policy::reachable_tiles<std::int64_t>(i, a.tile_q, a.tile_k, nq, nkv, a.seqs.causal));
  };
  const int reach_max = reach_of(i0 + rows - 1);
  const int g = threadIdx.x / 32, lane = threadIdx.x % 32;
  int reach[kBlockRows];
  for (int r = 0; r < kBlockRows; ++r) reach[r] = g * kBlockRows + r < rows ? reach_of(i0 + g * kBlockRows + r) : 0;
  const float tail_weight = fg_attn::tail_weight(nkv, a.tile_k, a.size_weighted_tail);
  const float* kbase = a.k_mean + (static_cast<std::int64_t>(b) * a.heads_kv + hkv) * a.tk * a.d;
  float* out = a.logits + (static_cast<std::int64_t>(bh) * a.tq + i0 + g * kBlockRows) * a.tk;
  for (int j0 = 0; j0 < reach_max; j0 += kKeysPerStage) {
    const int stage = reach_max - j0 < kKeysPerStage ? reach_max - j0 : kKeysPerStage;
    __syncthreads();
    const float4* src = reinterpret_cast<const float4*>(kbase + static_cast<std::int64_t>(j0) * a.d);
    const int quads = a.d / 4;
    for (int e = threadIdx.x; e < stage * quads; e += blockDim.x) {  // 16-byte loads (d % 8 == 0)
      const float4 v = src[e];
      float* dst = ks + (e / quads) * ld + (e % quads) * 4;
      dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
    }
    __syncthreads();
    if (lane >= stage) continue;  // key tiles lane + 32u past the stage are past every row's reach
    float dots[kBlockRows][kBlockKeys];
    dot_sequential_block<kBlockRows, kBlockKeys>(qs + g * kBlockRows * a.d, a.d, ks + lane * ld, 32 * ld, a.d, dots);
#pragma unroll
    for (int r = 0; r < kBlockRows; ++r)
#pragma unroll
      for (int u = 0; u < kBlockKeys; ++u) {
        const int j = j0 + lane + 32 * u;
        if (j >= reach[r]) continue;
        float x = fg_attn::logit_of(dots[r][u], a.scale_log2);
        if (fg_attn::is_tail_tile(j, nkv, a.tile_k)) x += tail_weight;
        out[static_cast<std::int64_t>(r) * a.tk + j] = x;
      }
  }
}

struct SelectArgs {
  Seqs seqs;
  int heads_q, tile_q, tile_k, tq, tk;
  float top_p;
  const float* logits;
  const std::int64_t* row_begin;
  std::int64_t* row_end;
  std::int32_t* tiles;
};

__global__ void __launch_bounds__(kSelectThreads) select_kernel(SelectArgs a) {
  extern __shared__ std::uint32_t keys[];  // tk: the row's select keys
  __shared__ detail::RadixSelectShared<kSelectThreads> select;
  __shared__ float fscratch[32];
  __shared__ int iscratch[32];
  const int i = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y), b = bh / a.heads_q;
  const std::int64_t row = static_cast<std::int64_t>(bh) * a.tq + i, slot = a.row_begin[row];
  const std::int64_t nq = a.seqs.len_q(b), nkv = a.seqs.len_kv(b);
  const int reach = static_cast<int>(mask_policy::reachable_tiles<std::int64_t>(i, a.tile_q, a.tile_k, nq, nkv, a.seqs.causal));
  if (reach == 0) {  // past the sequence's end, or no key
    if (threadIdx.x == 0) a.row_end[row] = slot;
    return;
  }
  const float* x = a.logits + row * a.tk;
  float m = -INFINITY;
  int finite = 1;
  for (int j = threadIdx.x; j < reach; j += kSelectThreads) {
    finite &= isfinite(x[j]) ? 1 : 0;
    m = fmaxf(m, x[j]);
  }
  m = detail::block_reduce(m, [](float u, float v) { return fmaxf(u, v); }, fscratch);
  finite = detail::block_reduce(finite, [](int u, int v) { return u & v; }, iscratch);
  std::int32_t* out = a.tiles + slot;
  int count = reach;
  if (fg_attn::keep_all_tiles(finite != 0, a.top_p)) {  // dense fallback (NaN/Inf inputs) or p >= 1
    for (int j = threadIdx.x; j < reach; j += kSelectThreads) out[j] = j;
  } else {
    const std::uint32_t max_key = detail::store_select_keys(
        reach, [&](int j) { return detail::select_key(selection_weight(x[j], m)); }, keys,
        reinterpret_cast<std::uint32_t*>(iscratch));
    count = detail::top_cdf_select(keys, reach, max_key, a.top_p, true, select,
                                   [&](int at, int j) { out[at] = j; });
  }
  if (threadIdx.x == 0) a.row_end[row] = slot + count;
}

// ---- UNION semantics: the merge plan's groups and the members' union rows ----

/// Query tiles of sequence b that take part in the plan (fg_attn::merge_plan: those starting before the sequence's end).
__device__ int plan_tiles(const Seqs& seqs, int b, int tile_q) {
  return static_cast<int>((seqs.len_q(b) + tile_q - 1) / tile_q);
}

/// One CTA per (query tile, (batch, head)): the row's kept key tiles as a bitset of `words` words.
__global__ void bits_kernel(const std::int64_t* row_begin, const std::int64_t* row_end, const std::int32_t* tiles,
                            int tq, int words, std::uint64_t* bits) {
  extern __shared__ unsigned long long word[];
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * tq + blockIdx.x;
  for (int w = threadIdx.x; w < words; w += blockDim.x) word[w] = 0;
  __syncthreads();
  for (std::int64_t e = row_begin[row] + threadIdx.x; e < row_end[row]; e += blockDim.x)
    atomicOr(&word[tiles[e] / 64], 1ull << (tiles[e] % 64));
  __syncthreads();
  for (int w = threadIdx.x; w < words; w += blockDim.x) bits[row * words + w] = word[w];
}

/// The merge-XOR distances of every pair of query tiles a < i of a (batch, head), fg_attn::xor_distance of their
/// bitsets, into dist[(bh·tq + a)·tq + i] (uint16: at most 16384 key tiles). One CTA per 64 × 64 block of pairs on or
/// above the diagonal: the two tiles' bitsets staged 32 words at a time, each thread 4 × 4 pairs (anchors ty + 16p,
/// candidates tx + 16u: conflict-free shared loads).
constexpr int kPairTile = 64, kPairWords = 32;
__global__ void __launch_bounds__(256) distance_kernel(int tq, int words, const std::uint64_t* bits, std::uint16_t* dist) {
  __shared__ std::uint64_t as[kPairTile][kPairWords + 1], is[kPairTile][kPairWords + 1];
  const int a0 = static_cast<int>(blockIdx.y) * kPairTile, i0 = static_cast<int>(blockIdx.x) * kPairTile;
  if (i0 + kPairTile <= a0) return;  // below the diagonal: no pair a < i
  const std::int64_t bh = blockIdx.z;
  const std::uint64_t* head = bits + bh * tq * words;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int d[4][4] = {};
  for (int w0 = 0; w0 < words; w0 += kPairWords) {
    __syncthreads();
    for (int e = threadIdx.x; e < kPairTile * kPairWords; e += blockDim.x) {
      const int r = e / kPairWords, w = w0 + e % kPairWords;
      as[r][e % kPairWords] = a0 + r < tq && w < words ? head[static_cast<std::int64_t>(a0 + r) * words + w] : 0;
      is[r][e % kPairWords] = i0 + r < tq && w < words ? head[static_cast<std::int64_t>(i0 + r) * words + w] : 0;
    }
    __syncthreads();
    for (int w = 0; w < kPairWords; ++w) {
      std::uint64_t x[4], y[4];
#pragma unroll
      for (int p = 0; p < 4; ++p) x[p] = as[ty + 16 * p][w], y[p] = is[tx + 16 * p][w];
#pragma unroll
      for (int p = 0; p < 4; ++p)
#pragma unroll
        for (int u = 0; u < 4; ++u) d[p][u] += fg_attn::xor_distance_word(x[p], y[u]);
    }
  }
#pragma unroll
  for (int p = 0; p < 4; ++p)
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int a = a0 + ty + 16 * p, i = i0 + tx + 16 * u;
      if (a < i && i < tq) dist[(bh * tq + a) * tq + i] = static_cast<std::uint16_t>(d[p][u]);
    }
}

constexpr int kGroupThreads = 1024;
/// The greedy merge-XOR plan of fg_attn::merge_plan for one (batch, head) per CTA: the lowest ungrouped tile anchors a
/// group and takes the R − 1 ungrouped tiles of smallest fg_attn::merge_key(distance, index) (distances from
/// distance_kernel), by argmin rounds over the block. Writes the tiles in group order to groups[bh·tq …]: group g is
/// entries [g·R, min(g·R + R, tiles)). Dynamic shared memory: xor_groups_bytes(tq).
__global__ void __launch_bounds__(kGroupThreads) xor_groups_kernel(Seqs seqs, int heads, int tile_q, int tq, int r,
                                                                   const std::uint16_t* dist, std::int32_t* groups) {
  extern __shared__ std::uint64_t key[];  // tq keys, then tq used flags
  auto* used = reinterpret_cast<std::uint8_t*>(key + tq);
  __shared__ std::uint64_t best[kGroupThreads / 32];
  const int bh = static_cast<int>(blockIdx.x), n = plan_tiles(seqs, bh / heads, tile_q);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  std::int32_t* out = groups + static_cast<std::int64_t>(bh) * tq;
  for (int i = threadIdx.x; i < n; i += blockDim.x) used[i] = 0;
  __syncthreads();
  int placed = 0;
  for (int anchor = 0; anchor < n; ++anchor) {
    if (used[anchor]) continue;  // every thread reads the same flags: the loop stays uniform
    const int take = n - placed - 1 < r - 1 ? n - placed - 1 : r - 1;  // ungrouped tiles after the anchor, at most R − 1
    const std::uint16_t* row = dist + (static_cast<std::int64_t>(bh) * tq + anchor) * tq;
    for (int i = anchor + 1 + threadIdx.x; i < n && take > 0; i += blockDim.x)
      key[i] = used[i] ? ~std::uint64_t{0} : fg_attn::merge_key(row[i], i);
    if (threadIdx.x == 0) out[placed] = anchor;
    for (int t = 0; t < take; ++t) {  // the nearest ungrouped candidate, take times
      __syncthreads();
      std::uint64_t mine = ~std::uint64_t{0};
      for (int i = anchor + 1 + threadIdx.x; i < n; i += blockDim.x) mine = key[i] < mine ? key[i] : mine;
      for (int o = 16; o > 0; o >>= 1) {
        const std::uint64_t other = __shfl_xor_sync(0xffffffffu, mine, o);
        mine = other < mine ? other : mine;
      }
      if (lane == 0) best[warp] = mine;
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int w = 1; w < warps; ++w) mine = best[w] < mine ? best[w] : mine;
        const int i = fg_attn::merge_key_index(mine);
        used[i] = 1;
        key[i] = ~std::uint64_t{0};
        out[placed + 1 + t] = i;
      }
    }
    if (threadIdx.x == 0) used[anchor] = 1;
    placed += 1 + take;
    __syncthreads();
  }
}
inline std::size_t xor_groups_bytes(std::int64_t tq) { return static_cast<std::size_t>(tq * 9); }

/// One CTA per (group g, (batch, head)): the union of the members' kept key tiles (consecutive members g·R … when
/// `groups` is null, else groups[bh·tq + g·R …]) written into every member's row, clipped to the member's reach.
/// Dynamic shared memory: tk bytes.
__global__ void union_rows_kernel(Seqs seqs, int heads, int tile_q, int tile_k, int tq, int tk, int r,
                                  const std::int32_t* groups, const std::int64_t* row_begin, std::int64_t* row_end,
                                  std::int32_t* tiles) {
  extern __shared__ std::uint8_t keep[];
  __shared__ unsigned long long scan[32];
  const int bh = static_cast<int>(blockIdx.y), b = bh / heads, g = static_cast<int>(blockIdx.x);
  const int n = plan_tiles(seqs, b, tile_q), first = g * r;
  if (first >= n) return;
  const int members = n - first < r ? n - first : r;
  const std::int64_t rows = static_cast<std::int64_t>(bh) * tq;
  const auto member = [&](int m) { return groups ? groups[rows + first + m] : first + m; };
  for (int j = threadIdx.x; j < tk; j += blockDim.x) keep[j] = 0;
  __syncthreads();
  for (int m = 0; m < members; ++m) {
    const std::int64_t row = rows + member(m);
    for (std::int64_t e = row_begin[row] + threadIdx.x; e < row_end[row]; e += blockDim.x) keep[tiles[e]] = 1;
  }
  __syncthreads();  // every member's row is read before any is written
  const std::int64_t nq = seqs.len_q(b), nkv = seqs.len_kv(b);
  for (int m = 0; m < members; ++m) {
    const int t = member(m);
    const std::int64_t row = rows + t;
    const int reach = static_cast<int>(mask_policy::reachable_tiles<std::int64_t>(t, tile_q, tile_k, nq, nkv, seqs.causal));
    const int count = detail::write_kept(keep, reach, tiles + row_begin[row], scan);
    if (threadIdx.x == 0) row_end[row] = row_begin[row] + count;
  }
}

std::size_t logits_bytes(std::int64_t d) {
  return static_cast<std::size_t>(kRowsPerCta * d + kKeysPerStage * (d + 1)) * sizeof(float);
}
std::size_t select_bytes(std::int64_t tk) { return static_cast<std::size_t>(tk) * sizeof(std::uint32_t); }

class FgAttnEstimator final : public DeviceEstimator {
 public:
  FgAttnEstimator(const fg_attn::Config& c, const Problem& p, const std::int64_t* cu_q, const std::int64_t* cu_kv)
      : c_(c), p_(p), shape_(MaskShape::of(p, c.tile_q, c.tile_k)),
        seqs_(Seqs::of(p, cu_q, cu_kv)) {
    const std::int64_t d = p.head_dim, tq = shape_.num_q_tiles(), tk = shape_.num_k_tiles();
    q_mean_.allocate(static_cast<std::size_t>(p.batch * p.heads_q * tq * d));
    k_mean_.allocate(static_cast<std::size_t>(p.batch * p.heads_kv * tk * d));
    logits_.allocate(static_cast<std::size_t>(p.batch * p.heads_q * tq * tk));
    if (c.semantics == fg_attn::Semantics::union_keys && c.merge != fg_attn::Merge::none) {
      group_rows_ = c.work_rows / c.tile_q;
      if (c.merge == fg_attn::Merge::xor_greedy) {
        words_ = static_cast<int>(fg_attn::bitset_words(tk));
        groups_.allocate(static_cast<std::size_t>(p.batch * p.heads_q * tq));
        bits_.allocate(static_cast<std::size_t>(p.batch * p.heads_q * tq * words_));
        dist_.allocate(static_cast<std::size_t>(p.batch * p.heads_q * tq * tq));
      }
    }
    if (p.dtype == DType::bf16) set_limits<__nv_bfloat16>();
    else set_limits<__half>();
  }

  MaskShape shape() const override { return shape_; }
  std::size_t workspace_bytes() const override {
    return q_mean_.bytes() + k_mean_.bytes() + logits_.bytes() + groups_.bytes() + bits_.bytes() + dist_.bytes();
  }

  void run(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) override {
    if (p_.dtype == DType::bf16) launch<__nv_bfloat16>(q, k, mask, stream);
    else launch<__half>(q, k, mask, stream);
  }

 private:
  template <class T>
  void set_limits() {
    check(cudaFuncSetAttribute(detail::pool_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(detail::pool_bytes(std::max(c_.tile_q, c_.tile_k), p_.head_dim))),
          "shared memory");
    check(cudaFuncSetAttribute(logits_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(logits_bytes(p_.head_dim))),
          "shared memory");
    check(cudaFuncSetAttribute(select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(select_bytes(shape_.num_k_tiles()))),
          "shared memory");
    if (words_ > 0)
      check(cudaFuncSetAttribute(xor_groups_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(xor_groups_bytes(shape_.num_q_tiles()))),
            "shared memory");
  }

  template <class T>
  void launch(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) {
    const int d = static_cast<int>(p_.head_dim), hq = static_cast<int>(p_.heads_q), hkv = static_cast<int>(p_.heads_kv);
    const int tq = static_cast<int>(shape_.num_q_tiles()), tk = static_cast<int>(shape_.num_k_tiles());
    const Rows<T> qr{static_cast<const T*>(q.data), q.stride_b, q.stride_h, q.stride_n, seqs_.cu_q};
    const Rows<T> kr{static_cast<const T*>(k.data), k.stride_b, k.stride_h, k.stride_n, seqs_.cu_kv};
    const auto bq = static_cast<unsigned>(p_.batch);
    if (tq == 0) return;
    if (tk > 0)
      detail::pool_kernel<T><<<dim3(tk, bq * hkv), kPoolThreads, detail::pool_bytes(c_.tile_k, d), stream>>>(
          kr, seqs_, false, hkv, c_.tile_k, d, tk, nullptr, k_mean_.ptr, nullptr);
    detail::pool_kernel<T><<<dim3(tq, bq * hq), kPoolThreads, detail::pool_bytes(c_.tile_q, d), stream>>>(
        qr, seqs_, true, hq, c_.tile_q, d, tq, nullptr, q_mean_.ptr, nullptr);
    LogitArgs l{};
    l.seqs = seqs_;
    l.heads_q = hq;
    l.heads_kv = hkv;
    l.d = d;
    l.tile_q = c_.tile_q;
    l.tile_k = c_.tile_k;
    l.tq = tq;
    l.tk = tk;
    l.scale_log2 = scale_log2(p_.softmax_scale());
    l.size_weighted_tail = c_.size_weighted_tail;
    l.q_mean = q_mean_.ptr;
    l.k_mean = k_mean_.ptr;
    l.logits = logits_.ptr;
    logits_kernel<<<dim3((tq + kRowsPerCta - 1) / kRowsPerCta, bq * hq), kThreads, logits_bytes(d), stream>>>(l);
    SelectArgs s{};
    s.seqs = seqs_;
    s.heads_q = hq;
    s.tile_q = c_.tile_q;
    s.tile_k = c_.tile_k;
    s.tq = tq;
    s.tk = tk;
    s.top_p = c_.top_p;
    s.logits = logits_.ptr;
    s.row_begin = mask.row_begin();
    s.row_end = mask.row_end();
    s.tiles = mask.tiles();
    select_kernel<<<dim3(tq, bq * hq), kSelectThreads, select_bytes(tk), stream>>>(s);
    if (group_rows_ > 0) {  // UNION: every member of a group gets the group's union
      if (words_ > 0) {
        bits_kernel<<<dim3(tq, bq * hq), 128, static_cast<std::size_t>(words_) * 8, stream>>>(
            mask.row_begin(), mask.row_end(), mask.tiles(), tq, words_, bits_.ptr);
        const unsigned pair_tiles = static_cast<unsigned>((tq + kPairTile - 1) / kPairTile);
        distance_kernel<<<dim3(pair_tiles, pair_tiles, bq * hq), 256, 0, stream>>>(tq, words_, bits_.ptr, dist_.ptr);
        xor_groups_kernel<<<bq * hq, kGroupThreads, xor_groups_bytes(tq), stream>>>(seqs_, hq, c_.tile_q, tq,
                                                                                     group_rows_, dist_.ptr, groups_.ptr);
      }
      union_rows_kernel<<<dim3((tq + group_rows_ - 1) / group_rows_, bq * hq), 256, static_cast<std::size_t>(tk), stream>>>(
          seqs_, hq, c_.tile_q, c_.tile_k, tq, tk, group_rows_, words_ > 0 ? groups_.ptr : nullptr, mask.row_begin(),
          mask.row_end(), mask.tiles());
    }
    check(cudaGetLastError(), "kernel launch");
    mask.build_work_order(stream);
  }

  fg_attn::Config c_;
  Problem p_;
  MaskShape shape_;
  Seqs seqs_;
  int group_rows_ = 0;  ///< R of a UNION plan that merges (0: the mask is the rows' own tiles)
  int words_ = 0;       ///< bitset words per row of a merge-XOR plan (0: none)
  DeviceArray<float> q_mean_, k_mean_, logits_;
  DeviceArray<std::int32_t> groups_;
  DeviceArray<std::uint64_t> bits_;
  DeviceArray<std::uint16_t> dist_;
};

}  // namespace

std::vector<std::string> fg_attn_not_supported_reasons(const fg_attn::Config& c, const Problem& p) {
  std::vector<std::string> why;
  const MaskShape shape = MaskShape::of(p, c.tile_q, c.tile_k);
  if (c.semantics == fg_attn::Semantics::union_keys && c.merge == fg_attn::Merge::xor_greedy &&
      xor_groups_bytes(shape.num_q_tiles()) > detail::kMaxSharedBytes)
    why.push_back("the CUDA FG-Attn estimator's merge-XOR plan holds at most ~25000 query tiles per head in shared memory");
  if (p.head_dim % 8 != 0) why.push_back("the CUDA FG-Attn estimator needs head_dim a multiple of 8");
  if (p.heads_q % p.heads_kv != 0) why.push_back("the CUDA FG-Attn estimator needs heads_q a multiple of heads_kv");
  const int keys = detail::pow2_at_least(std::max<std::int64_t>(shape.num_k_tiles(), 1));
  if (keys > detail::kMaxSortKeys)
    why.push_back("the CUDA FG-Attn estimator selects over at most 16384 key tiles per row (longer sequences: a larger tile_k)");
  if (detail::pool_bytes(std::max(c.tile_q, c.tile_k), p.head_dim) > detail::kMaxSharedBytes ||
      logits_bytes(p.head_dim) > detail::kMaxSharedBytes || select_bytes(keys) > detail::kMaxSharedBytes)
    why.push_back("the CUDA FG-Attn estimator's tiles (tile × head_dim) do not fit in shared memory");
  if (p.batch * p.heads_q > 65535) why.push_back("the CUDA FG-Attn estimator takes at most 65535 (batch, head) pairs");
  return why;
}

std::unique_ptr<DeviceEstimator> make_fg_attn_estimator(const fg_attn::Config& c, const Problem& p,
                                                        const std::int64_t* cu_q, const std::int64_t* cu_kv) {
  return std::make_unique<FgAttnEstimator>(c, p, cu_q, cu_kv);
}

}  // namespace spattn::cuda
