// The int8 mode's prologue (int8_quant.cuh). Compiled with --fmad=false like the estimators: the core's fp32
// expressions (the smoothed key, the block scale, the code's division) round as on the host.
#include "int8_quant.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "estimator_kernels.cuh"
#include "spattn/quant.hpp"

namespace spattn::cuda {
namespace {

using detail::check;
using detail::Rows;
using detail::Seqs;

constexpr int kThreads = 256;

/// μ_k rounded to the input dtype, in place (spattn/quant.hpp).
__global__ void round_to_dtype_kernel(float* x, int n, DType dtype) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = round_to_dtype(x[i], dtype);
}

/// The element a block's amax and the codes are taken of: Q's value, or the smoothed key.
__device__ __forceinline__ float quant_input(float v, const float* mu, int c, DType dtype) {
  return mu != nullptr ? int8_smoothed_key(v, mu[c], dtype) : v;
}

/// Block blk (blockIdx.x) of (batch, head) blockIdx.y, steps 2 and 3 of int8_quant.cuh: scale =
/// int8_block_scale(max |x|) over the block's valid rows (a block past the sequence's end: amax 0, as the reference's),
/// then the codes of those rows, 16 per thread and pass (zeros past d), read again (from L2). mean: μ_k per (b, KV head)
/// for K, null for Q; rows: code rows per (b', head); cols: code_cols(d).
template <class T>
__global__ void block_quant_kernel(Rows<T> x, Seqs seqs, bool is_q, int heads, int block, int blocks, int d,
                                   const float* mean, DType dtype, float* scale, std::int64_t rows, int cols,
                                   std::int8_t* codes) {
  __shared__ float scratch[32];
  const int blk = static_cast<int>(blockIdx.x), bh = static_cast<int>(blockIdx.y), b = bh / heads, h = bh % heads;
  const std::int64_t n = is_q ? seqs.len_q(b) : seqs.len_kv(b), first = static_cast<std::int64_t>(blk) * block;
  const int valid = first < n ? static_cast<int>(std::min<std::int64_t>(block, n - first)) : 0;
  const float* mu = mean != nullptr ? mean + static_cast<std::int64_t>(bh) * d : nullptr;
  float amax = 0.0f;
  detail::stage_rows(x, b, h, first, valid, d,
                     [&](int, int c, float v) { amax = fmaxf(amax, fabsf(quant_input(v, mu, c, dtype))); });
  amax = detail::block_reduce(amax, [](float a, float c) { return fmaxf(a, c); }, scratch);
  const float s = int8_block_scale(amax);
  if (threadIdx.x == 0) scale[static_cast<std::int64_t>(bh) * blocks + blk] = s;
  const std::int64_t* cu = x.cu;
  const std::int64_t row0 = ((cu != nullptr ? 0 : b) * static_cast<std::int64_t>(heads) + h) * rows +
                            (cu != nullptr ? cu[b] : 0) + first;  // the block's first code row
  const int per_row = cols / 16;
  for (int piece = static_cast<int>(threadIdx.x); piece < valid * per_row; piece += static_cast<int>(blockDim.x)) {
    const int r = piece / per_row, c = piece % per_row;
    alignas(16) std::int8_t out[16] = {};
    if (16 * c < d) {
      const uint4* src = reinterpret_cast<const uint4*>(x.row(b, h, first + r) + 16 * c);
      const uint4 v[2] = {src[0], src[1]};
      const T* e = reinterpret_cast<const T*>(v);
#pragma unroll
      for (int k = 0; k < 16; ++k) out[k] = int8_code(quant_input(detail::to_float(e[k]), mu, 16 * c + k, dtype), s);
    }
    *reinterpret_cast<uint4*>(codes + (row0 + r) * cols + 16 * c) = *reinterpret_cast<const uint4*>(out);
  }
}

template <class T>
void set_limits(int d) {
  check(cudaFuncSetAttribute(detail::chunk_sum_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(detail::chunk_bytes(d))),
        "shared memory");
}

template <class T>
void run(const Problem& p, const TensorView& q, const TensorView& k, const Seqs& seqs, int block_q, int block_k,
         int q_blocks, int k_blocks, int chunks, std::int64_t rows_q, std::int64_t rows_kv, std::int8_t* q8,
         std::int8_t* k8, float* q_scale, float* k_scale, float* k_mean, float* partial, cudaStream_t stream) {
  const int d = static_cast<int>(p.head_dim), hq = static_cast<int>(p.heads_q), hkv = static_cast<int>(p.heads_kv);
  const int cols = code_cols(d);
  const auto bq = static_cast<unsigned>(p.batch);
  const Rows<T> qr{static_cast<const T*>(q.data), q.stride_b, q.stride_h, q.stride_n, seqs.cu_q};
  const Rows<T> kr{static_cast<const T*>(k.data), k.stride_b, k.stride_h, k.stride_n, seqs.cu_kv};
  detail::chunk_sum_kernel<T><<<dim3(chunks, bq * hkv), d, detail::chunk_bytes(d), stream>>>(kr, seqs, false, hkv, d,
                                                                                             chunks, partial);
  detail::sequence_mean_kernel<><<<bq * hkv, 128, 0, stream>>>(partial, seqs, false, hkv, d, chunks, k_mean);
  const int means = static_cast<int>(p.batch * p.heads_kv * p.head_dim);
  round_to_dtype_kernel<<<(means + kThreads - 1) / kThreads, kThreads, 0, stream>>>(k_mean, means, p.dtype);
  block_quant_kernel<T><<<dim3(k_blocks, bq * hkv), kThreads, 0, stream>>>(kr, seqs, false, hkv, block_k, k_blocks, d,
                                                                           k_mean, p.dtype, k_scale, rows_kv, cols, k8);
  block_quant_kernel<T><<<dim3(q_blocks, bq * hq), kThreads, 0, stream>>>(qr, seqs, true, hq, block_q, q_blocks, d,
                                                                          nullptr, p.dtype, q_scale, rows_q, cols, q8);
  check(cudaGetLastError(), "int8 prologue launch");
}

}  // namespace

