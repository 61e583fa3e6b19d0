// SALE's estimator on the GPU (research/sale.md; the rules: spattn/methods/sale.hpp). Six steps on the caller's stream
// (no allocation, no host synchronisation: graph-capturable), this file compiled with --fmad=false so that the core's
// fp32 expressions round as on the host:
//   1. means: μ_q per (batch, query head) and μ_k per (batch, KV head) in pooling.hpp's blocked sequence_mean order
//      (detail::chunk_sum_kernel + sequence_mean_kernel, shared with SpargeAttn): the reference's bits;
//   2. sink-local statistics: the executor's statistics pass (state_pass_async: the mma.sync flash kernel without PV)
//      over a mask that lists, per (batch, query head, 64-row block) with candidates, key block 0 and the local blocks
//      [candidate_end(S), n_max); the kernel's causal rule clips each row exactly as sale::sink_local_region. That mask
//      depends on the shape and the per-head τ only, so it is built on the host and uploaded once, with the estimator.
//      The pass scores q·k, the reference q·k' (k' = k − μ_k): step 4 writes the states in the reference's domain,
//      m −= scale·log2e·(q·μ_k) (l is relative to m and does not change), into a second array. Resumed
//      (run_resumed: Plan::run), this step is the executor itself over that mask — P·V too, O and the q·k states
//      written — and the executor then resumes every row from them over the kept candidates only (AttendOptions::
//      resume): the sink-local tiles are computed once, and are part of the answer;
//   3. K': per 32-key block of a (batch, KV head), k' = k − μ_k (subtract_mean's op), group amax over the group's valid
//      keys (block groups span a 128-key segment, 4 CTAs: a pass before, 3a, writes every key's max |k'|),
//      sale::group_scale / quant_code: codes and scales bit-identical to reference::sale_quantize_k; and the
//      per-key bias qmk_j = dot_lanes8(μ_q, k'_j) of every query head of the GQA group (the core's fixed order);
//   4. Q': per 64-row block of a (batch, query head), q' = q − μ_q, the groups of rows 16a+r / 16a+r+8 (or the block),
//      codes and scales bit-identical to reference::sale_quantize_q; the state correction of step 2;
//   5. candidates: per (batch, query head, 64-row query block) — one CTA, 4 warps of 16 rows — the candidate key blocks
//      [1, candidate_end) one 4-block segment at a time (K codes, qmk and K scales in a two-stage cp.async pipeline).
//      Integer products on the tensor cores with mma.sync m16n8k32 s8·s8 → s32: int4 codes in [−7, 7] are valid s8
//      values, so ONE int8 path gives the exact integer products of both bit widths. On sm_90a (D = 128) the products
//      are wgmma m64n64k32 s8 instead, per warpgroup and half segment, both operands in shared memory (sm90.cuh's
//      128-byte swizzle). int4 codes off Hopper (sm80/sm89, the paper's kernel): steps 3 and 4 also write them two per
//      byte, and the mma.sync kernel runs m16n8k64 s4 on them — half the bytes and half the mma of the s8 path (twice
//      the int8 rate on those GPUs), the same products; on Hopper the s4 mma is emulated, so int4 runs as s8 there
//      (SPATTN_CUDA_KERNEL=sm80 forces the s4 kernel, for its tests). A thread's accumulators hold rows g and g + 8 —
//      one Q scale group (or a part of the block's) — and keys 8a + 2·t4 + c of each block — K scale group t4 (or a
//      part of its segment's) — so sale::GroupMax runs inside the thread in the reference's key order (bias_units
//      once per key for both rows), and the margin of a block is the max over the CTA's threads of
//      GroupMax.estimate() − T_r (T_r = sale::threshold of the corrected state): the reference's float margin, bit for
//      bit. Without kept margins (the pipeline), a row's largest acc + c_j, c_j its
//      key's folded bias (sale::folded_bias: the integer nearest qmk_j/u, one fma per key and thread, shared by both
//      rows), is one add-and-max per product (__viaddmax_s32), and sale::folded_decision decides from it (the estimate
//      lies between u·(V − 1) and u·(V + 1)); a row within that of its threshold is settled exactly when its thread's 8
//      biases are certified from the reciprocal (sale::folded_bias_exact: then V is GroupMax's own integer max);
//      GroupMax runs only for the rest, for tail blocks, or when the guard fails (sale::folded_bias_ok against the
//      head's max |qmk|, an atomic max of step 3). The decision is the same. The GroupMax path divides once per thread
//      and block (sale::bias_units with the unit's reciprocal).
//      sale::selected decides; the row is written ascending — block 0, the kept candidates, the local blocks (resumed:
//      the kept candidates only) — into the DeviceTileMask, and build_work_order follows.
// Bit-identical to the reference: codes, scales, qmk, and every margin and decision GIVEN the sink-local states (tests/
// gpu: reference::sale_select over the device's states). The states themselves are tensor-core sums in another order
// than the reference's: within a stated rounding bound of reference::sale_estimate's (tests/gpu), so masks may differ
// from the pure reference where a margin is within that rounding.
//
// Cost, and why no kernel of it reaches 5 % of dense attention on Hopper (H100, causal, Hq 32, Hkv 8, D 128, 128K): the
// candidates are ≈ Hq · Σ_t (2t − 4) ≈ 134M block pairs of 64 × 32 × 128 int8 MACs = 3.5e13 MACs — half the MACs of the
// causal Q·Kᵀ itself; at the int8 mma.sync rate (≈ 0.5 of the 1979 TOPS dense peak) that alone is ≈ 70 ms. The K codes
// stream from L2 once per CTA: ≈ 4.3 KB per head and block pair, ≈ 580 GB at 128K (overlapped by the cp.async
// pipeline; four heads per CTA read a quarter of that, and were slower: see kCandidateThreads). SALE's estimate is a
// quantized Q·Kᵀ over every candidate block: int8 runs at 2× the bf16 rate here, while the authors' int4 selection pass
// (10–13 % of FA2) ran on an RTX 4090, where int4 runs at 4× fp16. The candidate kernel is ≈ 85 % of the estimate and
// latency-bound on its per-key epilogue (≈ 12 instructions per product: the folded biases, the maxima, the decisions),
// not on the tensor cores or memory; its measurements: bench/results/gpu-pipeline.md (SALE sections).
// SaleBuffers (the workspace): μ (and chunk sums), Q codes B·Hq·Nq·D and K codes B·Hkv·Nkv·D bytes (plus half of
// that packed, int4 off Hopper), scales, qmk B·Hq·Nkv floats and its max |qmk| per (batch, query head),
// sink-local states 2·B·Hq·Nq (q·k and q·k'), the sink-local mask; margins (B·Hq·Tq·Tk floats) only for tests (keep_margins).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "estimator_interface.cuh"
#include "estimator_kernels.cuh"
#include "flash.cuh"
#include "host_helpers.cuh"
#include "sm90.cuh"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/sale.hpp"
#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/pooling.hpp"
#include "warp_primitives.cuh"

namespace spattn::cuda {
namespace {

using detail::check;
using detail::DeviceArray;
using detail::Rows;
using detail::Seqs;
using detail::with_head_dim;

constexpr int kBQ = sale::kBlockQ, kBK = sale::kBlockK, kSeg = sale::kSegment;
constexpr int kQuantThreads = 128;
constexpr int kChunkKeys = kSeg * kBK;  ///< keys per candidate-kernel step: one segment of 4 blocks
/// Segments in shared memory: the one being scored and the next one arriving (requested at the top of the step
/// before, after the barrier that every warp passes once it has scored the segment whose stage it refills). Two
/// stages, not three, so that four 128-thread CTAs fit an SM (with __launch_bounds__ capping the registers at 128):
/// measured on an H200, 16 warps an SM instead of 12 cut the estimate at Hq 6 / Hkv 2 by 15 %
/// (bench/results/gpu-pipeline.md, 2026-11-29).
constexpr int kStages = 2;
/// The candidate kernel: one query head and 64-row block per CTA, 4 warps of 16 rows, built for 4 CTAs an SM (16 warps,
/// 128 registers a thread at most). Several heads of one KV head per CTA (sharing the K codes) were faster while an SM
/// held 12 warps of one head; with 16, one head per CTA is 7–8 % faster at a GQA ratio of 4 and 6 % at 2 (H200,
/// bench/results/gpu-pipeline.md, 2026-11-29). Five CTAs (96 registers) spill and are 13–15 % slower (same page).
constexpr int kCandidateWarps = kBQ / 16, kCandidateThreads = 32 * kCandidateWarps, kCandidateBlocksPerSm = 4;

/// The sink-local mask (64 × 32 tiles, per query head): per query block with candidates, key block 0 and the local
/// blocks [candidate_end(S), n_max); rows without candidates need no statistics (empty).
TileMask sink_local_mask(const Problem& p, const sale::Config& c) {
  const MaskShape shape = MaskShape::of(p, kBQ, kBK);
  const std::int64_t nl = c.local_window / kBK, tq = shape.num_q_tiles();
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(shape.num_rows()));
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t t = 0; t < tq; ++t) {
        const std::int64_t n_max = shape.reachable_k_tiles(b, t);
        const std::int64_t segs = sale::candidate_segments(n_max, nl, c.tau_of(h));
        if (segs == 0) continue;
        auto& row = rows[static_cast<std::size_t>((b * p.heads_q + h) * tq + t)];
        row.push_back(0);
        for (std::int64_t j = sale::candidate_end(segs); j < n_max; ++j) row.push_back(static_cast<std::int32_t>(j));
      }
  return TileMask::from_rows(shape, std::move(rows));
}

