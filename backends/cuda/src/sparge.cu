// SpargeAttn Stage 1 on the GPU (research/spargeattn.md §3; the rules: spattn/methods/sparge.hpp), with the
// reference's bits: every fp32 value is computed in the core's fixed order (pooling.hpp's column means,
// sparge::row_inv_norm / unit_sum / similarity_of, dot_lane + combine_lanes8 scores, exp2_det weights, TopCdf's exact
// fixed-point sums), this file compiled with --fmad=false. Three kernels, all on the caller's stream:
//   1. chunk_sum + sequence_mean (estimator_kernels.cuh): the mean key of each (batch, KV head) in pooling.hpp's blocked
//      order (chunk sums in parallel, then their sum), one thread per column;
//   2. pool (twice): per block of rows, its mean and self-similarity (keys centred by 1.); one CTA per block;
//   3. select: per (batch, query head, query block) — one CTA — pooled scores, candidates and forced blocks, the
//      top-k or TopCdf of the selection order by a radix select (detail::top_k_select / top_cdf_select: no sort of the
//      row; the same blocks as a sort of (weight, index) keys), diagonal and sink blocks; the
//      kept blocks are written in ascending order into the row's slot of the DeviceTileMask.
// Workspace (allocated once per shape): means [B·H·T·D] and similarities [B·H·T] of query and key blocks, plus
// the mean key per KV head: O(B·H·(N/block)·D) floats; the mask holds B·Hq·Tq·Tk tile slots.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "estimator_interface.cuh"
#include "estimator_kernels.cuh"
#include "host_helpers.cuh"
#include "spattn/error.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/methods/sparge.hpp"
#include "spattn/pooling.hpp"
#include "spattn/topcdf.hpp"

