// SpargeAttn's quantized compute mode (AttendOptions::qk_int8) on the GPU: the prologue that the sm90 kernel's int8
// Q·Kᵀ reads (flash_sm90.cu, kInt8). The rules are spattn/quant.hpp's and pooling.hpp's, so the codes and scales are the
// reference's make_quant / quantize_row bits (reference/src/executor.cpp):
//   1. μ_k per (batch, KV head): estimator_kernels.cuh's chunk_sum_kernel + sequence_mean_kernel (sequence_mean), rounded to
//      the input dtype;
//   2. per block of quant_block_q query rows / quant_block_k keys, the scale int8_block_scale(max |x|) over the block's
//      valid rows, of Q and of the smoothed keys int8_smoothed_key(k, μ_k);
//   3. the codes int8_code(x, scale), code_cols(D) per row (zeros past D), at row (b'·H + h)·rows + off + i of an
//      [B', H, rows, code_cols] array: B' = 1 and rows = the packed total for a variable-length batch (off: the
//      sequence's first row), else B' = B, rows = the length, off = 0 — the layout of FlashParams::q8 / k8.
// Everything is enqueued on the caller's stream: no synchronization, CUDA-graph capturable; the buffers are allocated
// once per ExecutorState (from a Plan's workspace when one is given).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "flash.cuh"
#include "host_helpers.cuh"
#include "spattn/attend_options.hpp"
#include "spattn/problem.hpp"

namespace spattn::cuda {

class Int8Quant {
 public:
  Int8Quant(const Problem& p, const AttendOptions& options);
  /// Enqueues steps 1–3 for q and k (device tensors of the problem; cu_q / cu_kv: device offsets or null) and
  /// points f's int8 fields at the results.
  void enqueue(const TensorView& q, const TensorView& k, const std::int64_t* cu_q, const std::int64_t* cu_kv,
               FlashParams& f, cudaStream_t stream) const;
  std::size_t bytes() const {
    return q8_.bytes() + k8_.bytes() + q_scale_.bytes() + k_scale_.bytes() + k_mean_.bytes() + partial_.bytes();
  }

 private:
  Problem p_;
  int block_q_, block_k_, q_blocks_, k_blocks_, chunks_;
  std::int64_t rows_q_, rows_kv_;  ///< code rows per (b', h)
  detail::DeviceArray<std::int8_t> q8_, k8_;
  detail::DeviceArray<float> q_scale_, k_scale_, k_mean_, partial_;
};

}  // namespace spattn::cuda