/// What every kernel of the estimator knows about the problem.
struct Geometry {
  Seqs seqs;
  int heads_q, heads_kv, ratio, range, tq, tk;
  std::int64_t local_blocks;
  std::int64_t ldk;  ///< row stride (keys) of the qmk and K-scale arrays: Nkv rounded up to 32 (whole blocks)
  sale::Groups groups;
  float scale_log2;
  const float* tau;  ///< per query head
};

/// The estimator's device buffers (its workspace, see above), passed by value to its kernels.
struct SaleBuffers {
  const float* mu_q;      ///< [(b·Hq + h)·D]
  const float* mu_k;      ///< [(b·Hkv + h)·D]
  std::int8_t* q_codes;   ///< [((b·Hq + h)·Nq + i)·D]
  std::int8_t* q_packed;  ///< int4 on the mma.sync kernel: the codes two per byte, [((b·Hq + h)·Nq + i)·D/2]; else null
  float* q_scale;         ///< [(b·Hq + h)·Nq + i]
  std::int8_t* k_codes;   ///< [((b·Hkv + h)·Nkv + j)·D]
  std::int8_t* k_packed;  ///< the same for K, [((b·Hkv + h)·Nkv + j)·D/2], or null
  float* k_scale;         ///< [(b·Hkv + h)·ldk + j]
  float* k_amax;          ///< block groups: max_c |k'_jc| [(b·Hkv + h)·ldk + j] (step 3a; a group spans 4 CTAs); else null
  float* qmk;             ///< [(b·Hq + h)·ldk + j]
  unsigned* qmk_abs_max;  ///< [b·Hq + h]: the bits of max_j |qmk_j| (non-negative floats order as their bits; NaN last)
  const SoftmaxState* raw_state;  ///< [(b·Hq + h)·Nq + i]: step 2's sink-local states over q·k (the executor's domain)
  SoftmaxState* state;            ///< [(b·Hq + h)·Nq + i]: the same in the reference's domain q·k' (step 4)
  float* margins;         ///< [((b·Hq + h)·Tq + t)·Tk + j], or null
};

/// Four codes of consecutive channels as one 32-bit word (channel c in byte c % 4).
__device__ __forceinline__ std::uint32_t pack4(int a, int b, int c, int d) {
  return (static_cast<std::uint32_t>(a) & 0xffu) | ((static_cast<std::uint32_t>(b) & 0xffu) << 8) |
         ((static_cast<std::uint32_t>(c) & 0xffu) << 16) | ((static_cast<std::uint32_t>(d) & 0xffu) << 24);
}

/// Eight int4 codes of consecutive channels as one 32-bit word, channel c in bits 4·(c % 8) … (the s4 mma's element
/// order: two codes per byte, the even channel in the low nibble).
__device__ __forceinline__ std::uint32_t pack8_nibbles(const float* x, float inv, int range) {
  std::uint32_t word = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) word |= (static_cast<std::uint32_t>(sale::quant_code(x[i], inv, range)) & 0xfu) << (4 * i);
  return word;
}

/// std::max's comparison (a < b ? b : a): a NaN b leaves a, as in the reference's loops.
__device__ __forceinline__ float max_of(float a, float b) { return a < b ? b : a; }

/// Steps 3a and 3: 32-key block blockIdx.x of (batch, KV head) blockIdx.y in shared memory, k' = k − μ_k (subtract_mean's
/// op; tail keys 0), and each key's max |k'| in s_amax. Returns the block's valid keys (0: past the sequence; the CTA
/// returns before any barrier).
template <class T, int D>
__device__ __forceinline__ int stage_centred_keys(const Rows<T>& k, const Geometry& g, const SaleBuffers& w, float* s_k,
                                                  float* s_amax) {
  constexpr int kLd = D + 1;
  const int blk = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y), b = bh / g.heads_kv, h = bh % g.heads_kv;
  const std::int64_t nkv = g.seqs.len_kv(b), first = static_cast<std::int64_t>(blk) * kBK;
  if (first >= nkv) return 0;
  const int rows = static_cast<int>(nkv - first < kBK ? nkv - first : kBK);
  const float* mu = w.mu_k + static_cast<std::int64_t>(bh) * D;
  detail::stage_rows(k, b, h, first, rows, D, [&](int r, int c, float v) { s_k[r * kLd + c] = v - mu[c]; });  // subtract_mean
  for (int e = rows * D + threadIdx.x; e < kBK * D; e += blockDim.x) s_k[(e / D) * kLd + e % D] = 0.0f;  // tail keys: 0
  __syncthreads();
  for (int r = threadIdx.x; r < kBK; r += blockDim.x) {
    float a = 0.0f;
    for (int c = 0; c < D; ++c) a = max_of(a, fabsf(s_k[r * kLd + c]));
    s_amax[r] = a;
  }
  __syncthreads();
  return rows;
}

/// Step 3a (block groups only): each key's max |k'| into w.k_amax, for step 3's group amax over the keys of its
/// 128-key segment (4 CTAs of step 3).
template <class T, int D>
__global__ void __launch_bounds__(kQuantThreads) key_max_kernel(Rows<T> k, Geometry g, SaleBuffers w) {
  __shared__ float s_k[kBK * (D + 1)];
  __shared__ float s_amax[kBK];
  const int rows = stage_centred_keys<T, D>(k, g, w, s_k, s_amax);
  const std::int64_t key0 = static_cast<std::int64_t>(blockIdx.y) * g.ldk + static_cast<std::int64_t>(blockIdx.x) * kBK;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) w.k_amax[key0 + r] = s_amax[r];
}

/// Step 3: 32-key block blockIdx.x of (batch, KV head) blockIdx.y — K' codes and scales, and qmk of the GQA group.
template <class T, int D>
__global__ void __launch_bounds__(kQuantThreads) quant_k_kernel(Rows<T> k, Geometry g, SaleBuffers w) {
  constexpr int kLd = D + 1;
  __shared__ float s_k[kBK * kLd];
  __shared__ float s_amax[kBK];
  const int rows = stage_centred_keys<T, D>(k, g, w, s_k, s_amax);
  if (rows == 0) return;
  const int blk = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y), b = bh / g.heads_kv, h = bh % g.heads_kv;
  const std::int64_t nkv = g.seqs.len_kv(b), first = static_cast<std::int64_t>(blk) * kBK;
  const std::int64_t head_keys = static_cast<std::int64_t>(bh) * g.ldk;  // key 0 of the head in w.k_amax, w.k_scale
  // Scales: amax over the valid keys of the key's group (sale::k_group): thread groups lie inside the block; block
  // groups span the key's 128-key segment, whose keys' maxima step 3a wrote (a max: any order gives its bits).
  __shared__ float s_inv[kBK];
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    const std::int64_t key = first + r, grp = sale::k_group(key, g.groups);
    float a = 0.0f;
    if (g.groups == sale::Groups::block) {
      const std::int64_t c0 = sale::k_chunk_first(key, g.groups), c1 = c0 + kChunkKeys < nkv ? c0 + kChunkKeys : nkv;
      for (std::int64_t m = c0; m < c1; ++m)
        if (sale::k_group(m, g.groups) == grp) a = max_of(a, w.k_amax[head_keys + m]);
    } else {
      for (int m = 0; m < rows; ++m)
        if (sale::k_group(first + m, g.groups) == grp) a = max_of(a, s_amax[m]);
    }
    s_inv[r] = sale::group_inv_scale(a, g.range);
    w.k_scale[head_keys + first + r] = sale::group_scale(a, g.range);
  }
  __syncthreads();
  std::uint32_t* codes = reinterpret_cast<std::uint32_t*>(w.k_codes + ((static_cast<std::int64_t>(bh) * g.seqs.nkv + first) * D));
  for (int e = threadIdx.x; e < rows * (D / 4); e += blockDim.x) {
    const int r = e / (D / 4), c = (e % (D / 4)) * 4;
    const float* x = s_k + r * kLd + c;
    const float inv = s_inv[r];
    codes[e] = pack4(sale::quant_code(x[0], inv, g.range), sale::quant_code(x[1], inv, g.range),
                     sale::quant_code(x[2], inv, g.range), sale::quant_code(x[3], inv, g.range));
  }
  if (w.k_packed != nullptr) {
    std::uint32_t* packed =
        reinterpret_cast<std::uint32_t*>(w.k_packed + ((static_cast<std::int64_t>(bh) * g.seqs.nkv + first) * (D / 2)));
    for (int e = threadIdx.x; e < rows * (D / 8); e += blockDim.x)
      packed[e] = pack8_nibbles(s_k + (e / (D / 8)) * kLd + (e % (D / 8)) * 8, s_inv[e / (D / 8)], g.range);
  }
  // qmk_j = dot_lanes8(μ_q, k'_j) for every query head of the group: 8 lanes per key run the dot_lane chains,
  // combined by xor shuffles in combine_lanes8's tree. (ratio · 256 items: a multiple of the block, so every lane of a
  // warp takes part in each shuffle.)
  for (int e = threadIdx.x; e < g.ratio * kBK * 8; e += blockDim.x) {
    const int hh = e / (kBK * 8), key = (e / 8) % kBK, lane8 = e % 8;
    const std::int64_t hq = static_cast<std::int64_t>(b) * g.heads_q + h * g.ratio + hh;
    float v = dot_lane(w.mu_q + hq * D, s_k + key * kLd, D, lane8);
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    if (lane8 == 0 && key < rows) w.qmk[hq * g.ldk + first + key] = v;
    // The head's bound on |qmk| for sale::folded_bias_ok: the warp's 4 keys (one head), then one atomic.
    unsigned bits = key < rows ? __float_as_uint(fabsf(v)) : 0u;
    bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, 8));
    bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, 16));
    if (threadIdx.x % 32 == 0) atomicMax(w.qmk_abs_max + hq, bits);
  }
}