namespace spattn::cuda {
namespace {

using detail::Rows;
using detail::Seqs;

using detail::check;
using detail::DeviceArray;

constexpr int kPoolThreads = 128, kSelectThreads = 256;

struct SelectArgs {
  Seqs seqs;
  int heads_q, heads_kv, d, block_q, block_k, tq, tk, sort_keys;
  float scale_log2, topk;
  bool sink;
  const float* theta;          ///< per query head
  const float* tau;            ///< per query head
  const std::uint8_t* dense;   ///< per query head
  const float *q_mean, *q_sim, *k_mean, *k_sim;
  const std::int64_t* row_begin;
  std::int64_t* row_end;
  std::int32_t* tiles;
};

// keep[] bits: 1 = kept, 2 = candidate of the selection.
__global__ void __launch_bounds__(kSelectThreads) select_kernel(SelectArgs a) {
  extern __shared__ std::uint64_t dyn[];
  __shared__ float fscratch[32];
  __shared__ int iscratch[32];
  __shared__ unsigned long long scan[32];
  __shared__ detail::RadixSelectShared<kSelectThreads> select;
  std::uint64_t* keys = dyn;                                // sort_keys
  float* x = reinterpret_cast<float*>(keys + a.sort_keys);  // sort_keys: scores
  float* qm = x + a.sort_keys;                              // d
  auto* keep = reinterpret_cast<std::uint8_t*>(qm + a.d);   // sort_keys
  const int i = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y);
  const int b = bh / a.heads_q, h = bh % a.heads_q, hkv = h / (a.heads_q / a.heads_kv);
  const std::int64_t r = static_cast<std::int64_t>(bh) * a.tq + i, slot = a.row_begin[r];
  const std::int64_t nq = a.seqs.len_q(b), nkv = a.seqs.len_kv(b);
  const int reach = static_cast<int>(
      mask_policy::reachable_tiles<std::int64_t>(i, a.block_q, a.block_k, nq, nkv, a.seqs.causal));
  if (reach == 0) {
    if (threadIdx.x == 0) a.row_end[r] = slot;
    return;
  }
  const int blocks_k = static_cast<int>((nkv + a.block_k - 1) / a.block_k);
  const float theta = a.theta[h];
  for (int c = threadIdx.x; c < a.d; c += blockDim.x) qm[c] = a.q_mean[r * a.d + c];
  const bool forced = sparge::row_forced(a.dense[h] != 0, sparge::self_similar(a.q_sim[r], theta));
  const std::int64_t kbase = (static_cast<std::int64_t>(b) * a.heads_kv + hkv) * a.tk;
  __syncthreads();
  for (int j = threadIdx.x; j < a.sort_keys; j += blockDim.x) {
    if (j >= blocks_k) {
      keep[j] = 0;
      continue;
    }
    const bool similar = sparge::self_similar(a.k_sim[kbase + j], theta);
    const bool cand = sparge::candidate(j, reach, similar);
    keep[j] = static_cast<std::uint8_t>((j < reach && (forced || sparge::column_forced(similar)) ? 1 : 0) | (cand ? 2 : 0));
  }
  __syncthreads();
  // Pooled scores, 4 key blocks per warp: 8 lanes per block each run one dot_lane chain (coalesced 32-byte reads
  // of the key mean), combined by xor shuffles in combine_lanes8's tree.
  const int lane = threadIdx.x % 32, sub = lane / 8, t = lane % 8;
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  float m = -INFINITY;
  int candidates = 0;
  for (int base = warp * 4; base < blocks_k; base += warps * 4) {
    const int j = base + sub;
    float v = j < blocks_k ? dot_lane(qm, a.k_mean + (kbase + j) * a.d, a.d, t) : 0.0f;
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    if (j < blocks_k && t == 0) {
      const bool cand = (keep[j] & 2) != 0;
      x[j] = cand ? sparge::score_of(v, a.scale_log2) : -INFINITY;
      if (cand) m = fmaxf(m, x[j]), ++candidates;
    }
  }
  m = detail::block_reduce(m, [](float u, float v) { return fmaxf(u, v); }, fscratch);
  candidates = detail::block_reduce(candidates, [](int u, int v) { return u + v; }, iscratch);
  if (sparge::scores_usable(candidates, m)) {
    auto* sel = reinterpret_cast<std::uint32_t*>(keys);  // the candidates' select keys (0: no candidate)
    const std::uint32_t max_key = detail::store_select_keys(
        blocks_k, [&](int j) { return keep[j] & 2 ? detail::select_key(selection_weight(x[j], m)) : 0u; }, sel,
        reinterpret_cast<std::uint32_t*>(iscratch));
    const auto mark = [&](int, int j) { keep[j] |= 1; };
    if (a.topk > 0.0f) {
      const std::int64_t kk = sparge::topk_count(a.topk, reach);
      detail::top_k_select(sel, blocks_k, max_key, kk, select, mark);
    } else {
      detail::top_cdf_select(sel, blocks_k, max_key, a.tau[h], false, select, mark);
    }
  } else if (candidates > 0) {  // non-finite pooled scores: the row keeps every block
    for (int j = threadIdx.x; j < reach; j += blockDim.x) keep[j] |= 1;
  }
  __syncthreads();
  if (a.seqs.causal) {
    const std::int64_t first = static_cast<std::int64_t>(i) * a.block_q;
    const std::int64_t last = (first + a.block_q < nq ? first + a.block_q : nq) - 1;
    const sparge::BlockRange diag = sparge::diagonal_blocks(first, last, nkv - nq, a.block_k, reach);
    for (std::int64_t j = diag.first + threadIdx.x; j <= diag.last; j += blockDim.x) keep[j] |= 1;
  }
  if (a.sink && threadIdx.x == 0) keep[0] |= 1;
  __syncthreads();
  for (int j = threadIdx.x; j < reach; j += blockDim.x) keep[j] &= 1;
  __syncthreads();
  const int count = detail::write_kept(keep, reach, a.tiles + slot, scan);
  if (threadIdx.x == 0) a.row_end[r] = slot + count;
}

std::size_t select_bytes(int keys, std::int64_t d) {
  return static_cast<std::size_t>(keys) * (sizeof(std::uint64_t) + sizeof(float) + 1) + static_cast<std::size_t>(d) * sizeof(float);
}

class SpargeEstimator final : public DeviceEstimator {
 public:
  SpargeEstimator(const sparge::Config& c, const Problem& p, const std::int64_t* cu_q, const std::int64_t* cu_kv)
      : c_(c), p_(p), shape_(MaskShape::of(p, c.block_q, c.block_k)),
        seqs_(Seqs::of(p, cu_q, cu_kv)) {
    std::vector<float> theta, tau;
    std::vector<std::uint8_t> dense;
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      theta.push_back(c.theta_of(h));
      tau.push_back(c.tau_of(h));
      dense.push_back(c.dense_head(h) ? 1 : 0);
    }
    theta_.assign(theta);
    tau_.assign(tau);
    dense_.assign(dense);
    const std::int64_t d = p.head_dim, tq = shape_.num_q_tiles(), tk = shape_.num_k_tiles();
    chunks_ = static_cast<int>(std::max<std::int64_t>((p.seqlen_kv + kMeanChunk - 1) / kMeanChunk, 1));
    k_partial_.allocate(static_cast<std::size_t>(p.batch * p.heads_kv * chunks_ * d));
    k_mu_.allocate(static_cast<std::size_t>(p.batch * p.heads_kv * d));
    k_mean_.allocate(static_cast<std::size_t>(p.batch * p.heads_kv * tk * d));
    k_sim_.allocate(static_cast<std::size_t>(p.batch * p.heads_kv * tk));
    q_mean_.allocate(static_cast<std::size_t>(p.batch * p.heads_q * tq * d));
    q_sim_.allocate(static_cast<std::size_t>(p.batch * p.heads_q * tq));
    sort_keys_ = detail::pow2_at_least(std::max<std::int64_t>(tk, 1));
    if (p.dtype == DType::bf16) set_limits<__nv_bfloat16>();
    else set_limits<__half>();
  }

