// CudaBackend::input_range: the summary the input range rule (spattn/input_range.hpp) needs of a tensor in CUDA
// memory, computed on the GPU — the largest |x| and its first position, the first non-finite element, in the host
// scan's (batch, head, row, dim) order — so that attend() / estimate() / sparse_attention() on device tensors report
// an input that would overflow fp32 with the same message as on the host. Two passes over the tensor (the max and
// the first non-finite position, then the first position of the max) and one synchronisation: part of the one-shot
// calls, not of Plan's enqueue-only path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "estimator_kernels.cuh"
#include "host_helpers.cuh"
#include "spattn/cuda/backend.hpp"

namespace spattn::cuda {
namespace {

using detail::check;
using detail::DeviceArray;

/// Element L of the tensor's [batch][heads][rows_max][dim] index space (rows past a sequence's end are skipped).
struct Space {
  const void* data;
  DType dtype;
  std::int64_t sb, sh, sn;
  std::int64_t heads, rows_max, dim;
  const std::int64_t* first_row;  ///< per batch entry: its first row (packed varlen) or 0
  const std::int64_t* rows;       ///< per batch entry: its rows
  bool varlen;
  std::int64_t total;

  /// The element's value and whether L names a real element.
  __device__ bool at(std::int64_t l, float& x) const {
    const std::int64_t d = l % dim, n = (l / dim) % rows_max, h = (l / (dim * rows_max)) % heads;
    const std::int64_t b = l / (dim * rows_max * heads);
    if (n >= rows[b]) return false;
    const std::int64_t off = (varlen ? 0 : b * sb) + h * sh + (first_row[b] + n) * sn + d;
    if (dtype == DType::f32) x = static_cast<const float*>(data)[off];
    else if (dtype == DType::f16) x = __half2float(static_cast<const __half*>(data)[off]);
    else x = __bfloat162float(static_cast<const __nv_bfloat16*>(data)[off]);
    return true;
  }
};

struct Result {
  unsigned long long max_bits;   ///< bits of the largest |x| (non-negative floats order as their bits)
  unsigned long long first_bad;  ///< smallest L of a non-finite element (~0: none)
  unsigned long long first_max;  ///< smallest L with |x| = max (~0: none)
  float bad;                     ///< the value at first_bad
};

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) max_pass(Space s, Result* r) {
  unsigned long long max_bits = 0, bad = ~0ull;
  for (std::int64_t l = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; l < s.total;
       l += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    float x;
    if (!s.at(l, x)) continue;
    if (!isfinite(x)) bad = bad < static_cast<unsigned long long>(l) ? bad : static_cast<unsigned long long>(l);
    else max_bits = max_bits > __float_as_uint(fabsf(x)) ? max_bits : __float_as_uint(fabsf(x));
  }
  __shared__ unsigned long long scratch_max[32], scratch_bad[32];
  max_bits = detail::block_reduce(max_bits, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; }, scratch_max);
  bad = detail::block_reduce(bad, [](unsigned long long a, unsigned long long b) { return a < b ? a : b; }, scratch_bad);
  if (threadIdx.x == 0) {
    atomicMax(&r->max_bits, max_bits);
    atomicMin(&r->first_bad, bad);
  }
}

__global__ void __launch_bounds__(kThreads) position_pass(Space s, Result* r) {
  const unsigned long long want = r->max_bits, bad_at = r->first_bad;
  unsigned long long first = ~0ull;
  for (std::int64_t l = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; l < s.total;
       l += static_cast<std::int64_t>(gridDim.x) * kThreads) {
    float x;
    if (!s.at(l, x)) continue;
    if (static_cast<unsigned long long>(l) == bad_at) r->bad = x;
    if (isfinite(x) && __float_as_uint(fabsf(x)) == want && static_cast<unsigned long long>(l) < first) first = l;
  }
  __shared__ unsigned long long scratch[32];
  first = detail::block_reduce(first, [](unsigned long long a, unsigned long long b) { return a < b ? a : b; }, scratch);
  if (threadIdx.x == 0) atomicMin(&r->first_max, first);
}

void decode(unsigned long long l, const Space& s, std::int64_t (&at)[4]) {
  const auto v = static_cast<std::int64_t>(l);
  at[3] = v % s.dim;
  at[2] = (v / s.dim) % s.rows_max;
  at[1] = (v / (s.dim * s.rows_max)) % s.heads;
  at[0] = v / (s.dim * s.rows_max * s.heads);
}

}  // namespace

std::optional<TensorRange> CudaBackend::input_range(const Problem& p, const TensorView& t, bool is_q, std::int64_t heads,
                                                    std::int64_t dim) const {
  if (t.memory != Memory::cuda) return std::nullopt;
  std::vector<std::int64_t> first_row, rows;
  std::int64_t rows_max = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    first_row.push_back(is_q ? p.row_offset_q(b) : p.row_offset_kv(b));
    rows.push_back(is_q ? p.seqlen_q_of(b) : p.seqlen_kv_of(b));
    rows_max = std::max(rows_max, rows.back());
  }
  TensorRange out;
  if (rows_max == 0) return out;
  const DeviceArray<std::int64_t> d_first(first_row), d_rows(rows);
  Space s{t.data, t.dtype, t.stride_b, t.stride_h, t.stride_n, heads, rows_max, dim, d_first.ptr, d_rows.ptr, p.varlen(),
          p.batch * heads * rows_max * dim};
  const Result init{0, ~0ull, ~0ull, 0.0f};
  DeviceArray<Result> r(std::vector<Result>{init});
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>((s.total + kThreads - 1) / kThreads, 4096));
  max_pass<<<blocks, kThreads>>>(s, r.ptr);
  position_pass<<<blocks, kThreads>>>(s, r.ptr);
  check(cudaGetLastError(), "input range kernels");
  Result h{};
  check(cudaMemcpy(&h, r.ptr, sizeof(Result), cudaMemcpyDeviceToHost), "input range: cudaMemcpy");
  if (h.first_bad != ~0ull) {
    out.finite = false;
    out.bad = h.bad;
    decode(h.first_bad, s, out.bad_at);
  }
  std::uint32_t bits = static_cast<std::uint32_t>(h.max_bits);
  float m;
  std::memcpy(&m, &bits, sizeof m);
  out.max_abs = m;
  if (h.max_bits != 0 && h.first_max != ~0ull) decode(h.first_max, s, out.max_at);
  return out;
}

}  // namespace spattn::cuda
