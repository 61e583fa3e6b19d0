// BFLA Stage 1 on the GPU (research/bfla.md; the rules: spattn/methods/bfla.hpp). Two kernels, then the mask's
// work order, all on the caller's stream (no allocation, no host synchronisation: graph-capturable):
//   1. group_scores: the flattened-group products S[u][v] = Σ_{t<g, c<D} q[u·g + t][c] · k[v·g + t][c] of every
//      (batch, query head) as one GEMM [gq × g·D]·[g·D × gk] on the tensor cores (mma.sync m16n8k16, fp16/bf16 in,
//      fp32 accumulate; ldmatrix; cp.async multi-stage pipeline; rows past a sequence's end are zero-filled). CTA
//      tile kBM × kBN groups, 8 warps of 64 × 32; k-step kStep elements (one token row, D % kStep == 0). Tiles no
//      query block may see (bfla::causal_blocks) are skipped. S is the only fp32 value computed in another order
//      than the reference's (Eigen fp32 GEMM): masks may differ from the reference's near a threshold
//      (DESIGN.md §5.3); every rule after S is exact (tests/gpu: the mask equals
//      reference::bfla_mask_from_scores fed with the device's S, bit for bit).
//   2. select: per (batch, mask head, query block i) — one CTA — for each query head of the mask head: the block
//      scores x_j = max over the block pair's real groups × scale·log2 e (j < bfla::causal_blocks), the finite test
//      and row max, keep-mass TopCdf (crossing included; detail::top_cdf_select), the probability threshold (z: the
//      core's sequential sum, one thread) and the top-k floor (signed_selection_key sort), OR-ed into the coarse row;
//      then sink, band, the causal AND and the coarse rescues; then every executor row r of the block
//      (bfla::coarse_q(r) = i: tile_q = min(128, b) ≤ b gives one or more rows), expanded to key tiles, the tile-grid
//      rescues, written ascending into the DeviceTileMask row. This file is compiled with --fmad=false.
// Workspace (allocated once per shape): S, B·Hq·⌈Nq/g⌉·ld floats, ld = ⌈Nkv/g⌉ rounded up to a multiple of 4.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "estimator_interface.cuh"
#include "estimator_kernels.cuh"
#include "host_helpers.cuh"
#include "spattn/error.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/bfla.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/topcdf.hpp"
#include "warp_primitives.cuh"