/// quant_q_kernel's dynamic shared memory: the block's 64 rows as fp32, padded to D + 1.
constexpr std::size_t quant_q_bytes(int d) { return static_cast<std::size_t>(kBQ * (d + 1)) * sizeof(float); }

/// Step 4: 64-row block blockIdx.x of (batch, query head) blockIdx.y — the sink-local state correction, Q' codes and
/// scales.
template <class T, int D>
__global__ void __launch_bounds__(kQuantThreads) quant_q_kernel(Rows<T> q, Geometry g, SaleBuffers w) {
  constexpr int kLd = D + 1;
  extern __shared__ float s_q[];  // kBQ × kLd: quant_q_bytes(D), dynamic (D = 256: 64 KB)
  __shared__ float s_amax[kBQ], s_inv[kBQ];
  const int blk = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y), b = bh / g.heads_q, h = bh % g.heads_q;
  const std::int64_t nq = g.seqs.len_q(b), first = static_cast<std::int64_t>(blk) * kBQ;
  if (first >= nq) return;
  const int rows = static_cast<int>(nq - first < kBQ ? nq - first : kBQ);
  const std::int64_t row0 = static_cast<std::int64_t>(bh) * g.seqs.nq + first;
  detail::stage_rows(q, b, h, first, rows, D, [&](int r, int c, float v) { s_q[r * kLd + c] = v; });
  __syncthreads();
  // The statistics pass scored q·k; the reference's sink-local scores are q·k' = q·k − q·μ_k. (A separate array: the
  // raw states are also what a resumed executor starts from.)
  const float* mu_k = w.mu_k + (static_cast<std::int64_t>(b) * g.heads_kv + h / g.ratio) * D;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    const SoftmaxState raw = w.raw_state[row0 + r];
    w.state[row0 + r] = {raw.m - dot_lanes8(s_q + r * kLd, mu_k, D) * g.scale_log2, raw.l};  // −∞ (no statistics) stays −∞
  }
  __syncthreads();
  const float* mu = w.mu_q + static_cast<std::int64_t>(bh) * D;
  for (int e = threadIdx.x; e < rows * D; e += blockDim.x) s_q[(e / D) * kLd + e % D] -= mu[e % D];  // subtract_mean
  __syncthreads();
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    float a = 0.0f;
    for (int c = 0; c < D; ++c) a = max_of(a, fabsf(s_q[r * kLd + c]));
    s_amax[r] = a;
  }
  __syncthreads();
  // Scales: amax over the valid rows of the row's group (sale::q_group; the block starts at a multiple of 64): rows
  // 16a + r and 16a + r + 8, or the whole block.
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    float a = 0.0f;
    for (int m = 0; m < rows; ++m)
      if (sale::q_group(m, g.groups) == sale::q_group(r, g.groups)) a = max_of(a, s_amax[m]);
    s_inv[r] = sale::group_inv_scale(a, g.range);
    w.q_scale[row0 + r] = sale::group_scale(a, g.range);
  }
  __syncthreads();
  std::uint32_t* codes = reinterpret_cast<std::uint32_t*>(w.q_codes + row0 * D);
  for (int e = threadIdx.x; e < rows * (D / 4); e += blockDim.x) {
    const int r = e / (D / 4), c = (e % (D / 4)) * 4;
    const float* x = s_q + r * kLd + c;
    const float inv = s_inv[r];
    codes[e] = pack4(sale::quant_code(x[0], inv, g.range), sale::quant_code(x[1], inv, g.range),
                     sale::quant_code(x[2], inv, g.range), sale::quant_code(x[3], inv, g.range));
  }
  if (w.q_packed != nullptr) {
    std::uint32_t* packed = reinterpret_cast<std::uint32_t*>(w.q_packed + row0 * (D / 2));
    for (int e = threadIdx.x; e < rows * (D / 8); e += blockDim.x)
      packed[e] = pack8_nibbles(s_q + (e / (D / 8)) * kLd + (e % (D / 8)) * 8, s_inv[e / (D / 8)], g.range);
  }
}

/// mma.sync m16n8k32, s8 × s8 → s32 (row-major A, column-major B): the exact integer products of the codes.
__device__ __forceinline__ void mma_s8(int* c, const std::uint32_t* a, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// mma.sync m16n8k64, s4 × s4 → s32 (the paper's sm80/sm89 kernel; emulated, slowly, on Hopper). With the codes two
/// per byte its fragments hold the same bytes as m16n8k32 s8's: one ldmatrix layout serves both.
__device__ __forceinline__ void mma_s4(int* c, const std::uint32_t* a, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

struct MaskOut {
  const std::int64_t* row_begin;
  std::int64_t* row_end;
  std::int32_t* tiles;
  /// Rows with candidates also list block 0 and the local blocks; false: the kept candidates only (the sink-local
  /// region was the resumed executor's first call: run_resumed).
  bool with_region;
};

/// A thread's two rows r0, r1 for exact_margin: whether each is in the sequence, its key end, its threshold.
struct ExactRows {
  bool valid0, valid1;
  std::int64_t vis0, vis1, nkv;
  float sq, thr0, thr1;
};

/// A thread's exact margin of one block: rows r0 and r1 over K scale group t4 (keys 8a + 2·t4 + e, a = nt) from the
/// integer products acc (the m16n8 layout), in GroupMax's key order; the unit's reciprocal serves every bias.
__device__ __forceinline__ float exact_margin(const int (&acc)[16], const float* qm_block, std::int64_t jb, int t4, float skv,
                                           float u, float rcp, const ExactRows& rr) {
  sale::GroupMax g0, g1;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const std::int64_t j = sale::group_key(jb, nt, t4, e);
      const bool v0 = j < rr.vis0 && j < rr.nkv, v1 = j < rr.vis1 && j < rr.nkv;
      if (!v0 && !v1) continue;
      const float qm = qm_block[nt * 8 + 2 * t4 + e];
      const std::int64_t bias = u > 0.0f ? sale::bias_units(qm, u, rcp) : 0;
      if (v0) g0.add_biased(acc[4 * nt + e], bias, qm, rr.sq, skv);
      if (v1) g1.add_biased(acc[4 * nt + 2 + e], bias, qm, rr.sq, skv);
    }
  float m = -INFINITY;
  if (rr.valid0) m = max_of(m, g0.estimate() - rr.thr0);
  if (rr.valid1) m = max_of(m, g1.estimate() - rr.thr1);
  return m;
}

/// The unit of a thread's keys of one block (its K scale group t4): skv the group's scale, u = sq·skv, rcp = RN(1/u);
/// exact: the block needs GroupMax (kept margins, or keys a valid row of the warp does not see; warp-uniform);
/// folded: sale::folded_bias_ok, the folded biases are valid.
struct Unit {
  float skv, u, rcp;
  bool exact, folded;
};
/// The unit of a thread's keys of block c of a segment (K scales ksb, Q scale sq): skv, u and rcp (exact, folded unset).
__device__ __forceinline__ Unit unit_at(const float* ksb, int c, int t4, float sq) {
  Unit x;
  x.skv = ksb[c * kBK + 2 * t4];
  x.u = sq * x.skv;
  x.rcp = 1.0f / x.u;
  return x;
}

/// A thread's largest acc + bias of its rows r0, r1 over its 8 keys 8·nt + 2·t4 + e of a block (bias_at(nt, e): that
/// key's folded bias), one add-and-max per product (__viaddmax_s32).
template <class BiasAt>
__device__ __forceinline__ void row_maxima(const int (&acc)[16], BiasAt bias_at, int& best0, int& best1) {
  best0 = INT_MIN, best1 = INT_MIN;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const std::int32_t bias = bias_at(nt, e);
      best0 = __viaddmax_s32(acc[4 * nt + e], bias, best0);
      best1 = __viaddmax_s32(acc[4 * nt + 2 + e], bias, best1);
    }
}

/// The warp's answer from each thread's folded decisions d0, d1 of its rows (+1 sure, −1 surely not, 0 open): +1 when
/// a row is surely selected, −1 when every row is surely not, else the undecided rows whose thread's 8 biases are
/// certified (certified()) are settled exactly (exact0(), exact1()) and the warp answers again: 0 leaves it to
/// GroupMax. The same value in every lane.
template <class Certified, class Exact0, class Exact1>
__device__ __forceinline__ int warp_decision(int d0, int d1, Certified certified, Exact0 exact0, Exact1 exact1) {
  const auto answer = [&] {
    if (__any_sync(0xffffffffu, d0 > 0 || d1 > 0)) return 1;
    return __any_sync(0xffffffffu, d0 == 0 || d1 == 0) ? 0 : -1;
  };
  int warp_answer = answer();
  if (warp_answer == 0) {
    if ((d0 == 0 || d1 == 0) && certified()) {
      if (d0 == 0) d0 = exact0();
      if (d1 == 0) d1 = exact1();
    }
    warp_answer = answer();
  }
  return warp_answer;
}

