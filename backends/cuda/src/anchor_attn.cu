// AnchorAttention's estimator on the GPU (research/anchorattention.md; the rules: spattn/methods/anchor_attn.hpp).
// Five steps on the caller's stream (no allocation, no host synchronisation: graph-capturable):
//   1. anchor pass: the executor's statistics pass (state_pass_async: the mma.sync flash kernel without PV) over the
//      anchor-region mask — per group, the sink keys and the group's local window; the kernel's causal rule clips
//      them per row exactly as anchor_attn::row_anchor_region does. That mask depends on the shape only, so it is
//      built on the host and uploaded once, with the estimator. Each row's anchor is its running max m.
//   2. pool: the mean query of every pooled block of `block` rows (detail::pool_kernel: pooling.hpp's order, the
//      reference's bits);
//   3. anchor means: ā of every pooled block, column_mean of its rows' anchors (the reference's order);
//   4. stripes: for every (group, candidate key) the decision anchor_attn::stripe_selected(q̄·k·scale·log2 e, θ, ā)
//      of each pooled block, OR-ed over the group's blocks into one bit per key. The products run on the tensor
//      cores (mma.sync m16n8k16, fp32 accumulate): q̄ (fp32) is split into two fp16/bf16 pieces whose sum is q̄
//      within 2⁻¹⁸·|q̄| (hi = RN(q̄), lo = RN(q̄ − hi)), K is exact in its input type, so the score differs from the
//      reference's fixed-order dot_lanes8 by about the fp32 sums' own rounding. One CTA takes up to 4 query heads of
//      one KV head (K loaded once for them) × 1024 keys of one group, each warp's A fragments held in registers
//      (D = 256: those of the first 128 channels; the rest read from shared memory at their k-step, reg_k_steps);
//   5. write: per (batch, query head, group) the row sink, kept candidates before the window, the window, kept
//      candidates after it (non-causal), ascending, into the DeviceTileMask (tile_q = block·step, tile_k = 1).
// The anchors (step 1, fp32 tensor-core sums) and the stripe scores (step 4) are the two values computed in another
// order than the reference's: decisions may differ from the reference's where |margin| is within their rounding
// (tests/gpu: anchors within their bound, then every decision against reference::anchor_attn_select over the device's
// anchors, within the score bound). Everything else is the reference's arithmetic (--fmad=false).
// run_resumed (Plan::run, sparse_attention): step 1 is the executor itself over the anchor-region mask — O and the
// states written, on the sm90 kernel where it runs — and step 5 writes only the kept candidates; the executor then
// resumes each row from its state (AttendOptions::resume), so the anchor region is computed once (research/
// anchorattention.md: the authors' kernel reuses it the same way).
// Workspace: anchor states B·Hq·Nq, pooled means B·Hq·⌈Nq/block⌉·(D + 1) floats, the decision bits
// B·Hq·groups·⌈Nkv/32⌉ words, and the anchor-region mask.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cub/block/block_scan.cuh>

#include "estimator_interface.cuh"
#include "estimator_kernels.cuh"
#include "host_helpers.cuh"
#include "spattn/methods/anchor_attn.hpp"
#include "spattn/pooling.hpp"
#include "warp_primitives.cuh"