  MaskShape shape() const override { return shape_; }
  std::size_t workspace_bytes() const override {
    return theta_.bytes() + tau_.bytes() + dense_.bytes() + k_partial_.bytes() + k_mu_.bytes() + k_mean_.bytes() + k_sim_.bytes() +
           q_mean_.bytes() + q_sim_.bytes();
  }

  void run(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) override {
    if (p_.dtype == DType::bf16) launch<__nv_bfloat16>(q, k, mask, stream);
    else launch<__half>(q, k, mask, stream);
  }

 private:
  template <class T>
  void set_limits() {
    const std::int64_t d = p_.head_dim;
    check(cudaFuncSetAttribute(detail::pool_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(detail::pool_bytes(std::max(c_.block_q, c_.block_k), d))),
          "shared memory");
    check(cudaFuncSetAttribute(detail::chunk_sum_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(detail::chunk_bytes(d))),
          "shared memory");
    check(cudaFuncSetAttribute(select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(select_bytes(sort_keys_, d))),
          "shared memory");
  }

  template <class T>
  void launch(const TensorView& q, const TensorView& k, DeviceTileMask& mask, cudaStream_t stream) {
    const int d = static_cast<int>(p_.head_dim), hq = static_cast<int>(p_.heads_q), hkv = static_cast<int>(p_.heads_kv);
    const int tq = static_cast<int>(shape_.num_q_tiles()), tk = static_cast<int>(shape_.num_k_tiles());
    const Rows<T> qr{static_cast<const T*>(q.data), q.stride_b, q.stride_h, q.stride_n, seqs_.cu_q};
    const Rows<T> kr{static_cast<const T*>(k.data), k.stride_b, k.stride_h, k.stride_n, seqs_.cu_kv};
    const auto bq = static_cast<unsigned>(p_.batch);
    detail::chunk_sum_kernel<T><<<dim3(chunks_, bq * hkv), d, detail::chunk_bytes(d), stream>>>(kr, seqs_, false, hkv, d, chunks_,
                                                                                               k_partial_.ptr);
    detail::sequence_mean_kernel<><<<bq * hkv, 128, 0, stream>>>(k_partial_.ptr, seqs_, false, hkv, d, chunks_, k_mu_.ptr);
    detail::pool_kernel<T><<<dim3(tk, bq * hkv), kPoolThreads, detail::pool_bytes(c_.block_k, d), stream>>>(
        kr, seqs_, false, hkv, c_.block_k, d, tk, k_mu_.ptr, k_mean_.ptr, k_sim_.ptr);
    detail::pool_kernel<T><<<dim3(tq, bq * hq), kPoolThreads, detail::pool_bytes(c_.block_q, d), stream>>>(
        qr, seqs_, true, hq, c_.block_q, d, tq, nullptr, q_mean_.ptr, q_sim_.ptr);
    SelectArgs a{};
    a.seqs = seqs_;
    a.heads_q = hq;
    a.heads_kv = hkv;
    a.d = d;
    a.block_q = c_.block_q;
    a.block_k = c_.block_k;
    a.tq = tq;
    a.tk = tk;
    a.sort_keys = sort_keys_;
    a.scale_log2 = scale_log2(p_.softmax_scale());
    a.topk = c_.topk;
    a.sink = c_.attention_sink;
    a.theta = theta_.ptr;
    a.tau = tau_.ptr;
    a.dense = dense_.ptr;
    a.q_mean = q_mean_.ptr;
    a.q_sim = q_sim_.ptr;
    a.k_mean = k_mean_.ptr;
    a.k_sim = k_sim_.ptr;
    a.row_begin = mask.row_begin();
    a.row_end = mask.row_end();
    a.tiles = mask.tiles();
    select_kernel<<<dim3(tq, bq * hq), kSelectThreads, select_bytes(sort_keys_, d), stream>>>(a);
    check(cudaGetLastError(), "kernel launch");
    mask.build_work_order(stream);
  }