/// The warp's exact margin of block jb (GroupMax over each thread's rows and keys; see exact_margin), in every lane.
__device__ __forceinline__ float warp_exact_margin(const Unit& x, const int (&acc)[16], const float* qmb, int c,
                                                   std::int64_t jb, int t4, const ExactRows& rr) {
  float m = exact_margin(acc, qmb + c * kBK, jb, t4, x.skv, x.u, x.rcp, rr);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = max_of(m, __shfl_xor_sync(0xffffffffu, m, o));
  return m;
}

/// The warp's margin of block jb, from each thread's integer products acc of its rows r0, r1 (rr) and keys
/// 8·nt + 2·t4 + i % 2 (acc[4·nt + i], rows r0 for i < 2: the m16n8 layout), qmb + c·32 the block's qmk: +1 / −1 (a value
/// of the same sign) when sale::folded_decision is sure for the warp's rows; otherwise, or with kept margins, the
/// exact one (GroupMax over the products alone). The same value in every lane.
__device__ __forceinline__ float block_margin(Unit x, const int (&acc)[16], const float* qmb, int c, std::int64_t jb, int t4,
                                              const ExactRows& rr) {
  float m = -INFINITY;
  if (!x.exact) {
    int best0, best1;
    row_maxima(acc, [&](int nt, int e) { return x.folded ? sale::folded_bias(qmb[c * kBK + nt * 8 + 2 * t4 + e], x.rcp) : 0; },
               best0, best1);
    const int warp_answer = warp_decision(
        !rr.valid0 ? -1 : x.folded ? sale::folded_decision(best0, x.u, rr.thr0) : 0,
        !rr.valid1 ? -1 : x.folded ? sale::folded_decision(best1, x.u, rr.thr1) : 0, [&] {
          bool certified = x.folded;
#pragma unroll
          for (int nt = 0; nt < 4; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e)
              certified = certified & sale::folded_bias_exact(qmb[c * kBK + nt * 8 + 2 * t4 + e], x.rcp);
          return certified;
        }, [&] { return sale::folded_exact_decision(best0, x.u, rr.thr0); },
        [&] { return sale::folded_exact_decision(best1, x.u, rr.thr1); });
    if (warp_answer == 0) x.exact = true;
    else m = static_cast<float>(warp_answer);
  }
  if (x.exact) m = warp_exact_margin(x, acc, qmb, c, jb, t4, rr);
  return m;
}

/// Block groups (sale::Groups::block) without kept margins: every row of the CTA has the same Q scale and the keys of
/// a segment's K scale group t4 one scale, so the unit of a thread's keys is the segment's unit of its t4. The
/// CTA forms the folded biases once a segment (SegmentBias: a key per thread, with the votes of which are certified
/// and which units pass folded_bias_ok), and each thread its rows' sale::folded_bounds once a segment: a block's
/// decision is then the add-and-max over the shared biases and integer comparisons, the same decision as block_margin
/// (the same folded biases and rules), and GroupMax where they leave it open.
struct SegmentBias {
  const std::int32_t* bias;  ///< [c·32 + k]: sale::folded_bias of the segment's key 32c + k
  const unsigned* certified;  ///< [c]: bit k set when sale::folded_bias_exact holds for key 32c + k
  const unsigned* folded;     ///< [c]: bit k set when key 32c + k's unit passes sale::folded_bias_ok
};
__device__ __forceinline__ float block_margin_groups(const SegmentBias& sb, const sale::FoldedBounds& b0,
                                                     const sale::FoldedBounds& b1, bool exact, const int (&acc)[16],
                                                     const float* qmb, const float* ksb, float sq, int c,
                                                     std::int64_t jb, int t4, const ExactRows& rr) {
  const unsigned mine = 0x03030303u << (2 * t4);  // the thread's keys 8a + 2·t4 + e of a block
  if (!exact) {
    const bool folded = (sb.folded[c] >> (2 * t4)) & 1u;  // the group's keys share the unit
    int best0, best1;
    row_maxima(acc, [&](int nt, int e) { return sb.bias[c * kBK + nt * 8 + 2 * t4 + e]; }, best0, best1);
    const int warp_answer = warp_decision(
        !rr.valid0 ? -1 : folded ? sale::folded_decision(best0, b0) : 0,
        !rr.valid1 ? -1 : folded ? sale::folded_decision(best1, b1) : 0,
        [&] { return folded && (sb.certified[c] & mine) == mine; },
        [&] { return sale::folded_exact_decision(best0, b0); }, [&] { return sale::folded_exact_decision(best1, b1); });
    if (warp_answer != 0) return static_cast<float>(warp_answer);
  }
  return warp_exact_margin(unit_at(ksb, c, t4, sq), acc, qmb, c, jb, t4, rr);
}

/// Bytes of a code row: D int8 codes, or D int4 codes two per byte (kInt4: the s4 mma.sync kernel).
template <int D, bool kInt4>
constexpr int row_bytes() { return kInt4 ? D / 2 : D; }
/// Candidate-kernel shared memory. mma.sync: code rows of R bytes padded to R + 16, so the 8 rows an ldmatrix reads
/// fall in 8 different 16-byte bank groups (R = 32, 64, 128). wgmma (D = 128): rows of 128 bytes in the 128-byte
/// swizzle of sm90.cuh (16-byte piece c of row r at piece c ^ (r % 8)), tiles 1024-byte aligned (the 1024 extra bytes).
template <int R, bool kWgmma>
constexpr int code_ld() { return kWgmma ? R : R + 16; }
template <int D, bool kWgmma, bool kInt4>
constexpr std::size_t candidate_bytes() {
  constexpr int kLd = code_ld<row_bytes<D, kInt4>(), kWgmma>();
  return static_cast<std::size_t>(kBQ * kLd + kStages * kChunkKeys * kLd) +
         static_cast<std::size_t>(kStages * 2 * kChunkKeys) * sizeof(float) + (kWgmma ? 1024 : 0);
}

/// The candidate kernel's loads of segment s (key blocks 1 + 4s … 4 + 4s) into stage buf: each thread copies the same
/// 16-byte piece of key rows k_row0, k_row0 + kRowStep, … below kChunkKeys (kThreads is a multiple of the pieces per
/// row and kRowStep of 8, so the swizzled piece does not change), and at most one 16-byte piece of the K scales or of
/// one head's qmk (rows of ldk ≥ the segment's end: whole pieces, no tail). The addresses are set once (`of`); a
/// segment only adds its first key. `q_rows` loads the CTA's Q codes with the first segment.
template <int kRowBytes, int kLd, int kThreads>
struct SegmentLoads {
  static constexpr int kPieces = kRowBytes / 16, kRowStep = kThreads / kPieces, kScalePieces = kChunkKeys / 4;
  static constexpr int kRounds = (kChunkKeys + kRowStep - 1) / kRowStep;  // 1 when a pass covers the chunk (int4, D = 64)
  /// Rows whose pieces do not divide the threads (D = 96: 6 pieces, padded rows only): each piece at its own address.
  static constexpr bool kGeneric = kThreads % kPieces != 0;
  static_assert((kGeneric || kRowStep % 8 == 0) && 2 * kScalePieces <= kThreads);
  const std::int8_t* kc;     ///< the (batch, KV head)'s codes: the source of zero-filled copies
  const std::int8_t* k_src;  ///< the thread's piece of its first row in segment 0's key 0
  const float* sc_src;       ///< the thread's piece of the K scales or of a head's qmk (has_scale_piece)
  std::int64_t nkv;
  std::uint32_t k_dst, sc_dst, sc_buf;  ///< shared addresses in stage 0, and the scale stages' stride
  std::uint32_t s_k0;  ///< kGeneric: the shared address of stage 0's first row
  int k_row0, tid;
  bool has_scale_piece;

  /// Thread tid's loads: the same 16-byte piece tid % kPieces of its code rows (from the codes kc into stage 0 at
  /// s_k, the piece of row r at byte code_at(r, piece)), and piece tid % kScalePieces of the K scales ksc (threads
  /// below kScalePieces) or of one head's qmk (the next kScalePieces; into s_sk / s_qmk).
  template <class CodeAt>
  __device__ __forceinline__ static SegmentLoads of(const std::int8_t* kc, std::int64_t nkv, unsigned char* s_k,
                                                    CodeAt code_at, const float* ksc, const float* qmk, float* s_sk,
                                                    float* s_qmk, int tid) {
    SegmentLoads load;
    const int k_row0 = tid / kPieces, k_piece = tid % kPieces, s_piece = tid % kScalePieces;
    load.has_scale_piece = tid / kScalePieces <= 1;
    const int which = load.has_scale_piece ? tid / kScalePieces : 0;  // 0: the K scales; 1: the head's qmk
    load.kc = kc;
    load.nkv = nkv;
    load.k_row0 = k_row0;
    load.tid = tid;
    load.s_k0 = detail::smem_addr(s_k);
    load.k_src = kc + static_cast<std::int64_t>(k_row0) * kRowBytes + k_piece * 16;
    load.k_dst = detail::smem_addr(s_k + code_at(k_row0, k_piece));
    load.sc_src = (which == 0 ? ksc : qmk) + s_piece * 4;
    load.sc_dst = detail::smem_addr((which == 0 ? s_sk : s_qmk) + s_piece * 4);
    load.sc_buf = kChunkKeys * static_cast<std::uint32_t>(sizeof(float));
    return load;
  }