namespace spattn::cuda {
namespace {

using detail::check;
using detail::DeviceArray;
using detail::Rows;
using detail::Seqs;

constexpr int kPoolThreads = 128, kWriteThreads = 256;
constexpr int kStripeWarps = 4, kStripeThreads = kStripeWarps * 32;
constexpr int kChunk = kStripeWarps * 32;  ///< keys per stripe-kernel step: 32 per warp
constexpr int kCtaKeys = 1024;             ///< keys per stripe CTA (its A operand is loaded once for them)
constexpr int kMaxMTiles = 4;              ///< pooled rows per stripe CTA: up to 4 × 16
constexpr int kPieces = 2;
/// k-steps of 16 channels whose A fragments a warp holds in registers (kPieces × 4 registers each): all of them up to
/// D = 128 (64 registers); at D = 256 the first 8, as at D = 128 — all 16 would be 128 registers of fragments a thread
/// beside NT·4 accumulators (D = 128, NT 16 already takes 168) — and the fragments of channels [128, 256) stay in
/// shared memory (their own region after ā: kPieces × 64 rows × 128, 32 KB), read by ldmatrix at their k-step
/// (ptxas, CUDA 13.0: 233 registers at D = 256, NT 16, no spills). Same fragments in the same mma order: the products
/// are those of an all-register kernel.
constexpr int reg_k_steps(int d) { return d <= 128 ? d / 16 : 8; }
constexpr int shared_a_cols(int d) { return d - 16 * reg_k_steps(d); }  ///< 0, or 128 at D = 256

/// Heads per stripe CTA: the most of 4, 2, 1 that divides the GQA ratio and whose pooled rows fit kMaxMTiles.
int heads_per_cta(std::int64_t ratio, int m_tiles) {
  for (int h : {4, 2, 1})
    if (ratio % h == 0 && h * m_tiles <= kMaxMTiles) return h;
  return 1;
}
int m_tiles_of(const anchor_attn::Config& c) { return (c.step + 15) / 16; }

/// The anchor-region mask: per (batch, KV head, group) the sink keys and the group's local window (anchor_attn::
/// group_keys), tile_k = 1; rows past a sequence's end are empty.
TileMask region_mask(const Problem& p, const anchor_attn::Config& c) {
  const std::int32_t g = c.group_rows();
  const MaskShape shape = MaskShape::of(p, g, 1, /*per KV head: the region does not depend on the head*/ true);
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(shape.num_rows()));
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
    for (std::int64_t t = 0; t * g < nq; ++t) {
      const std::int64_t first = t * g, last = std::min(first + g, nq) - 1;
      const anchor_attn::GroupKeys keys = anchor_attn::group_keys(c.n_sink, c.local_lead, g, first, last, nq, nkv, p.causal);
      std::vector<std::int32_t> row;
      for (std::int64_t i = 0; i < keys.region_size(); ++i) row.push_back(static_cast<std::int32_t>(keys.region_key(i)));
      for (std::int64_t h = 0; h < shape.mask_heads; ++h) rows[static_cast<std::size_t>((b * shape.mask_heads + h) * shape.num_q_tiles() + t)] = row;
    }
  }
  return TileMask::from_rows(shape, std::move(rows));
}

struct Geometry {
  Seqs seqs;
  int heads_q, heads_kv, d, block, step, group;
  std::int64_t n_sink, local_lead;
  int slots;   ///< pooled blocks per (b, hq): ⌈Nq/block⌉
  int groups;  ///< ⌈Nq/group⌉
  int words;   ///< ⌈Nkv/32⌉
  __device__ anchor_attn::GroupKeys keys(int b, int t, std::int64_t nq, std::int64_t nkv) const {
    const std::int64_t first = static_cast<std::int64_t>(t) * group, last = (first + group < nq ? first + group : nq) - 1;
    return anchor_attn::group_keys(n_sink, local_lead, group, first, last, nq, nkv, seqs.causal);
  }
};

/// ā of pooled block blk (grid-stride over B·Hq·slots): column_mean of its rows' anchors (m of the anchor states).
__global__ void anchor_mean_kernel(Geometry a, const SoftmaxState* state, float* abar) {
  const std::int64_t total = static_cast<std::int64_t>(a.seqs.batch) * a.heads_q * a.slots;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t bh = e / a.slots, blk = e % a.slots, b = bh / a.heads_q;
    const std::int64_t nq = a.seqs.len_q(static_cast<int>(b)), first = blk * a.block;
    if (first >= nq) continue;
    const std::int64_t count = nq - first < a.block ? nq - first : a.block;
    const SoftmaxState* rows = state + bh * a.seqs.nq + first;
    abar[e] = column_mean([&](std::int64_t r) { return rows[r].m; }, count);
  }
}

struct StripeArgs {
  Geometry g;
  int heads_per_cta, m_tiles;
  float scale_log2, theta2;
  const float* qbar;      ///< [(b·Hq + h)·slots + blk][d]
  const float* abar;      ///< [(b·Hq + h)·slots + blk]
  std::uint32_t* keep;    ///< [((b·Hq + h)·groups + t)·words + w]: bit j % 32 of word j / 32 = key j selected
};