namespace spattn::cuda {
namespace {

using detail::Rows;
using detail::Seqs;

using detail::check;
using detail::DeviceArray;

constexpr int kBM = 128, kBN = 128;  ///< query groups × key groups per CTA
constexpr int kStep = 32;            ///< k elements (of one token row) per pipeline stage
constexpr int kStages = 3;
constexpr int kLd = kStep + 8;  ///< smem row stride in elements (80 bytes: the 8 rows of an ldmatrix hit 8 bank groups)
constexpr int kGemmWarps = 8, kGemmThreads = kGemmWarps * 32;  ///< warps 2 (M) × 4 (N), 64 × 32 groups each
constexpr int kWarpM = 64, kWarpN = 32, kMT = kWarpM / 16, kNT = kWarpN / 8;
constexpr int kSelectThreads = 256;
constexpr std::size_t kMaxScoreBytes = std::size_t{32} << 30;


struct GemmArgs {
  Seqs seqs;
  int heads_q, heads_kv, group, d, block;
  std::int64_t gq_max, ld;  ///< S of (b, hq) is [gq_max][ld] at (b·Hq + hq)·gq_max·ld
  float* scores;
};

std::size_t gemm_bytes() { return static_cast<std::size_t>(kStages) * (kBM + kBN) * kLd * 2; }

/// S of (batch, query head) blockIdx.z, groups [u0, u0 + kBM) × [v0, v0 + kBN): row u of the A operand is query
/// group u flattened token-major, so k-step s reads token t = s·kStep / D, columns (s·kStep) % D … + kStep of the
/// group's rows (likewise for the key groups). Rows past the sequence's end are zero-filled (cp.async src_bytes 0).
template <class T>
__global__ void __launch_bounds__(kGemmThreads, 2) group_scores_kernel(Rows<T> q, Rows<T> k, GemmArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sa = reinterpret_cast<T*>(smem_raw);  // kStages × kBM × kLd
  T* sb = sa + kStages * kBM * kLd;        // kStages × kBN × kLd
  const int bh = static_cast<int>(blockIdx.z), b = bh / a.heads_q, h = bh % a.heads_q;
  const int hkv = h / (a.heads_q / a.heads_kv);
  const std::int64_t nq = a.seqs.len_q(b), nkv = a.seqs.len_kv(b);
  const std::int64_t gq = (nq + a.group - 1) / a.group, gk = (nkv + a.group - 1) / a.group;
  const std::int64_t u0 = static_cast<std::int64_t>(blockIdx.y) * kBM, v0 = static_cast<std::int64_t>(blockIdx.x) * kBN;
  if (u0 >= gq || v0 >= gk) return;
  // No query block of this tile sees a key block of it: the causal limit grows with the query block.
  const std::int64_t per_block = a.block / a.group, u_last = (u0 + kBM < gq ? u0 + kBM : gq) - 1;
  if (v0 / per_block >= bfla::causal_blocks(u_last / per_block, nq, nkv, a.block, a.seqs.causal)) return;

  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int warp_m = (warp / (kBN / kWarpN)) * kWarpM, warp_n = (warp % (kBN / kWarpN)) * kWarpN;
  const int steps = a.group * a.d / kStep;
  constexpr int kChunks = kStep / 8;  // 16-byte pieces per row and stage
  auto load = [&](int stage, int step) {
    const int kk = step * kStep, t = kk / a.d, c = kk % a.d;
    T* da = sa + stage * kBM * kLd;
    T* db = sb + stage * kBN * kLd;
    for (int p = tid; p < kBM * kChunks; p += kGemmThreads) {
      const int row = p / kChunks, piece = p % kChunks;
      const std::int64_t token = (u0 + row) * a.group + t;
      const bool real = token < nq;
      detail::cp_async16(detail::smem_addr(da + row * kLd + piece * 8), real ? q.row(b, h, token) + c + piece * 8 : q.data,
                 real ? 16 : 0);
    }
    for (int p = tid; p < kBN * kChunks; p += kGemmThreads) {
      const int row = p / kChunks, piece = p % kChunks;
      const std::int64_t token = (v0 + row) * a.group + t;
      const bool real = token < nkv;
      detail::cp_async16(detail::smem_addr(db + row * kLd + piece * 8), real ? k.row(b, hkv, token) + c + piece * 8 : k.data,
                 real ? 16 : 0);
    }
  };

  float acc[kMT][kNT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < steps) load(s, s);
    detail::cp_async_commit();
  }
  for (int step = 0; step < steps; ++step) {
    detail::cp_async_wait<kStages - 2>();
    __syncthreads();  // stage step % kStages has landed; stage (step − 1) % kStages is free
    if (step + kStages - 1 < steps) load((step + kStages - 1) % kStages, step + kStages - 1);
    detail::cp_async_commit();
    const T* ta = sa + (step % kStages) * kBM * kLd;
    const T* tb = sb + (step % kStages) * kBN * kLd;
#pragma unroll
    for (int ks = 0; ks < kStep / 16; ++ks) {
      std::uint32_t af[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
        detail::ldmatrix_x4(af[mt], detail::smem_addr(ta + (warp_m + mt * 16 + (lane % 16)) * kLd + ks * 16 + (lane / 16) * 8));
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        std::uint32_t bf[4];
        detail::ldmatrix_x4(bf, detail::smem_addr(tb + (warp_n + np * 16 + (lane / 16) * 8 + (lane % 8)) * kLd + ks * 16 +
                                          ((lane / 8) % 2) * 8));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          detail::MmaType<T>::mma(acc[mt][2 * np], af[mt], bf[0], bf[1]);
          detail::MmaType<T>::mma(acc[mt][2 * np + 1], af[mt], bf[2], bf[3]);
        }
      }
    }
  }
  detail::cp_async_wait<0>();

  float* out = a.scores + static_cast<std::int64_t>(bh) * a.gq_max * a.ld;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::int64_t u = u0 + warp_m + mt * 16 + lane / 4 + 8 * half;
      if (u >= gq) continue;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const std::int64_t v = v0 + warp_n + nt * 8 + (lane % 4) * 2;
        if (v + 1 < gk) {  // ld is a multiple of 4 and v even: an aligned pair
          *reinterpret_cast<float2*>(out + u * a.ld + v) = make_float2(acc[mt][nt][2 * half], acc[mt][nt][2 * half + 1]);
        } else if (v < gk) {
          out[u * a.ld + v] = acc[mt][nt][2 * half];
        }
      }
    }
}