  /// The CTA's 64 Q code rows from q_rows (rows past `rows`: zeros, copied from q_codes) into s_q.
  template <class CodeAt>
  __device__ __forceinline__ void q_rows(unsigned char* s_q, CodeAt code_at, const std::int8_t* q_codes,
                                         const std::int8_t* q_rows, int rows) const {
    for (int p = tid; p < kBQ * kPieces; p += kThreads) {
      const int r = p / kPieces, piece = p % kPieces;
      const bool ok = r < rows;
      detail::cp_async16(detail::smem_addr(s_q + code_at(r, piece)), ok ? q_rows + r * kRowBytes + piece * 16 : q_codes,
                         ok ? 16 : 0);
    }
  }

  __device__ __forceinline__ void operator()(std::int64_t s, int buf) const {
    const std::int64_t base = kBK * (1 + kSeg * s);
    if constexpr (kGeneric) {
      for (int p = tid; p < kChunkKeys * kPieces; p += kThreads) {
        const int r = p / kPieces, piece = p % kPieces;
        const bool ok = base + r < nkv;
        detail::cp_async16(s_k0 + (buf * kChunkKeys + r) * kLd + piece * 16,
                           ok ? kc + (base + r) * kRowBytes + piece * 16 : kc, ok ? 16 : 0);
      }
      if (has_scale_piece) detail::cp_async16(sc_dst + buf * sc_buf, sc_src + base, 16);
      return;
    }
    const std::int8_t* src = k_src + base * kRowBytes;
    const std::uint32_t dst = k_dst + buf * kChunkKeys * kLd;
    if (base + kChunkKeys <= nkv) {  // the whole segment lies in the sequence (always, unless no local blocks follow)
#pragma unroll
      for (int i = 0; i < kRounds; ++i)
        if (kChunkKeys % kRowStep == 0 || k_row0 + i * kRowStep < kChunkKeys)
          detail::cp_async16(dst + i * kRowStep * kLd, src + i * kRowStep * kRowBytes, 16);
    } else {  // keys past the sequence: zeros
      const int valid = static_cast<int>(nkv - base);
#pragma unroll
      for (int i = 0; i < kRounds; ++i) {
        if (kChunkKeys % kRowStep != 0 && k_row0 + i * kRowStep >= kChunkKeys) break;  // rows past the chunk
        const bool ok = k_row0 + i * kRowStep < valid;
        detail::cp_async16(dst + i * kRowStep * kLd, ok ? src + i * kRowStep * kRowBytes : kc, ok ? 16 : 0);
      }
    }
    if (has_scale_piece) detail::cp_async16(sc_dst + buf * sc_buf, sc_src + base, 16);
  }
};

/// The candidate kernel's per-row state of query rows first … first + rows − 1 (their offset `at0` in the per-row
/// arrays), in shared memory for the CTA's 64 rows: each row's threshold (sale::threshold of its sink-local state),
/// Q scale and key end; rows past the sequence get none (key end 0: they never decide).
__device__ __forceinline__ void stage_rows(const Geometry& g, const SaleBuffers& w, int h, std::int64_t at0,
                                           std::int64_t first, int rows, std::int64_t nq, std::int64_t nkv, float* thr,
                                           float* sq, std::int64_t* vis, int tid, int threads) {
  for (int r = tid; r < kBQ; r += threads) {
    if (r < rows) {
      thr[r] = sale::threshold(w.state[at0 + r], g.tau[h], g.scale_log2);
      sq[r] = w.q_scale[at0 + r];
      vis[r] = mask_policy::row_key_end<std::int64_t>(first + r, nq, nkv, g.seqs.causal);
    } else {
      thr[r] = 0.0f;
      sq[r] = 0.0f;
      vis[r] = 0;
    }
  }
}

/// The smallest key end of the warp's valid rows (each thread's rows r0, r1; at most nkv; INT64_MAX when none is
/// valid): the fast path takes the blocks below it, whose every key every valid row of the warp sees.
__device__ __forceinline__ std::int64_t warp_key_end(bool valid0, std::int64_t vis0, bool valid1, std::int64_t vis1,
                                                     std::int64_t nkv) {
  std::int64_t vis_min = INT64_MAX;
  if (valid0) vis_min = min(vis0, nkv);
  if (valid1) vis_min = min(vis_min, min(vis1, nkv));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    vis_min = min(vis_min, static_cast<std::int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(vis_min), o)));
  return vis_min;
}

/// Warp 0, after a segment: lane c takes block c's margin (the max over the warps' margins), decides it, stores it
/// at margins[row_margins + block] (kept margins: tests) and the kept blocks are appended ascending at
/// row_out[kept …]. Returns the new count of kept blocks.
__device__ __forceinline__ int append_kept(const float (*marg)[kSeg], int lane, std::int64_t block0, float* margins,
                                           std::int64_t row_margins, std::int32_t* row_out, int kept) {
  float m = -INFINITY;
  if (lane < kSeg)
    for (int x = 0; x < kCandidateWarps; ++x) m = max_of(m, marg[x][lane]);
  const bool keep = lane < kSeg && sale::selected(m);
  if (margins != nullptr && lane < kSeg) margins[row_margins + block0 + lane] = m;
  const unsigned bits = __ballot_sync(0xffffffffu, keep);
  if (keep) row_out[kept + __popc(bits & ((1u << lane) - 1u))] = static_cast<std::int32_t>(block0 + lane);
  return kept + __popc(bits);
}

/// A mask row without candidates (a dense head, or a short row): every reachable block [0, n_max).
__device__ __forceinline__ void dense_row(const MaskOut& out, std::int64_t row, std::int64_t n_max, int tid, int threads) {
  std::int32_t* o = out.tiles + out.row_begin[row];
  for (std::int64_t j = tid; j < n_max; j += threads) o[j] = static_cast<std::int32_t>(j);
  if (tid == 0) out.row_end[row] = out.row_begin[row] + n_max;
}

/// The end of a mask row with candidates: its `kept` candidates are written after block 0's slot; unless the
/// sink-local region was resumed (MaskOut::with_region false: the kept candidates alone), block 0 and the local
/// blocks [cand_end, n_max) go around them.
__device__ __forceinline__ void finish_row(const MaskOut& out, std::int64_t row, int kept, std::int64_t cand_end,
                                           std::int64_t n_max, int tid, int threads) {
  std::int32_t* o = out.tiles + out.row_begin[row];
  if (!out.with_region) {
    if (tid == 0) out.row_end[row] = out.row_begin[row] + kept;
    return;
  }
  const std::int64_t at = 1 + kept;
  for (std::int64_t j = cand_end + tid; j < n_max; j += threads) o[at + j - cand_end] = static_cast<std::int32_t>(j);
  if (tid == 0) {
    o[0] = 0;
    out.row_end[row] = out.row_begin[row] + at + (n_max - cand_end);
  }
}

/// mma.sync: the integer products of a warp's 16 rows (its A fragments af, one per 32-byte k step) with the 32 keys
/// of block c of a segment in shared memory (code rows of kLd bytes), added to acc in the m16n8 layout (keys
/// 8·nt + 2·t4 + e: acc[4·nt + e] for row g, acc[4·nt + 2 + e] for row g + 8).
template <int kSteps, int kLd, bool kInt4>
__device__ __forceinline__ void mma_block(int (&acc)[16], const std::uint32_t (&af)[kSteps][4], const unsigned char* sk,
                                          int c, int lane) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks)
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      const int q8 = lane / 8;
      std::uint32_t bf[4];
      detail::ldmatrix_x4(bf, detail::smem_addr(sk + (c * kBK + (2 * np + q8 / 2) * 8 + lane % 8) * kLd + ks * 32 + (q8 % 2) * 16));
      if constexpr (kInt4) {
        mma_s4(acc + 8 * np, af[ks], bf[0], bf[1]);
        mma_s4(acc + 8 * np + 4, af[ks], bf[2], bf[3]);
      } else {
        mma_s8(acc + 8 * np, af[ks], bf[0], bf[1]);
        mma_s8(acc + 8 * np + 4, af[ks], bf[2], bf[3]);
      }
    }
}

/// Step 5: query block (longest rows first) of batch b and query head h. Warp w takes rows 16·w … + 15. mma.sync
/// (kWgmma false): the warp's Q codes stay in registers as A fragments for the whole CTA, one 16 × 32 block at a time.
/// wgmma (sm_90a, D = 128): the warpgroup's 64 × 128 products of a segment, both operands in shared memory, one 64-key
/// half at a time, the other CTAs' decisions overlapping them. Its helpers: SegmentLoads (the Q rows and the K side of
/// each segment), stage_rows and warp_key_end (the rows' thresholds, scales and key ends), mma_block (mma.sync
/// products of one block), block_margin (a warp's decision of one block), append_kept (the segment's decisions and
/// kept blocks), dense_row and finish_row (the mask row's region). The wgmma products stay in the kernel; the split left the
/// hot loop's PTX as it was (setup and warp 0's per-segment step reordered: checked with nvcc -ptx, 2026-11-29).
/// kInt4 (mma.sync only): the codes two per byte (SaleBuffers::q_packed, k_packed) and mma.sync m16n8k64 s4: half the
/// bytes and half the instructions of the s8 path, the same integer products. kGroups (block groups, without kept
/// margins, int8 codes): the decisions of block_margin_groups, with the segment's biases and bounds.
template <int D, bool kMargins, bool kWgmma, bool kInt4, bool kGroups>
__global__ void __launch_bounds__(kCandidateThreads, kCandidateBlocksPerSm) candidate_kernel(Geometry g, SaleBuffers w, MaskOut out) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kWgmma) {
    __trap();  // built without sm_90a: the estimator launches this kernel only where use_sm90()
    return;
  }