/// The CTA's m-tiles (16 pooled rows of one head each) and how its 4 warps share a 128-key step: warp w takes m-tile
/// w % mts and the (w / mts)-th of 4 / mts key slices (NT = 16 / slices n8 tiles); with 3 m-tiles warp 3 idles.
SPATTN_HD inline int slices_of(int mts) { return mts == 1 ? 4 : mts == 2 ? 2 : 1; }

/// One CTA: query heads [h0, h0 + heads_per_cta) of one KV head (blockIdx.z), group blockIdx.x, keys
/// [blockIdx.y·kCtaKeys, + kCtaKeys), 128 keys per step (K double-buffered by cp.async). Each warp keeps its m-tile's
/// A fragments (the pieces of q̄) in registers for the whole CTA (D = 256: those of the first 128 channels; the rest
/// in shared memory, reg_k_steps) and scores NT·8 keys per step; the decisions of a head's m-tiles are OR-ed in shared
/// memory into one word per 32 keys.
template <class T, int D, int NT>
__global__ void __launch_bounds__(kStripeThreads) stripe_kernel(Rows<T> k, StripeArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* s_k = reinterpret_cast<T*>(smem_raw);                         // 2 × kChunk × D; A is staged in buffer 1 first
  float* s_abar = reinterpret_cast<float*>(s_k + 2 * kChunk * D);  // kMaxMTiles × 16
  constexpr int kRegSteps = reg_k_steps(D), kSharedCols = shared_a_cols(D);
  T* s_a_hi = reinterpret_cast<T*>(s_abar + kMaxMTiles * 16);  // D = 256: kPieces × 64 × kSharedCols (16-byte aligned)
  __shared__ std::uint32_t s_words[kMaxMTiles][kChunk / 32];
  const Geometry& g = a.g;
  const int per_kv = g.heads_q / g.heads_kv / a.heads_per_cta;
  const int b = static_cast<int>(blockIdx.z) / (g.heads_kv * per_kv);
  const int rest = static_cast<int>(blockIdx.z) % (g.heads_kv * per_kv);
  const int hkv = rest / per_kv, h0 = hkv * (g.heads_q / g.heads_kv) + (rest % per_kv) * a.heads_per_cta;
  const int t = static_cast<int>(blockIdx.x);
  const std::int64_t nq = g.seqs.len_q(b), nkv = g.seqs.len_kv(b);
  if (static_cast<std::int64_t>(t) * g.group >= nq) return;
  const anchor_attn::GroupKeys keys = g.keys(b, t, nq, nkv);
  const std::int64_t lo = static_cast<std::int64_t>(blockIdx.y) * kCtaKeys;
  const std::int64_t hi = lo + kCtaKeys < nkv ? lo + kCtaKeys : nkv;
  const bool before = lo < keys.candidates_end && hi > keys.sink_end, after = hi > keys.after_begin;
  if (lo >= hi || !(before || after)) return;  // no candidate key here
  const std::int64_t end = after ? hi : (keys.candidates_end < hi ? keys.candidates_end : hi);
  const std::int64_t first_row = static_cast<std::int64_t>(t) * g.group;
  const int blocks = static_cast<int>((((nq - first_row) < g.group ? nq - first_row : g.group) + g.block - 1) / g.block);
  const int mts = a.heads_per_cta * a.m_tiles, rows = mts * 16, per_head = a.m_tiles * 16;

  constexpr int kPiecesPerRow = D / 8;
  auto load = [&](std::int64_t c0, int buf) {
    T* dst = s_k + buf * kChunk * D;
    for (int p = threadIdx.x; p < kChunk * kPiecesPerRow; p += blockDim.x) {
      const int r = p / kPiecesPerRow, col = (p % kPiecesPerRow) * 8;
      const bool ok = c0 + r < nkv;
      detail::cp_async16(detail::smem_addr(dst + detail::swz<D>(r, col)), ok ? k.row(b, hkv, c0 + r) + col : k.data,
                         ok ? 16 : 0);
    }
  };
  load(lo, 0);
  detail::cp_async_commit();

  // A operand, staged in K buffer 1 (kPieces × 64 rows × D fits its kChunk × D): the pooled queries split in pieces;
  // rows past the group's blocks are zeros (they never decide).
  T* s_a = s_k + kChunk * D;
  static_assert(kPieces * kMaxMTiles * 16 <= kChunk, "the A pieces are staged in one K buffer");
  for (int e = threadIdx.x; e < rows * D; e += blockDim.x) {
    const int r = e / D, c = e % D, hh = r / per_head, blk = r % per_head;
    const float v = blk < blocks ? a.qbar[((static_cast<std::int64_t>(b) * g.heads_q + h0 + hh) * g.slots + t * g.step + blk) * D + c]
                                 : 0.0f;
    T piece[kPieces];
    detail::split_pieces<T, kPieces>(v, piece);
    if constexpr (kSharedCols > 0) {
      if (c >= D - kSharedCols) {  // D = 256: channels [128, 256) to their own region, where they stay
#pragma unroll
        for (int i = 0; i < kPieces; ++i)
          s_a_hi[(i * kMaxMTiles * 16) * kSharedCols + detail::swz<kSharedCols>(r, c - (D - kSharedCols))] = piece[i];
        continue;
      }
    }
#pragma unroll
    for (int i = 0; i < kPieces; ++i) s_a[(i * kMaxMTiles * 16) * D + detail::swz<D>(r, c)] = piece[i];
  }
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    const int hh = r / per_head, blk = r % per_head;
    s_abar[r] = blk < blocks ? a.abar[(static_cast<std::int64_t>(b) * g.heads_q + h0 + hh) * g.slots + t * g.step + blk] : 0.0f;
  }
  for (int e = threadIdx.x; e < kMaxMTiles * (kChunk / 32); e += blockDim.x) s_words[e / (kChunk / 32)][e % (kChunk / 32)] = 0;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, t4 = lane % 4;
  const int slices = slices_of(mts), mt = warp % mts, slice = warp / mts;
  const bool active = slice < slices;
  std::uint32_t af[kRegSteps][kPieces][4];