  sparge::Config c_;
  Problem p_;
  MaskShape shape_;
  Seqs seqs_;
  int sort_keys_ = 1;
  DeviceArray<float> theta_, tau_;
  DeviceArray<std::uint8_t> dense_;
  int chunks_ = 1;
  DeviceArray<float> k_partial_, k_mu_, k_mean_, k_sim_, q_mean_, q_sim_;
};

}  // namespace

std::vector<std::string> sparge_not_supported_reasons(const sparge::Config& c, const Problem& p) {
  std::vector<std::string> why;
  const MaskShape shape = MaskShape::of(p, c.block_q, c.block_k);
  if (c.block_q % 64 != 0) why.push_back("the CUDA SpargeAttn estimator needs block_q a multiple of 64");
  if (p.head_dim % 8 != 0) why.push_back("the CUDA SpargeAttn estimator needs head_dim a multiple of 8");
  if (p.head_dim > 1024) why.push_back("the CUDA SpargeAttn estimator takes head_dim <= 1024");
  if (detail::pow2_at_least(std::max<std::int64_t>(shape.num_k_tiles(), 1)) > detail::kMaxSortKeys)
    why.push_back("the CUDA SpargeAttn estimator selects over at most 16384 key blocks per row (longer sequences: a larger block_k)");
  if (detail::pool_bytes(std::max(c.block_q, c.block_k), p.head_dim) > detail::kMaxSharedBytes ||
      select_bytes(detail::pow2_at_least(std::max<std::int64_t>(shape.num_k_tiles(), 1)), p.head_dim) > detail::kMaxSharedBytes)
    why.push_back("the CUDA SpargeAttn estimator's blocks (block × head_dim) do not fit in shared memory");
  if (p.batch * p.heads_q > 65535) why.push_back("the CUDA SpargeAttn estimator takes at most 65535 (batch, head) pairs");
  return why;
}

std::unique_ptr<DeviceEstimator> make_sparge_estimator(const sparge::Config& c, const Problem& p,
                                                       const std::int64_t* cu_q, const std::int64_t* cu_kv) {
  return std::make_unique<SpargeEstimator>(c, p, cu_q, cu_kv);
}

}  // namespace spattn::cuda