#endif
  static_assert(!kWgmma || (D == 128 && !kInt4), "the wgmma candidate kernel reads 128-byte int8 code rows");
  static_assert(!kGroups || (!kMargins && !kInt4 && kChunkKeys == kCandidateThreads), "block groups: a key per thread");
  constexpr int kRowBytes = row_bytes<D, kInt4>(), kSteps = kRowBytes / 32;  // 32-byte k steps of the mma
  constexpr int kLd = code_ld<kRowBytes, kWgmma>(), kThreads = kCandidateThreads;
  const std::int8_t* q_codes = kInt4 ? w.q_packed : w.q_codes;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* s_q = smem_raw + (kWgmma ? (1024 - detail::smem_addr(smem_raw) % 1024) % 1024 : 0);  // 64 rows
  unsigned char* s_k = s_q + kBQ * kLd;                       // kStages × 128 keys
  float* s_sk = reinterpret_cast<float*>(s_k + kStages * kChunkKeys * kLd);  // kStages × 128 K scales
  float* s_qmk = s_sk + kStages * kChunkKeys;                     // kStages × 128
  __shared__ float s_thr[kBQ], s_sq[kBQ];
  __shared__ std::int64_t s_vis[kBQ];
  __shared__ float s_marg[kCandidateWarps][kSeg];
  __shared__ std::int32_t s_bias[kGroups ? kChunkKeys : 1];  // kGroups: the segment's folded biases, and the votes
  __shared__ unsigned s_certified[kGroups ? kSeg : 1], s_folded[kGroups ? kSeg : 1];
  __shared__ float s_rcp[kGroups ? kSeg : 1];  // kGroups: RN(1/u) of the segment's unit of each K scale group t4

  const int blk = g.tq - 1 - static_cast<int>(blockIdx.x);
  const int b = static_cast<int>(blockIdx.y) / g.heads_q, h = static_cast<int>(blockIdx.y) % g.heads_q, hkv = h / g.ratio;
  const std::int64_t nq = g.seqs.len_q(b), nkv = g.seqs.len_kv(b), first = static_cast<std::int64_t>(blk) * kBQ;
  const std::int64_t bh = static_cast<std::int64_t>(b) * g.heads_q + h, row = bh * g.tq + blk;
  const int tid = threadIdx.x;
  if (first >= nq) {
    if (tid == 0) out.row_end[row] = out.row_begin[row];
    return;
  }
  const std::int64_t n_max = mask_policy::reachable_tiles<std::int64_t>(blk, kBQ, kBK, nq, nkv, g.seqs.causal);
  const int rows = static_cast<int>(nq - first < kBQ ? nq - first : kBQ);
  const std::int64_t segs = sale::candidate_segments(n_max, g.local_blocks, g.tau[h]);
  if (segs == 0) return dense_row(out, row, n_max, tid, kThreads);

  const std::int8_t* kc = (kInt4 ? w.k_packed : w.k_codes) + (static_cast<std::int64_t>(b) * g.heads_kv + hkv) * g.seqs.nkv * kRowBytes;
  const float* ksc = w.k_scale + (static_cast<std::int64_t>(b) * g.heads_kv + hkv) * g.ldk;
  using Loads = SegmentLoads<kRowBytes, kLd, kThreads>;
  // Byte offset of piece `piece` of code row r in a tile (padded rows, or the 128-byte swizzle).
  const auto code_at = [](int r, int piece) { return kWgmma ? r * kLd + ((piece ^ (r % 8)) << 4) : r * kLd + piece * 16; };
  const Loads load = Loads::of(kc, nkv, s_k, code_at, ksc, w.qmk + bh * g.ldk, s_sk, s_qmk, tid);
  load.q_rows(s_q, code_at, q_codes, q_codes + (bh * g.seqs.nq + first) * kRowBytes, rows);  // with segment 0
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {  // segments 0 … kStages − 2, one commit group each
    if (st < segs) load(st, st);
    detail::cp_async_commit();
  }
  stage_rows(g, w, h, bh * g.seqs.nq + first, first, rows, nq, nkv, s_thr, s_sq, s_vis, tid, kThreads);

  const int warp = tid / 32, lane = tid % 32, gq = lane / 4, t4 = lane % 4, mrow = warp * 16;

  detail::cp_async_wait<0>();
  if constexpr (kWgmma) detail::fence_async_shared();  // the cp.async writes (generic proxy) before wgmma reads them
  __syncthreads();
  std::uint32_t af[kWgmma ? 1 : kSteps][4];
  if constexpr (!kWgmma)
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      const int q8 = lane / 8;
      detail::ldmatrix_x4(af[ks], detail::smem_addr(s_q + (mrow + lane % 8 + (q8 % 2) * 8) * kLd + ks * 32 + (q8 / 2) * 16));
    }
  const int r0 = mrow + gq, r1 = r0 + 8;  // one Q scale group: the same stored scale
  const float sq = s_sq[r0], thr0 = s_thr[r0], thr1 = s_thr[r1];
  const float qmk_bound = __uint_as_float(w.qmk_abs_max[bh]);
  const std::int64_t vis0 = s_vis[r0], vis1 = s_vis[r1];
  const std::int64_t vis_min = warp_key_end(r0 < rows, vis0, r1 < rows, vis1, nkv);

  // Warp 0 appends the kept candidates, ascending, after block 0 (if listed); kept counts them.
  std::int32_t* const row_out = out.tiles + out.row_begin[row] + (out.with_region ? 1 : 0);
  int kept = 0;
  const int num_segs = static_cast<int>(segs);  // < 2³¹ / 128
  for (int s = 0, buf = 0; s < num_segs; ++s, buf = buf == kStages - 1 ? 0 : buf + 1) {
    // Segment s has arrived in stage buf (the next kStages − 2 may be in flight); after the barrier every warp has
    // scored s − 1, so its stage takes segment s + kStages − 1. One commit group per step, empty or not, keeps
    // wait<kStages − 2> meaning "segment s is here".
    detail::cp_async_wait<kStages - 2>();
    if constexpr (kWgmma) detail::fence_async_shared();
    __syncthreads();
    if (s + kStages - 1 < num_segs) load(s + kStages - 1, (buf + kStages - 1) % kStages);
    detail::cp_async_commit();
    const std::int64_t block0 = 1 + kSeg * s;
    const unsigned char* sk = s_k + buf * kChunkKeys * kLd;
    const float* ksb = s_sk + buf * kChunkKeys;
    const float* qmb = s_qmk + buf * kChunkKeys;
    sale::FoldedBounds fb0{}, fb1{};
    if constexpr (kGroups) {
      // The CTA's rows share one Q scale, and the keys of the segment's group t4 one K scale: key tid's folded bias
      // and the votes of its block (warp = block), then the thread's rows' bounds at its group's unit.
      const float q_scale = s_sq[0], rcp = 1.0f / (q_scale * ksb[tid]), qm = qmb[tid];
      s_bias[tid] = sale::folded_bias(qm, rcp);
      const unsigned certified = __ballot_sync(0xffffffffu, sale::folded_bias_exact(qm, rcp));
      const unsigned folded = __ballot_sync(0xffffffffu, sale::folded_bias_ok(rcp, qmk_bound));
      if (lane == 0) s_certified[warp] = certified, s_folded[warp] = folded;
      if (tid < 8 && tid % 2 == 0) s_rcp[tid / 2] = rcp;  // key 2·t4 of block 0: group t4's reciprocal
      __syncthreads();
      const float u = q_scale * ksb[2 * t4];
      fb0 = sale::folded_bounds(u, s_rcp[t4], thr0);
      fb1 = sale::folded_bounds(u, s_rcp[t4], thr1);
    }
    // Block c of the segment: the thread's 8 keys 8a + 2·t4 + e share K scale group t4, so one unit serves both
    // rows and every key. The accumulators hold the integer products alone. Without kept margins, on blocks that
    // every valid row of the warp fully sees, a row's largest acc + c_j (c_j the key's folded bias,
    // sale::folded_bias) is one add-and-max per product (__viaddmax_s32).
    const auto unit_of = [&](int c) {  // kGroups: block_margin_groups takes the segment's biases and bounds instead
      Unit x = kGroups ? Unit{} : unit_at(ksb, c, t4, sq);
      x.exact = kMargins || (block0 + c + 1) * kBK > vis_min;  // warp-uniform
      x.folded = !kGroups && !x.exact && sale::folded_bias_ok(x.rcp, qmk_bound);
      return x;
    };
    const auto decide = [&](int c, Unit x, const int (&acc)[16]) {
      const ExactRows rr{r0 < rows, r1 < rows, vis0, vis1, nkv, sq, thr0, thr1};
      float m;
      if constexpr (kGroups)
        m = block_margin_groups({s_bias, s_certified, s_folded}, fb0, fb1, x.exact, acc, qmb, ksb, sq, c, block0 + c, t4, rr);
      else
        m = block_margin(x, acc, qmb, c, block0 + c, t4, rr);
      if (lane == 0) s_marg[warp][c] = m;
    };
    if constexpr (kWgmma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      // The warpgroup: blocks 2h, 2h + 1 are the 64 keys of half h, D/32 k32 steps each (32 bytes inside the
      // swizzled 128-byte rows). One half at a time keeps 32 accumulators per thread: the other CTAs' decisions overlap
      // this one's products.
      // The descriptors' low words: the start address moves by whole 16-byte units (addresses < 2¹⁸: no carry).
      const std::uint32_t q_lo = detail::smem_desc_lo(detail::smem_addr(s_q), 16);
      const std::uint32_t k_lo = detail::smem_desc_lo(detail::smem_addr(sk), 16);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const Unit x0 = unit_of(2 * half), x1 = unit_of(2 * half + 1);
        int acc0[16], acc1[16];
        detail::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < D / 32; ++ks)
          detail::wgmma_ss_s8_n64(acc0, acc1, detail::smem_desc_at(q_lo + ks * 32 / 16, 1024),
                                  detail::smem_desc_at(k_lo + (half * 64 * kLd + ks * 32) / 16, 1024), ks > 0);
        detail::wgmma_commit();
        detail::wgmma_wait<0>();
        decide(2 * half, x0, acc0);
        decide(2 * half + 1, x1, acc1);
      }