#pragma unroll
  for (int ks = 0; ks < kRegSteps; ++ks)
#pragma unroll
    for (int i = 0; i < kPieces; ++i)
      detail::ldmatrix_x4(af[ks][i], detail::smem_addr(s_a + (i * kMaxMTiles * 16) * D +
                                                       detail::swz<D>(mt * 16 + (lane % 16), ks * 16 + (lane / 16) * 8)));
  const int r0 = mt * 16 + gq, blk0 = r0 % per_head, hh = mt / a.m_tiles;
  const bool valid[2] = {blk0 < blocks, blk0 + 8 < blocks};
  const float abar[2] = {s_abar[r0], s_abar[r0 + 8]};
  __syncthreads();  // A is in registers (D = 256: and in s_a_hi): buffer 1 takes keys from here on

  using M = detail::MmaType<T>;
  int buf = 0;
  for (std::int64_t c0 = lo; c0 < end; c0 += kChunk, buf ^= 1) {
    if (c0 + kChunk < end) load(c0 + kChunk, buf ^ 1);
    detail::cp_async_commit();
    detail::cp_async_wait<1>();
    __syncthreads();
    if (active) {
      const T* sk = s_k + buf * kChunk * D + slice * (NT * 8) * D;
      float acc[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        std::uint32_t a_shared[kPieces][4];  // D = 256, k-steps past the registers': this k-step's fragments
        if constexpr (kSharedCols > 0) {
          if (ks >= kRegSteps) {
#pragma unroll
            for (int i = 0; i < kPieces; ++i)
              detail::ldmatrix_x4(a_shared[i], detail::smem_addr(s_a_hi + (i * kMaxMTiles * 16) * kSharedCols +
                                                                 detail::swz<kSharedCols>(mt * 16 + (lane % 16),
                                                                                          (ks - kRegSteps) * 16 + (lane / 16) * 8)));
          }
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          std::uint32_t bf[4];
          detail::ldmatrix_x4(bf, detail::smem_addr(sk + detail::swz<D>(np * 16 + (lane / 16) * 8 + (lane % 8),
                                                                        ks * 16 + ((lane / 8) % 2) * 8)));
#pragma unroll
          for (int i = 0; i < kPieces; ++i) {
            const std::uint32_t* a_frag = ks < kRegSteps ? af[ks][i] : a_shared[i];
            M::mma(acc[2 * np], a_frag, bf[0], bf[1]);
            M::mma(acc[2 * np + 1], a_frag, bf[2], bf[3]);
          }
        }
      }
      // Decisions: rows gq and gq + 8, keys 8·nt + 2·t4 + e of the warp's slice; OR over the rows.
#pragma unroll
      for (int w = 0; w < NT / 4; ++w) {
        std::uint32_t bits = 0;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          if (!valid[half]) continue;
#pragma unroll
          for (int n = 0; n < 4; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              if (anchor_attn::stripe_selected(acc[4 * w + n][2 * half + e] * a.scale_log2, a.theta2, abar[half]))
                bits |= 1u << (n * 8 + 2 * t4 + e);
        }
        bits = __reduce_or_sync(0xffffffffu, bits);
        if (lane == 0 && bits != 0) atomicOr(&s_words[hh][slice * (NT / 4) + w], bits);
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < a.heads_per_cta * (kChunk / 32); e += blockDim.x) {
      const int head = e / (kChunk / 32), w = e % (kChunk / 32);
      if (c0 + 32 * w < nkv)
        a.keep[((static_cast<std::int64_t>(b) * g.heads_q + h0 + head) * g.groups + t) * g.words + (c0 + 32 * w) / 32] =
            s_words[head][w];
      s_words[head][w] = 0;
    }
    // The next step's prefetch refills this buffer and its OR-s follow its barrier.
  }
  detail::cp_async_wait<0>();
}