Int8Quant::Int8Quant(const Problem& p, const AttendOptions& options)
    : p_(p),
      block_q_(options.quant_block_q),
      block_k_(options.quant_block_k),
      q_blocks_(static_cast<int>((p.seqlen_q + options.quant_block_q - 1) / options.quant_block_q)),
      k_blocks_(static_cast<int>((p.seqlen_kv + options.quant_block_k - 1) / options.quant_block_k)),
      chunks_(static_cast<int>((p.seqlen_kv + kMeanChunk - 1) / kMeanChunk)),
      rows_q_(p.cu_seqlens_q.empty() ? p.seqlen_q : p.cu_seqlens_q.back()),
      rows_kv_(p.cu_seqlens_kv.empty() ? p.seqlen_kv : p.cu_seqlens_kv.back()) {
  const auto n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  const std::int64_t cols = code_cols(static_cast<int>(p.head_dim));
  q8_.allocate(n((p.cu_seqlens_q.empty() ? p.batch : 1) * p.heads_q * rows_q_ * cols));
  k8_.allocate(n((p.cu_seqlens_kv.empty() ? p.batch : 1) * p.heads_kv * rows_kv_ * cols));
  q_scale_.allocate(n(p.batch * p.heads_q * q_blocks_));
  k_scale_.allocate(n(p.batch * p.heads_kv * k_blocks_));
  k_mean_.allocate(n(p.batch * p.heads_kv * p.head_dim));
  partial_.allocate(n(p.batch * p.heads_kv * chunks_ * p.head_dim));
  if (!detail::measuring()) {
    if (p.dtype == DType::bf16) set_limits<__nv_bfloat16>(static_cast<int>(p.head_dim));
    else set_limits<__half>(static_cast<int>(p.head_dim));
  }
}

void Int8Quant::enqueue(const TensorView& q, const TensorView& k, const std::int64_t* cu_q, const std::int64_t* cu_kv,
                        FlashParams& f, cudaStream_t stream) const {
  const Seqs seqs = Seqs::of(p_, cu_q, cu_kv);
  if (p_.dtype == DType::bf16)
    run<__nv_bfloat16>(p_, q, k, seqs, block_q_, block_k_, q_blocks_, k_blocks_, chunks_, rows_q_, rows_kv_, q8_.ptr,
                       k8_.ptr, q_scale_.ptr, k_scale_.ptr, k_mean_.ptr, partial_.ptr, stream);
  else
    run<__half>(p_, q, k, seqs, block_q_, block_k_, q_blocks_, k_blocks_, chunks_, rows_q_, rows_kv_, q8_.ptr, k8_.ptr,
                q_scale_.ptr, k_scale_.ptr, k_mean_.ptr, partial_.ptr, stream);
  f.q8 = q8_.ptr;
  f.k8 = k8_.ptr;
  f.q_scale = q_scale_.ptr;
  f.k_scale = k_scale_.ptr;
  f.q_blocks = q_blocks_;
  f.k_blocks = k_blocks_;
  f.quant_block_q = block_q_;
  f.quant_block_k = block_k_;
  f.total_q = rows_q_;
}

}  // namespace spattn::cuda