#endif
    } else {
#pragma unroll 1
      for (int c = 0; c < kSeg; ++c) {
        const Unit x = unit_of(c);
        int acc[16] = {};
        mma_block<kSteps, kLd, kInt4>(acc, af, sk, c, lane);
        decide(c, x, acc);
      }
    }
    __syncthreads();  // the 4 warps have written their margins of the segment's blocks
    if (warp == 0) kept = append_kept(s_marg, lane, block0, w.margins, row * g.tk, row_out, kept);
    // s_marg is written again only after the next step's barrier, which warp 0 reaches after reading it.
  }
  __shared__ int s_kept;
  if (warp == 0 && lane == 0) s_kept = kept;
  detail::cp_async_wait<0>();
  __syncthreads();
  finish_row(out, row, s_kept, sale::candidate_end(segs), n_max, tid, kThreads);
}

class SaleEstimatorImpl final : public SaleEstimator {
 public:
  SaleEstimatorImpl(const sale::Config& c, const Problem& p, const std::int64_t* cu_q, const std::int64_t* cu_kv,
                    bool keep_margins)
      : c_(c), p_(p), shape_(MaskShape::of(p, kBQ, kBK)), region_host_(sink_local_mask(p, c)), region_(region_host_),
        cu_q_(cu_q), cu_kv_(cu_kv) {
    g_.seqs = Seqs::of(p, cu_q, cu_kv);
    g_.heads_q = static_cast<int>(p.heads_q);
    g_.heads_kv = static_cast<int>(p.heads_kv);
    g_.ratio = static_cast<int>(p.heads_q / p.heads_kv);
    g_.range = c.range();
    g_.tq = static_cast<int>(shape_.num_q_tiles());
    g_.tk = static_cast<int>(shape_.num_k_tiles());
    g_.local_blocks = c.local_window / kBK;
    g_.ldk = (p.seqlen_kv + kBK - 1) / kBK * kBK;
    g_.groups = c.groups;
    g_.scale_log2 = scale_log2(p.softmax_scale());
    std::vector<float> tau;
    for (std::int64_t h = 0; h < p.heads_q; ++h) tau.push_back(c.tau_of(h));
    tau_.assign(tau);
    g_.tau = tau_.ptr;
    wgmma_ = p.head_dim == 128 && use_sm90();
    // Hopper runs int4 codes as s8 (its s4 mma is emulated), and so does head_dim 96 (not a whole number of the s4
    // mma's 64-channel steps): the same codes and products.
    int4_ = c.bits == 4 && !use_sm90() && p.head_dim % 64 == 0;
    const auto d = static_cast<std::size_t>(p.head_dim);
    const auto bhq = static_cast<std::size_t>(p.batch * p.heads_q), bhk = static_cast<std::size_t>(p.batch * p.heads_kv);
    q_chunks_ = static_cast<int>(std::max<std::int64_t>((p.seqlen_q + kMeanChunk - 1) / kMeanChunk, 1));
    k_chunks_ = static_cast<int>(std::max<std::int64_t>((p.seqlen_kv + kMeanChunk - 1) / kMeanChunk, 1));
    partial_q_.allocate(bhq * q_chunks_ * d);
    partial_k_.allocate(bhk * k_chunks_ * d);
    mu_q_.allocate(bhq * d);
    mu_k_.allocate(bhk * d);
    q_codes_.allocate(bhq * static_cast<std::size_t>(p.seqlen_q) * d);
    q_scale_.allocate(bhq * static_cast<std::size_t>(p.seqlen_q));
    k_codes_.allocate(bhk * static_cast<std::size_t>(p.seqlen_kv) * d);
    if (int4_) {
      q_packed_.allocate(bhq * static_cast<std::size_t>(p.seqlen_q) * d / 2);
      k_packed_.allocate(bhk * static_cast<std::size_t>(p.seqlen_kv) * d / 2);
    }
    k_scale_.allocate(bhk * static_cast<std::size_t>(g_.ldk));
    if (c.groups == sale::Groups::block) k_amax_.allocate(bhk * static_cast<std::size_t>(g_.ldk));
    qmk_.allocate(bhq * static_cast<std::size_t>(g_.ldk));
    qmk_abs_max_.allocate(bhq);
    raw_state_.allocate(bhq * static_cast<std::size_t>(p.seqlen_q));
    state_.allocate(bhq * static_cast<std::size_t>(p.seqlen_q));
    if (keep_margins) margins_.allocate(static_cast<std::size_t>(shape_.num_rows() * shape_.num_k_tiles()));
    empty_.allocate(1);
    if (p.dtype == DType::bf16) set_limits<__nv_bfloat16>();
    else set_limits<__half>();
  }

  MaskShape shape() const override { return shape_; }
  std::size_t workspace_bytes() const override {
    return tau_.bytes() + partial_q_.bytes() + partial_k_.bytes() + mu_q_.bytes() + mu_k_.bytes() + q_codes_.bytes() +
           q_scale_.bytes() + k_codes_.bytes() + q_packed_.bytes() + k_packed_.bytes() + k_scale_.bytes() + k_amax_.bytes() + qmk_.bytes() + qmk_abs_max_.bytes() + raw_state_.bytes() +
           state_.bytes() + margins_.bytes() + empty_.bytes() + region_.bytes();
  }
  /// Step 2 is the executor's statistics pass (no V, no O); the mask gets the whole selection.
  void run(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) override {
    run_with(q, k, nullptr, nullptr, mask, stream);
  }
  /// Step 2 is the executor over the sink-local region (O and the raw states written: the answer's part over it);
  /// the mask gets the kept candidates only, and the executor resumes the rows from resume_states().
  void run_resumed(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o,
                   DeviceTileMask& mask, cudaStream_t stream) override {
    run_with(q, k, &v, &o, mask, stream);
  }
  const TileMask* covered() const override { return &region_host_; }
  const SoftmaxState* resume_states() const override { return raw_state_.ptr; }