using WordScan = cub::BlockScan<int, kWriteThreads>;

/// Calls emit(at, j) for the keys j in [lo, hi) whose bit is set in `words`, at = 0, 1, … ascending; returns their
/// count (to every thread). Rounds of kWriteThreads consecutive words, one per thread (coalesced reads); a block scan
/// of their popcounts places each thread's keys right after the previous thread's, so a warp's stores stay close.
template <class Emit>
__device__ int compact_bits(const std::uint32_t* words, std::int64_t lo, std::int64_t hi, WordScan::TempStorage& scan,
                            Emit emit) {
  if (hi <= lo) return 0;
  int total = 0;
  for (std::int64_t base = lo / 32; base * 32 < hi; base += kWriteThreads) {
    const std::int64_t w = base + threadIdx.x, first = w * 32;
    std::uint32_t x = 0;
    if (first < hi) {
      x = words[w];
      if (first < lo) x &= ~0u << (lo - first);
      if (hi - first < 32) x &= (1u << (hi - first)) - 1u;
    }
    int at = 0, round = 0;
    WordScan(scan).ExclusiveSum(__popc(x), at, round);
    __syncthreads();  // scan storage reused by the next round
    for (at += total; x != 0; x &= x - 1) emit(at++, first + __ffs(x) - 1);
    total += round;
  }
  return total;
}

struct WriteArgs {
  Geometry g;
  bool with_region;  ///< the sink and the window too (false: only the kept candidates, for a resumed executor)
  const std::uint32_t* keep;
  const std::int64_t* row_begin;
  std::int64_t* row_end;
  std::int32_t* tiles;
};