struct SelectArgs {
  Seqs seqs;
  int heads_q, heads_kv, mask_heads;
  bool per_query_head;
  int block, group, tile_q, tile_k, tq, tk, sort_keys;
  std::int64_t gq_max, ld, local;
  float scale_log2, gamma, prob_threshold, keep_ratio, rho;
  std::int32_t min_keep;
  std::int64_t eta, seed;
  bool tile_rescue;
  const float* scores;
  const std::int64_t* row_begin;
  std::int64_t* row_end;
  std::int32_t* tiles;
};

std::size_t select_bytes(int keys, std::int64_t tk) {
  return static_cast<std::size_t>(keys) * (sizeof(std::uint64_t) + 2 * sizeof(float) + 1) + static_cast<std::size_t>(tk);
}

/// The mask rows of query block blockIdx.x of (batch, mask head) blockIdx.y (reference/src/bfla.cpp's steps, in its
/// order). keep[] is the block's coarse row (1 = kept), fine[] one executor row at a time.
__global__ void __launch_bounds__(kSelectThreads) select_kernel(SelectArgs a) {
  extern __shared__ std::uint64_t dyn[];
  __shared__ float fscratch[32];
  __shared__ int iscratch[32];
  __shared__ unsigned long long scan[32];
  __shared__ float z;
  __shared__ detail::RadixSelectShared<kSelectThreads> select;
  const int n = a.sort_keys;
  std::uint64_t* keys = dyn;                                   // n
  float* x = reinterpret_cast<float*>(keys + n);               // n: block scores (base 2)
  float* prob = x + n;                                         // n: selection weights
  auto* keep = reinterpret_cast<std::uint8_t*>(prob + n);      // n: the coarse row
  std::uint8_t* fine = keep + n;                               // tk: one executor row
  const int i = static_cast<int>(blockIdx.x), bm = static_cast<int>(blockIdx.y);
  const int b = bm / a.mask_heads, mh = bm % a.mask_heads, group_size = a.heads_q / a.heads_kv;
  const int hkv = a.per_query_head ? mh / group_size : mh;
  const std::int64_t nq = a.seqs.len_q(b), nkv = a.seqs.len_kv(b), bs = a.block;
  const std::int64_t lq = (nq + bs - 1) / bs, lkv = (nkv + bs - 1) / bs;
  // The executor rows of this block: r with coarse_q(r) == i (tile_q ≤ b), first r = ⌈i·b / tile_q⌉.
  const std::int64_t r_first = (i * bs + a.tile_q - 1) / a.tile_q;
  auto row_of = [&](std::int64_t r) { return (static_cast<std::int64_t>(b) * a.mask_heads + mh) * a.tq + r; };
  auto in_block = [&](std::int64_t r) { return r < a.tq && bfla::coarse_q(r, a.tile_q, a.block) == i; };
  if (i >= lq || lkv == 0) {  // rows past the sequence's end, or a sequence without keys: nothing kept
    if (threadIdx.x == 0)
      for (std::int64_t r = r_first; in_block(r); ++r) a.row_end[row_of(r)] = a.row_begin[row_of(r)];
    return;
  }
  const int reach = static_cast<int>(bfla::causal_blocks(i, nq, nkv, bs, a.seqs.causal));
  const int blocks_k = static_cast<int>(lkv);
  const std::int64_t per_block = a.block / a.group, gq = (nq + a.group - 1) / a.group, gk = (nkv + a.group - 1) / a.group;
  const std::int64_t u_first = i * per_block, u_end = bfla::groups_end(i, per_block, gq);
  for (int j = threadIdx.x; j < n; j += blockDim.x) keep[j] = 0;
  const int h_first = a.per_query_head ? mh : hkv * group_size, h_end = a.per_query_head ? mh + 1 : h_first + group_size;
  for (int hq = h_first; hq < h_end; ++hq) {
    const float* s = a.scores + (static_cast<std::int64_t>(b) * a.heads_q + hq) * a.gq_max * a.ld;
    float m = -INFINITY;
    int finite = 1;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
      float best = -INFINITY;
      if (j < reach) {  // the reference's order and std::max (a NaN product never becomes the max)
        const std::int64_t v_end = bfla::groups_end(j, per_block, gk);
        for (std::int64_t u = u_first; u < u_end; ++u)
          for (std::int64_t v = j * per_block; v < v_end; ++v) {
            const float sv = s[u * a.ld + v];
            best = best < sv ? sv : best;
          }
        x[j] = best * a.scale_log2;
        finite = finite && isfinite(x[j]) ? 1 : 0;
        m = m < x[j] ? x[j] : m;
      } else {
        x[j] = -INFINITY;
      }
    }
    // The max is exact in any order (±0 give the same weights: exp2_det(±0) = 1).
    m = detail::block_reduce(m, [](float u, float v) { return u < v ? v : u; }, fscratch);
    finite = detail::block_reduce(finite, [](int u, int v) { return u < v ? u : v; }, iscratch);
    if (bfla::keep_all_blocks(finite != 0, a.gamma)) {
      for (int j = threadIdx.x; j < reach; j += blockDim.x) keep[j] = 1;
      __syncthreads();
      continue;
    }
    for (int j = threadIdx.x; j < n; j += blockDim.x) prob[j] = j < reach ? selection_weight(x[j], m) : 0.0f;
    __syncthreads();
    if (a.gamma > 0.0f) {  // keep-mass: TopCdf over the causal blocks, crossing included (a radix select)
      auto* sel = reinterpret_cast<std::uint32_t*>(keys);  // the select keys, in the sort keys' room
      const std::uint32_t max_key = detail::store_select_keys(
          reach, [&](int j) { return detail::select_key(prob[j]); }, sel, reinterpret_cast<std::uint32_t*>(iscratch));
      detail::top_cdf_select(sel, reach, max_key, a.gamma, true, select, [&](int, int j) { keep[j] = 1; });
    }
    if (a.prob_threshold <= 1.0f) {  // the code's probability threshold, z the sequential sum over all lkv entries
      if (threadIdx.x == 0) z = sum_sequential(prob, blocks_k);
      __syncthreads();
      for (int j = threadIdx.x; j < reach; j += blockDim.x)
        if (bfla::above_prob_threshold(prob[j], z, a.prob_threshold)) keep[j] = 1;
      __syncthreads();
    }
    if (a.keep_ratio > 0.0f || a.min_keep > 0) {  // the code's top-k floor, by block score
      const std::int64_t kk = bfla::topk_floor(a.min_keep, a.keep_ratio, lkv);
      for (int j = threadIdx.x; j < n; j += blockDim.x)
        keys[j] = j < reach ? detail::signed_selection_key(x[j], j) : detail::kNoKey;
      detail::block_sort(keys, n);
      const int top = static_cast<int>(kk < reach ? kk : reach);
      for (int t = threadIdx.x; t < top; t += blockDim.x) keep[detail::key_index(keys[t])] = 1;
      __syncthreads();
    }
  }
  // Sink and local band (every KV block the query block overlaps), then the causal AND.
  __syncthreads();
  const bfla::Band band = bfla::band(i, nq, nkv, bs, a.local);
  if (threadIdx.x == 0) keep[0] = 1;
  for (std::int64_t j = band.first + threadIdx.x; j <= band.last; j += blockDim.x) keep[j] = 1;
  __syncthreads();
  for (int j = reach + static_cast<int>(threadIdx.x); j < blocks_k; j += blockDim.x) keep[j] = 0;
  __syncthreads();
  // Rescues of dropped causal blocks (coarse grid): each decision is its own block's, so the reference's two
  // passes (stride, then random over what is still dropped) are one OR per block.
  if (!a.tile_rescue) {
    for (int j = threadIdx.x; j < reach; j += blockDim.x)
      if (!keep[j] && ((a.eta > 0 && bfla::stride_rescued(i, j, a.seed, a.eta)) ||
                       (a.rho > 0.0f && bfla::random_rescued(i, j, hkv, a.seed, a.rho))))
        keep[j] = 1;
    __syncthreads();
  }
  // Expansion to the executor's tiles, row by row; tiles past the row's reach are not listed (TileMask::from_rows).
  for (std::int64_t r = r_first; in_block(r); ++r) {
    const std::int64_t row = row_of(r), slot = a.row_begin[row];
    const int reach_r = static_cast<int>(
        mask_policy::reachable_tiles<std::int64_t>(r, a.tile_q, a.tile_k, nq, nkv, a.seqs.causal));
    for (int t = threadIdx.x; t < reach_r; t += blockDim.x) {
      std::uint8_t f = keep[bfla::coarse_k(t, a.tile_k, a.block)];
      if (a.tile_rescue && !f &&
          ((a.eta > 0 && bfla::stride_rescued(r, t, a.seed, a.eta)) ||
           (a.rho > 0.0f && bfla::random_rescued(r, t, hkv, a.seed, a.rho))))
        f = 1;
      fine[t] = f;
    }
    __syncthreads();
    const int count = detail::write_kept(fine, reach_r, a.tiles + slot, scan);
    if (threadIdx.x == 0) a.row_end[row] = slot + count;
  }
}