  Quantized q_codes(std::int64_t b, std::int64_t h, cudaStream_t stream) const override {
    const std::int64_t first = (b * p_.heads_q + h) * p_.seqlen_q;
    return copy(q_codes_, q_scale_, first, p_.seqlen_q_of(b), first, stream);
  }
  Quantized k_codes(std::int64_t b, std::int64_t h, cudaStream_t stream) const override {
    const std::int64_t bh = b * p_.heads_kv + h;
    return copy(k_codes_, k_scale_, bh * p_.seqlen_kv, p_.seqlen_kv_of(b), bh * g_.ldk, stream);
  }
  std::vector<SoftmaxState> sink_local(cudaStream_t stream) const override {
    std::vector<SoftmaxState> out(static_cast<std::size_t>(p_.batch * p_.heads_q * p_.seqlen_q));
    check(cudaStreamSynchronize(stream), "synchronize");
    check(cudaMemcpy(out.data(), state_.ptr, out.size() * sizeof(SoftmaxState), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return out;
  }
  std::vector<float> margins(cudaStream_t stream) const override {
    if (margins_.ptr == nullptr) fail("cuda SALE estimator: margins() needs an estimator made with keep_margins");
    std::vector<float> out(margins_.n);
    check(cudaStreamSynchronize(stream), "synchronize");
    check(cudaMemcpy(out.data(), margins_.ptr, margins_.bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return out;
  }
  void poison_workspace() override {
    const auto poison = [](auto& a) {
      if (a.ptr) check(cudaMemset(a.ptr, 0xff, a.bytes()), "cudaMemset");
    };
    poison(partial_q_), poison(partial_k_), poison(mu_q_), poison(mu_k_), poison(q_codes_), poison(q_scale_);
    poison(k_codes_), poison(k_scale_), poison(qmk_), poison(qmk_abs_max_), poison(raw_state_), poison(state_);
    poison(q_packed_), poison(k_packed_), poison(k_amax_);
    poison(margins_);
    check(cudaDeviceSynchronize(), "synchronize");
  }

 private:
  /// n rows of codes from row `first` and their scales from element `scale_first`.
  Quantized copy(const DeviceArray<std::int8_t>& codes, const DeviceArray<float>& scale, std::int64_t first, std::int64_t n,
                 std::int64_t scale_first, cudaStream_t stream) const {
    Quantized out;
    out.codes.resize(static_cast<std::size_t>(n * p_.head_dim));
    out.scale.resize(static_cast<std::size_t>(n));
    check(cudaStreamSynchronize(stream), "synchronize");
    if (n == 0) return out;
    check(cudaMemcpy(out.codes.data(), codes.ptr + first * p_.head_dim, out.codes.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    check(cudaMemcpy(out.scale.data(), scale.ptr + scale_first, out.scale.size() * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
    return out;
  }

  template <class F>
  void with_candidate_kernel(F f) const {
    const auto pick = [&](auto d, auto margins, auto wgmma, auto int4) {
      constexpr int D = decltype(d)::value;
      constexpr bool M = decltype(margins)::value;  // the exact margins of every candidate (tests), or decisions only
      constexpr bool W = decltype(wgmma)::value, I = decltype(int4)::value;
      if constexpr (!M && !I)
        if (c_.groups == sale::Groups::block) return f(candidate_kernel<D, M, W, I, true>, candidate_bytes<D, W, I>());
      return f(candidate_kernel<D, M, W, I, false>, candidate_bytes<D, W, I>());
    };
    const auto mma_sync = [&](auto d, auto margins) {
      if constexpr (decltype(d)::value % 64 == 0)  // int4 codes: m16n8k64 steps of 64 channels
        if (int4_) return pick(d, margins, std::false_type{}, std::true_type{});
      pick(d, margins, std::false_type{}, std::false_type{});
    };
    const auto by_dim = [&](auto margins) {
      if (wgmma_) pick(std::integral_constant<int, 128>{}, margins, std::true_type{}, std::false_type{});
      else with_head_dim(p_.head_dim, [&](auto d) { mma_sync(d, margins); });
    };
    if (margins_.ptr != nullptr) by_dim(std::true_type{});
    else by_dim(std::false_type{});
  }

  template <class T>
  void set_limits() {
    check(cudaFuncSetAttribute(detail::chunk_sum_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(detail::chunk_bytes(p_.head_dim))),
          "shared memory");
    with_candidate_kernel([](auto kernel, std::size_t bytes) {
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), "shared memory");
    });
    with_head_dim(p_.head_dim, [](auto dim) {
      constexpr int D = decltype(dim)::value;
      check(cudaFuncSetAttribute(quant_q_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(quant_q_bytes(D))),
            "shared memory");
    });
  }

  /// v, o: null for run(), the tensors of run_resumed().
  void run_with(const TensorView& q, const TensorView& k, const TensorView* v, const TensorView* o,
                DeviceTileMask& mask, cudaStream_t stream) {
    if (p_.dtype == DType::bf16) launch<__nv_bfloat16>(q, k, v, o, mask, stream);
    else launch<__half>(q, k, v, o, mask, stream);
  }

  template <class T>
  void launch(const TensorView& q, const TensorView& k, const TensorView* v, const TensorView* o, DeviceTileMask& mask,
              cudaStream_t stream) {
    if (g_.tq == 0) return;
    const auto bq = static_cast<unsigned>(p_.batch);
    const int hq = g_.heads_q, hkv = g_.heads_kv, d = static_cast<int>(p_.head_dim);
    const Rows<T> qr{static_cast<const T*>(q.data), q.stride_b, q.stride_h, q.stride_n, g_.seqs.cu_q};
    const Rows<T> kr{static_cast<const T*>(k.data), k.stride_b, k.stride_h, k.stride_n, g_.seqs.cu_kv};
    const std::size_t chunk_bytes = detail::chunk_bytes(d);
    detail::chunk_sum_kernel<T><<<dim3(q_chunks_, bq * hq), d, chunk_bytes, stream>>>(qr, g_.seqs, true, hq, d, q_chunks_, partial_q_.ptr);
    detail::sequence_mean_kernel<><<<bq * hq, 128, 0, stream>>>(partial_q_.ptr, g_.seqs, true, hq, d, q_chunks_, mu_q_.ptr);
    detail::chunk_sum_kernel<T><<<dim3(k_chunks_, bq * hkv), d, chunk_bytes, stream>>>(kr, g_.seqs, false, hkv, d, k_chunks_, partial_k_.ptr);
    detail::sequence_mean_kernel<><<<bq * hkv, 128, 0, stream>>>(partial_k_.ptr, g_.seqs, false, hkv, d, k_chunks_, mu_k_.ptr);
    check(cudaMemsetAsync(empty_.ptr, 0, sizeof(int), stream), "cudaMemsetAsync");
    if (o != nullptr)
      attend_async(p_, q, k, *v, region_, *o, nullptr, cu_q_, cu_kv_, empty_.ptr, stream, nullptr, {raw_state_.ptr, nullptr});
    else
      state_pass_async(p_, q, k, region_, raw_state_.ptr, cu_q_, cu_kv_, empty_.ptr, stream);
    SaleBuffers w{mu_q_.ptr,   mu_k_.ptr,     q_codes_.ptr, q_packed_.ptr,    q_scale_.ptr,
                  k_codes_.ptr, k_packed_.ptr, k_scale_.ptr, k_amax_.ptr,      qmk_.ptr,
                  qmk_abs_max_.ptr, raw_state_.ptr, state_.ptr, margins_.ptr};
    check(cudaMemsetAsync(qmk_abs_max_.ptr, 0, qmk_abs_max_.bytes(), stream), "cudaMemsetAsync");
    with_head_dim(d, [&](auto dim) {
      constexpr int D = decltype(dim)::value;
      if (k_amax_.ptr != nullptr) key_max_kernel<T, D><<<dim3(g_.tk, bq * hkv), kQuantThreads, 0, stream>>>(kr, g_, w);
      quant_k_kernel<T, D><<<dim3(g_.tk, bq * hkv), kQuantThreads, 0, stream>>>(kr, g_, w);
      quant_q_kernel<T, D><<<dim3(g_.tq, bq * hq), kQuantThreads, quant_q_bytes(D), stream>>>(qr, g_, w);
    });
    const MaskOut out{mask.row_begin(), mask.row_end(), mask.tiles(), /*with_region*/ o == nullptr};
    with_candidate_kernel([&](auto kernel, std::size_t bytes) {
      kernel<<<dim3(g_.tq, bq * hq), kCandidateThreads, bytes, stream>>>(g_, w, out);
    });
    check(cudaGetLastError(), "kernel launch");
    mask.build_work_order(stream);
  }

  sale::Config c_;
  Problem p_;
  MaskShape shape_;
  TileMask region_host_;  ///< the sink-local mask (covered() when resumed)
  DeviceTileMask region_;
  const std::int64_t* cu_q_;
  const std::int64_t* cu_kv_;
  Geometry g_{};
  int q_chunks_ = 1, k_chunks_ = 1;
  bool wgmma_ = false;  ///< the sm_90a candidate kernel (use_sm90(), D = 128)
  bool int4_ = false;   ///< int4 codes on the mma.sync kernel: s4 m16n8k64 over packed codes (not on Hopper)
  DeviceArray<float> tau_, partial_q_, partial_k_, mu_q_, mu_k_, q_scale_, k_scale_, k_amax_, qmk_, margins_;
  DeviceArray<std::int8_t> q_codes_, k_codes_, q_packed_, k_packed_;  ///< packed: int4_ only
  DeviceArray<SoftmaxState> raw_state_, state_;  ///< step 2's states (q·k), and in the reference's domain (q·k')
  DeviceArray<unsigned> qmk_abs_max_;
  DeviceArray<int> empty_;
};

}  // namespace

std::vector<std::string> sale_not_supported_reasons(const sale::Config& c, const Problem& p) {
  (void)c;
  std::vector<std::string> why;
  if (p.head_dim != 64 && p.head_dim != 96 && p.head_dim != 128 && p.head_dim != 256)
    why.push_back("the CUDA SALE estimator needs head_dim 64, 96, 128 or 256");
  if (p.dtype != DType::f16 && p.dtype != DType::bf16) why.push_back("the CUDA SALE estimator needs f16 or bf16 inputs");
  if (p.seqlen_q >= (std::int64_t{1} << 31) - kBQ || p.seqlen_kv >= (std::int64_t{1} << 31) - kChunkKeys)
    why.push_back("the CUDA SALE estimator needs Nq and Nkv below 2^31 - 128 (its block counts are int)");
  if (p.batch * p.heads_q > 65535) why.push_back("the CUDA SALE estimator takes at most 65535 (batch, query head) pairs");
  return why;
}

std::unique_ptr<SaleEstimator> make_sale_estimator(const sale::Config& c, const Problem& p, const std::int64_t* cu_q,
                                                   const std::int64_t* cu_kv, bool keep_margins) {
  return std::make_unique<SaleEstimatorImpl>(c, p, cu_q, cu_kv, keep_margins);
}

}  // namespace spattn::cuda