/// One CTA per (batch·query head blockIdx.y, group blockIdx.x): the mask row, ascending.
__global__ void __launch_bounds__(kWriteThreads) write_kernel(WriteArgs a) {
  __shared__ WordScan::TempStorage scan;
  const Geometry& g = a.g;
  const int bh = static_cast<int>(blockIdx.y), b = bh / g.heads_q, t = static_cast<int>(blockIdx.x);
  const std::int64_t row = static_cast<std::int64_t>(bh) * g.groups + t;
  const std::int64_t nq = g.seqs.len_q(b), nkv = g.seqs.len_kv(b);
  std::int32_t* out = a.tiles + a.row_begin[row];
  if (static_cast<std::int64_t>(t) * g.group >= nq) {
    if (threadIdx.x == 0) a.row_end[row] = a.row_begin[row];
    return;
  }
  const anchor_attn::GroupKeys keys = g.keys(b, t, nq, nkv);
  const std::uint32_t* words = a.keep + row * g.words;
  const std::int64_t sink = a.with_region ? keys.sink_end : 0, window_len = a.with_region ? keys.local.end - keys.local.begin : 0;
  for (std::int64_t j = threadIdx.x; j < sink; j += blockDim.x) out[j] = static_cast<std::int32_t>(j);
  std::int32_t* before = out + sink;
  const int kept_before = compact_bits(words, keys.sink_end, keys.candidates_end, scan,
                                       [&](int i, std::int64_t j) { before[i] = static_cast<std::int32_t>(j); });
  std::int32_t* window = before + kept_before;
  for (std::int64_t j = threadIdx.x; j < window_len; j += blockDim.x)
    window[j] = static_cast<std::int32_t>(keys.local.begin + j);
  std::int32_t* after = window + window_len;
  const int kept_after = compact_bits(words, keys.after_begin, nkv, scan,
                                      [&](int i, std::int64_t j) { after[i] = static_cast<std::int32_t>(j); });
  if (threadIdx.x == 0) a.row_end[row] = a.row_begin[row] + (after - out) + kept_after;
}

/// The stripe kernel's dynamic shared memory: the two K buffers, ā, and at D = 256 the A pieces of channels [128, 256)
/// (128 + 0.25 + 32 KB = 164,096 bytes: within sm_80's 163 KB (166,912) as well as sm_90's 227 KB).
constexpr std::size_t stripe_bytes(int d) {
  return static_cast<std::size_t>(2 * kChunk * d) * 2 + kMaxMTiles * 16 * sizeof(float) +
         static_cast<std::size_t>(kPieces * kMaxMTiles * 16 * shared_a_cols(d)) * 2;
}
static_assert(stripe_bytes(256) <= 163 * 1024, "the D = 256 stripe kernel fits sm_80's shared memory too");

/// Launches (or sets the shared-memory limit of) the stripe kernel for the CTA's m-tiles.
template <class T, int D>
void stripe_launch(int mts, const dim3& grid, cudaStream_t stream, const Rows<T>& k, const StripeArgs& s, bool limits_only) {
  const auto go = [&](auto kernel) {
    if (limits_only)
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(stripe_bytes(D))),
            "shared memory");
    else
      kernel<<<grid, kStripeThreads, stripe_bytes(D), stream>>>(k, s);
  };
  switch (slices_of(mts)) {
    case 4: return go(stripe_kernel<T, D, 4>);
    case 2: return go(stripe_kernel<T, D, 8>);
    default: return go(stripe_kernel<T, D, 16>);
  }
}

class AnchorAttnEstimatorImpl final : public AnchorAttnEstimator {
 public:
  AnchorAttnEstimatorImpl(const anchor_attn::Config& c, const Problem& p, const std::int64_t* cu_q,
                          const std::int64_t* cu_kv)
      : c_(c), p_(p), shape_(MaskShape::of(p, c.group_rows(), 1)), region_host_(region_mask(p, c)), region_(region_host_),
        cu_q_(cu_q), cu_kv_(cu_kv) {
    g_.seqs = Seqs::of(p, cu_q, cu_kv);
    g_.heads_q = static_cast<int>(p.heads_q);
    g_.heads_kv = static_cast<int>(p.heads_kv);
    g_.d = static_cast<int>(p.head_dim);
    g_.block = c.block;
    g_.step = c.step;
    g_.group = c.group_rows();
    g_.n_sink = c.n_sink;
    g_.local_lead = c.local_lead;
    g_.slots = static_cast<int>((p.seqlen_q + c.block - 1) / c.block);
    g_.groups = static_cast<int>(shape_.num_q_tiles());
    g_.words = static_cast<int>((p.seqlen_kv + 31) / 32);
    m_tiles_ = m_tiles_of(c);
    heads_per_cta_ = heads_per_cta(p.heads_q / p.heads_kv, m_tiles_);
    const auto bh = static_cast<std::size_t>(p.batch * p.heads_q);
    state_.allocate(bh * static_cast<std::size_t>(p.seqlen_q));
    qbar_.allocate(bh * g_.slots * static_cast<std::size_t>(p.head_dim));
    abar_.allocate(bh * g_.slots);
    keep_.allocate(bh * g_.groups * static_cast<std::size_t>(g_.words));
    empty_.allocate(1);
    if (p.dtype == DType::bf16) set_limits<__nv_bfloat16>();
    else set_limits<__half>();
  }