std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

class BflaEstimatorImpl final : public BflaEstimator {
 public:
  BflaEstimatorImpl(const bfla::Config& c, const Problem& p, const std::int64_t* cu_q, const std::int64_t* cu_kv,
                    bool per_query_head)
      : c_(c), p_(p), per_query_head_(per_query_head), shape_(MaskShape::of(p, c.tile_q(), c.tile, !per_query_head)),
        seqs_(Seqs::of(p, cu_q, cu_kv)) {
    gq_max_ = ceil_div(p.seqlen_q, c.group);
    ld_ = ceil_div(ceil_div(p.seqlen_kv, c.group), 4) * 4;
    scores_.allocate(static_cast<std::size_t>(p.batch * p.heads_q * gq_max_ * ld_));
    sort_keys_ = detail::pow2_at_least(std::max<std::int64_t>(ceil_div(p.seqlen_kv, c.block), 1));
    if (p.dtype == DType::bf16) set_limits<__nv_bfloat16>();
    else set_limits<__half>();
  }

  MaskShape shape() const override { return shape_; }
  std::size_t workspace_bytes() const override { return scores_.bytes(); }

  void run(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) override {
    if (p_.dtype == DType::bf16) launch<__nv_bfloat16>(q, k, mask, stream);
    else launch<__half>(q, k, mask, stream);
  }