  MaskShape shape() const override { return shape_; }
  std::size_t workspace_bytes() const override {
    return state_.bytes() + qbar_.bytes() + abar_.bytes() + keep_.bytes() + empty_.bytes() + region_.bytes();
  }
  /// The anchor pass is the executor's statistics pass (no V, no O); the mask gets the whole selection.
  void run(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) override {
    if (g_.groups == 0) return;
    check(cudaMemsetAsync(empty_.ptr, 0, sizeof(int), stream), "cudaMemsetAsync");
    state_pass_async(p_, q, k, region_, state_.ptr, cu_q_, cu_kv_, empty_.ptr, stream);
    select(q, k, mask, /*with_region*/ true, stream);
  }
  /// The anchor pass is the executor over the anchor region (O and the states written); the mask gets the stripes.
  void run_resumed(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                   DeviceTileMask& mask, cudaStream_t stream) override {
    if (g_.groups == 0) return;
    check(cudaMemsetAsync(empty_.ptr, 0, sizeof(int), stream), "cudaMemsetAsync");
    attend_async(p_, q, k, v, region_, o, nullptr, cu_q_, cu_kv_, empty_.ptr, stream, nullptr, {state_.ptr, nullptr});
    select(q, k, mask, /*with_region*/ false, stream);
  }
  const TileMask* covered() const override { return &region_host_; }
  const SoftmaxState* resume_states() const override { return state_.ptr; }
  std::vector<SoftmaxState> anchors(cudaStream_t stream) const override {
    std::vector<SoftmaxState> out(state_.n);
    check(cudaStreamSynchronize(stream), "synchronize");
    check(cudaMemcpy(out.data(), state_.ptr, state_.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    out.resize(static_cast<std::size_t>(p_.batch * p_.heads_q * p_.seqlen_q));
    return out;
  }
  SoftmaxState* anchors_workspace() const override { return state_.ptr; }

 private:
  void select(const TensorView& q, const TensorView& k, DeviceTileMask& mask, bool with_region, cudaStream_t stream) {
    if (p_.dtype == DType::bf16) launch<__nv_bfloat16>(q, k, mask, with_region, stream);
    else launch<__half>(q, k, mask, with_region, stream);
  }

  template <class T>
  void set_limits() {
    check(cudaFuncSetAttribute(detail::pool_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(detail::pool_bytes(c_.block, p_.head_dim))),
          "shared memory");
    const int mts = m_tiles_ * heads_per_cta_;
    detail::with_head_dim(p_.head_dim, [&](auto dim) {
      stripe_launch<T, dim()>(mts, dim3(), nullptr, Rows<T>{}, StripeArgs{}, true);
    });
  }

  /// Steps 2–5 over the anchor states in state_.
  template <class T>
  void launch(const TensorView& q, const TensorView& k, DeviceTileMask& mask, bool with_region, cudaStream_t stream) {
    const auto bq = static_cast<unsigned>(p_.batch);
    const int hq = g_.heads_q, d = g_.d;
    const Rows<T> qr{static_cast<const T*>(q.data), q.stride_b, q.stride_h, q.stride_n, g_.seqs.cu_q};
    const Rows<T> kr{static_cast<const T*>(k.data), k.stride_b, k.stride_h, k.stride_n, g_.seqs.cu_kv};
    detail::pool_kernel<T><<<dim3(g_.slots, bq * hq), kPoolThreads, detail::pool_bytes(c_.block, d), stream>>>(
        qr, g_.seqs, true, hq, c_.block, d, g_.slots, nullptr, qbar_.ptr, nullptr);
    const std::int64_t means = static_cast<std::int64_t>(bq) * hq * g_.slots;
    anchor_mean_kernel<<<static_cast<unsigned>(std::min<std::int64_t>((means + 255) / 256, 4096)), 256, 0, stream>>>(
        g_, state_.ptr, abar_.ptr);
    StripeArgs s{};
    s.g = g_;
    s.m_tiles = m_tiles_;
    s.heads_per_cta = heads_per_cta_;
    const int mts = m_tiles_ * heads_per_cta_;
    s.scale_log2 = scale_log2(p_.softmax_scale());
    s.theta2 = anchor_attn::theta_log2(c_.theta);
    s.qbar = qbar_.ptr;
    s.abar = abar_.ptr;
    s.keep = keep_.ptr;
    // Groups vary fastest: the CTAs in flight at once read the same keys (one K range, many groups: L2 hits).
    const dim3 grid(static_cast<unsigned>(g_.groups), static_cast<unsigned>((p_.seqlen_kv + kCtaKeys - 1) / kCtaKeys),
                    bq * static_cast<unsigned>(hq / s.heads_per_cta));
    detail::with_head_dim(d, [&](auto dim) { stripe_launch<T, dim()>(mts, grid, stream, kr, s, false); });
    WriteArgs w{g_, with_region, keep_.ptr, mask.row_begin(), mask.row_end(), mask.tiles()};
    write_kernel<<<dim3(static_cast<unsigned>(g_.groups), bq * hq), kWriteThreads, 0, stream>>>(w);
    check(cudaGetLastError(), "kernel launch");
    mask.build_work_order(stream);
  }

  anchor_attn::Config c_;
  Problem p_;
  MaskShape shape_;
  TileMask region_host_;
  DeviceTileMask region_;
  const std::int64_t* cu_q_;
  const std::int64_t* cu_kv_;
  Geometry g_{};
  int m_tiles_ = 1, heads_per_cta_ = 1;  ///< the stripe CTA's pooled m-tiles per head and heads (its m-tiles: their product)
  DeviceArray<SoftmaxState> state_;
  DeviceArray<float> qbar_, abar_;
  DeviceArray<std::uint32_t> keep_;
  DeviceArray<int> empty_;
};

}  // namespace

std::vector<std::string> anchor_attn_not_supported_reasons(const anchor_attn::Config& c, const Problem& p) {
  std::vector<std::string> why;
  // The stripe kernel's instantiations (detail::with_head_dim); at 256 the A fragments of channels [128, 256) are read
  // from shared memory instead of registers (reg_k_steps).
  if (p.head_dim != 64 && p.head_dim != 96 && p.head_dim != 128 && p.head_dim != 256)
    why.push_back("the CUDA AnchorAttention estimator needs head_dim 64, 96, 128 or 256");
  if (p.dtype != DType::f16 && p.dtype != DType::bf16) why.push_back("the CUDA AnchorAttention estimator needs f16 or bf16 inputs");
  if (c.group_rows() % 64 != 0)
    why.push_back("the CUDA AnchorAttention estimator needs block·step (the group) a multiple of 64 (the executor's query tiles)");
  if (c.step > 16 * kMaxMTiles) why.push_back("the CUDA AnchorAttention estimator takes step <= 64 pooled blocks per group");
  if (detail::pool_bytes(c.block, p.head_dim) > detail::kMaxSharedBytes)
    why.push_back("the CUDA AnchorAttention estimator's pooled blocks (block × head_dim) do not fit in shared memory");
  if (p.seqlen_kv >= (std::int64_t{1} << 31)) why.push_back("the CUDA AnchorAttention estimator needs Nkv < 2^31");
  if (p.seqlen_kv > std::int64_t{65535} * kCtaKeys || p.batch * p.heads_q > 65535)
    why.push_back("the CUDA AnchorAttention estimator takes Nkv <= 65535·1024 and at most 65535 (batch, head) pairs");
  return why;
}

std::unique_ptr<AnchorAttnEstimator> make_anchor_attn_estimator(const anchor_attn::Config& c, const Problem& p,
                                                                const std::int64_t* cu_q, const std::int64_t* cu_kv) {
  return std::make_unique<AnchorAttnEstimatorImpl>(c, p, cu_q, cu_kv);
}

}  // namespace spattn::cuda