  std::vector<float> group_scores(std::int64_t b, std::int64_t hq, cudaStream_t stream) const override {
    const std::int64_t gq = ceil_div(p_.seqlen_q_of(b), c_.group), gk = ceil_div(p_.seqlen_kv_of(b), c_.group);
    std::vector<float> out(static_cast<std::size_t>(gq * gk));
    if (out.empty()) return out;
    const float* from = scores_.ptr + (b * p_.heads_q + hq) * gq_max_ * ld_;
    check(cudaMemcpy2DAsync(out.data(), static_cast<std::size_t>(gk) * sizeof(float), from,
                            static_cast<std::size_t>(ld_) * sizeof(float), static_cast<std::size_t>(gk) * sizeof(float),
                            static_cast<std::size_t>(gq), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpy2DAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return out;
  }

  float* scores_workspace() const override { return scores_.ptr; }

 private:
  template <class T>
  void set_limits() {
    check(cudaFuncSetAttribute(group_scores_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(gemm_bytes())),
          "shared memory");
    check(cudaFuncSetAttribute(select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(select_bytes(sort_keys_, shape_.num_k_tiles()))),
          "shared memory");
  }

  template <class T>
  void launch(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) {
    const Rows<T> qr{static_cast<const T*>(q.data), q.stride_b, q.stride_h, q.stride_n, seqs_.cu_q};
    const Rows<T> kr{static_cast<const T*>(k.data), k.stride_b, k.stride_h, k.stride_n, seqs_.cu_kv};
    GemmArgs g{};
    g.seqs = seqs_;
    g.heads_q = static_cast<int>(p_.heads_q);
    g.heads_kv = static_cast<int>(p_.heads_kv);
    g.group = c_.group;
    g.d = static_cast<int>(p_.head_dim);
    g.block = c_.block;
    g.gq_max = gq_max_;
    g.ld = ld_;
    g.scores = scores_.ptr;
    const dim3 gemm_grid(static_cast<unsigned>(ceil_div(ceil_div(p_.seqlen_kv, c_.group), kBN)),
                         static_cast<unsigned>(ceil_div(gq_max_, kBM)), static_cast<unsigned>(p_.batch * p_.heads_q));
    group_scores_kernel<T><<<gemm_grid, kGemmThreads, gemm_bytes(), stream>>>(qr, kr, g);

    SelectArgs a{};
    a.seqs = seqs_;
    a.heads_q = static_cast<int>(p_.heads_q);
    a.heads_kv = static_cast<int>(p_.heads_kv);
    a.mask_heads = static_cast<int>(shape_.mask_heads);
    a.per_query_head = per_query_head_;
    a.block = c_.block;
    a.group = c_.group;
    a.tile_q = c_.tile_q();
    a.tile_k = c_.tile;
    a.tq = static_cast<int>(shape_.num_q_tiles());
    a.tk = static_cast<int>(shape_.num_k_tiles());
    a.sort_keys = sort_keys_;
    a.gq_max = gq_max_;
    a.ld = ld_;
    a.local = bfla::local_blocks(c_.n_local, c_.tile, c_.block);
    a.scale_log2 = scale_log2(p_.softmax_scale());
    a.gamma = c_.gamma;
    a.prob_threshold = c_.prob_threshold;
    a.keep_ratio = c_.keep_ratio;
    a.rho = c_.rho;
    a.min_keep = c_.min_keep_blocks;
    a.eta = c_.eta;
    a.seed = c_.seed;
    a.tile_rescue = c_.rescue_grid == bfla::RescueGrid::tile;
    a.scores = scores_.ptr;
    a.row_begin = mask.row_begin();
    a.row_end = mask.row_end();
    a.tiles = mask.tiles();
    const dim3 select_grid(static_cast<unsigned>(ceil_div(p_.seqlen_q, c_.block)),
                           static_cast<unsigned>(p_.batch * shape_.mask_heads));
    select_kernel<<<select_grid, kSelectThreads, select_bytes(sort_keys_, a.tk), stream>>>(a);
    check(cudaGetLastError(), "kernel launch");
    mask.build_work_order(stream);
  }

  bfla::Config c_;
  Problem p_;
  bool per_query_head_ = false;
  MaskShape shape_;
  Seqs seqs_;
  std::int64_t gq_max_ = 0, ld_ = 0;
  int sort_keys_ = 1;
  DeviceArray<float> scores_;
};

}  // namespace

std::vector<std::string> bfla_not_supported_reasons(const bfla::Config& c, const Problem& p) {
  std::vector<std::string> why;
  if (c.tile_q() % 64 != 0)
    why.push_back("the CUDA BFLA estimator needs block 64 or >= 128 (its device mask takes tile_q = min(128, block), a multiple of 64)");
  if (p.head_dim % kStep != 0) why.push_back("the CUDA BFLA estimator needs head_dim a multiple of 32 (its GEMM's k-step)");
  if (p.dtype != DType::f16 && p.dtype != DType::bf16) why.push_back("the CUDA BFLA estimator takes f16 or bf16 inputs");
  const std::int64_t lkv = ceil_div(p.seqlen_kv, c.block), tk = ceil_div(p.seqlen_kv, c.tile);
  const int keys = detail::pow2_at_least(std::max<std::int64_t>(lkv, 1));
  if (keys > detail::kMaxSortKeys)
    why.push_back("the CUDA BFLA estimator sorts at most 16384 KV blocks per row (longer sequences: a larger block)");
  else if (select_bytes(keys, tk) > detail::kMaxSharedBytes)
    why.push_back("the CUDA BFLA estimator's rows (KV blocks and key tiles) do not fit in shared memory");
  const double score_bytes = static_cast<double>(p.batch * p.heads_q) * static_cast<double>(ceil_div(p.seqlen_q, c.group)) *
                             static_cast<double>(ceil_div(ceil_div(p.seqlen_kv, c.group), 4) * 4) * sizeof(float);
  if (score_bytes > static_cast<double>(kMaxScoreBytes))
    why.push_back("the CUDA BFLA estimator's group scores (B·Hq·(N/group)² floats) exceed 32 GiB (a larger group)");
  if (p.batch * p.heads_q > 65535) why.push_back("the CUDA BFLA estimator takes at most 65535 (batch, query head) pairs");
  if (ceil_div(ceil_div(p.seqlen_q, c.group), kBM) > 65535 || ceil_div(p.seqlen_q, c.block) > 65535)
    why.push_back("the CUDA BFLA estimator takes at most 65535 tiles of query groups / query blocks");
  return why;
}

std::unique_ptr<BflaEstimator> make_bfla_estimator(const bfla::Config& c, const Problem& p, const std::int64_t* cu_q,
                                                   const std::int64_t* cu_kv, bool per_query_head) {
  return std::make_unique<BflaEstimatorImpl>(c, p, cu_q, cu_kv, per_query_head);
}

}  // namespace spattn::cuda
