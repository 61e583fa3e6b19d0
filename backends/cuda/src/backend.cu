#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "estimator_interface.cuh"
#include "flash.cuh"
#include "host_helpers.cuh"
#include "int8_quant.cuh"
#include "spattn/cuda/backend.hpp"
#include "spattn/error.hpp"

namespace spattn::cuda {
namespace {

using detail::check;
using detail::DeviceArray;
using detail::with_element;
using detail::with_head_dim;

}  // namespace

/// True when the current device is compute capability 9.0 (the sm_90a kernels run there only) and the
/// environment does not force the mma.sync kernel (SPATTN_CUDA_KERNEL=sm80).
bool use_sm90() {
  const char* force = std::getenv("SPATTN_CUDA_KERNEL");
  if (force != nullptr && std::strcmp(force, "sm80") == 0) return false;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();  // no device: not an error of a later call
    return false;
  }
  return major == 9 && minor == 0;
}

namespace {

/// Whether the options ask for PV-skip (a finite threshold, global or for some head).
bool pv_skip_requested(const AttendOptions& options) {
  bool pv = options.pv_threshold < INFINITY;
  for (float t : options.pv_threshold_per_head) pv = pv || t < INFINITY;
  return pv;
}

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

}  // namespace

bool rows_aligned(const TensorView& t) {
  return aligned(t.data, 16) && t.stride_n % 8 == 0 && t.stride_h % 8 == 0 && t.stride_b % 8 == 0;
}

std::vector<std::string> executor_not_supported_reasons(const Problem& p, const MaskShape& shape,
                                                        const AttendOptions& options) {
  std::vector<std::string> why;
  if (pv_skip_requested(options)) {
    const int vote = options.pv_vote_rows;
    if (shape.tile_q % 128 != 0 || (shape.tile_k != 64 && shape.tile_k != 128))
      why.push_back("PV-skip in the CUDA kernel needs tile_q a multiple of 128 and tile_k 64 or 128");
    if (vote != 0 && vote != 16 && vote != 64 && vote != 128)
      why.push_back("PV-skip in the CUDA kernel votes over 16, 64 or 128 (0) rows");
    if (!use_sm90()) why.push_back("PV-skip runs on the sm90 kernel only (compute capability 9.0, SPATTN_CUDA_KERNEL unset)");
  }
  if (options.qk_int8) {
    if (!use_sm90())
      why.push_back("the int8 QK mode runs on the sm90 kernel only (compute capability 9.0, SPATTN_CUDA_KERNEL unset)");
    if (shape.tile_q % 128 != 0 && shape.tile_q != 16 && shape.tile_q != 32 && shape.tile_q != 64)
      why.push_back("the int8 QK mode needs mask tile_q 16, 32, 64 or a multiple of 128 (the sm90 kernel's work items)");
  }
  if (p.dtype != DType::f16 && p.dtype != DType::bf16) why.push_back("inputs must be f16 or bf16");
  const bool pv_dim = p.head_dim == 64 || p.head_dim == 96 || p.head_dim == 128;  // PV-skip: 128-key chunks
  if ((!pv_dim && p.head_dim != 256) || p.dim_v() != p.head_dim)
    why.push_back("head_dim must be 64, 96, 128 or 256 with head_dim_v = head_dim");
  if (pv_skip_requested(options) && !pv_dim) why.push_back("PV-skip in the CUDA kernel needs head_dim 64, 96 or 128");
  if (shape.tile_q % 64 != 0 && shape.tile_q != 16 && shape.tile_q != 32)
    why.push_back("mask tile_q must be 16, 32 or a multiple of 64");
  if (p.seqlen_q > (1 << 30) || p.seqlen_kv > (1 << 30)) why.push_back("sequence lengths must be < 2^30");
  return why;
}

std::vector<std::string> tensor_not_supported_reasons(const TensorView& q, const TensorView& k, const TensorView& v,
                                                      const TensorView& o) {
  std::vector<std::string> why;
  for (const TensorView* t : {&q, &k, &v, &o})
    if (t->memory != Memory::cuda) {
      why.push_back("tensors must be in CUDA memory");
      break;
    }
  for (const TensorView* t : {&q, &k, &v})
    if (!rows_aligned(*t)) {
      why.push_back("q/k/v need 16-byte aligned rows (pointer and strides multiples of 8 elements)");
      break;
    }
  if (!aligned(o.data, 8) || o.stride_n % 2 || o.stride_h % 2 || o.stride_b % 2)
    why.push_back("o needs 8-byte aligned element pairs");
  if (k.stride_n > INT32_MAX || v.stride_n > INT32_MAX) why.push_back("k/v row strides must be < 2^31 elements");
  return why;
}

std::vector<std::string> CudaBackend::not_supported_reasons(const Problem& p, const TensorView& q,
                                                            const TensorView& k, const TensorView& v,
                                                            const TileMask& mask, const TensorView& o,
                                                            const AttendOptions& options) const {
  std::vector<std::string> why = executor_not_supported_reasons(p, mask.shape, options);
  for (std::string& s : tensor_not_supported_reasons(q, k, v, o)) why.push_back(std::move(s));
  if (mask.tiles.size() > (std::size_t{1} << 31)) why.push_back("mask too large");
  return why;
}

namespace {

/// The kernels' parameter block for problem p, its tensors (v, o: null views in the statistics pass) and mask.
FlashParams flash_params(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                         const DeviceTileMask& dmask, const TensorView& o, float* lse, const std::int64_t* cu_q,
                         const std::int64_t* cu_kv, int* empty_rows) {
  FlashParams f{};
  f.q = q.data;
  f.k = k.data;
  f.v = v.data;
  f.o = o.data;
  f.lse = lse;
  f.q_sb = q.stride_b, f.q_sh = q.stride_h, f.q_sn = q.stride_n;
  f.k_sb = k.stride_b, f.k_sh = k.stride_h, f.k_sn = k.stride_n;
  f.v_sb = v.stride_b, f.v_sh = v.stride_h, f.v_sn = v.stride_n;
  f.o_sb = o.stride_b, f.o_sh = o.stride_h, f.o_sn = o.stride_n;
  f.o_dtype = o.dtype == DType::f32 ? 0 : o.dtype == DType::f16 ? 1 : 2;
  f.batch = static_cast<int>(p.batch);
  f.heads_q = static_cast<int>(p.heads_q);
  f.heads_kv = static_cast<int>(p.heads_kv);
  f.seqlen_q = static_cast<int>(p.seqlen_q);
  f.seqlen_kv = static_cast<int>(p.seqlen_kv);
  f.cu_q = cu_q;
  f.cu_kv = cu_kv;
  f.causal = p.causal ? 1 : 0;
  f.scale_log2 = scale_log2(p.softmax_scale());
  f.row_begin = dmask.row_begin();
  f.row_end = dmask.row_end();
  f.tiles = dmask.tiles();
  f.tile_q = dmask.tile_q();
  f.tile_k = dmask.tile_k();
  f.mask_heads = static_cast<int>(dmask.mask_heads());
  f.num_q_tiles = static_cast<int>(dmask.num_q_tiles());
  f.item_begin = dmask.item_begin();
  f.item_end = dmask.item_end();
  f.item_tiles = dmask.item_tiles();
  f.item_members = dmask.item_members();
  f.item_rows = dmask.item_rows();
  f.empty_rows = empty_rows;
  f.order = dmask.order();
  f.order_blocks = dmask.order_blocks();
  f.work_next = dmask.work_next();
  f.total_kv = p.cu_seqlens_kv.empty() ? p.seqlen_kv : p.cu_seqlens_kv.back();
  return f;
}

}  // namespace

namespace {

/// attend_async's parameter block (the int8 fields unset).
FlashParams attend_params(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                          const DeviceTileMask& dmask, const TensorView& o, float* lse, const std::int64_t* cu_q,
                          const std::int64_t* cu_kv, int* empty_rows, const DevicePvSkip* pv, const DeviceRowStates& states) {
  FlashParams f = flash_params(p, q, k, v, dmask, o, lse, cu_q, cu_kv, empty_rows);
  f.state = states.state_out;
  f.resume = states.resume;
  if (pv != nullptr) {
    if (f.order == nullptr || !use_sm90() || (f.tile_k != 64 && f.tile_k != 128) || p.head_dim == 256)
      fail("cuda backend: PV-skip needs the sm90 kernel, tile_q a multiple of 128, tile_k 64 or 128, head_dim 64, 96 or 128");
    f.pv_thr = pv->thresholds;
    f.pv_vote = pv->vote_rows;
    f.pv_exempt = pv->exempt_last;
    f.pv_skipped = pv->skipped;
  }
  return f;
}

/// The executor kernel for f (the sm90 one when the mask has a work order and the device runs it).
void launch_flash(const Problem& p, const FlashParams& f, const DeviceTileMask& dmask, cudaStream_t stream) {
  const bool bf16 = p.dtype == DType::bf16;
  const int d = static_cast<int>(p.head_dim);
  const bool sm90 = f.order != nullptr && use_sm90();
  const int n = sm90 ? dmask.order_size() : 0;
  with_head_dim(d, [&](auto dim) {
    with_element(bf16, [&](auto t) {
      using T = decltype(t);
      if (sm90) launch_flash_sm90<T, dim()>(f, n, stream);
      else launch_flash_sm80<T, dim()>(f, stream);
    });
  });
  check(cudaGetLastError(), "kernel launch");
}

}  // namespace

void attend_async(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                  const DeviceTileMask& dmask, const TensorView& o, float* lse, const std::int64_t* cu_q,
                  const std::int64_t* cu_kv, int* empty_rows, CUstream_st* stream, const DevicePvSkip* pv,
                  const DeviceRowStates& states) {
  launch_flash(p, attend_params(p, q, k, v, dmask, o, lse, cu_q, cu_kv, empty_rows, pv, states), dmask, stream);
}

void state_pass_async(const Problem& p, const TensorView& q, const TensorView& k, const DeviceTileMask& dmask,
                      SoftmaxState* state, const std::int64_t* cu_q, const std::int64_t* cu_kv, int* empty_rows,
                      CUstream_st* stream) {
  FlashParams f = flash_params(p, q, k, TensorView{}, dmask, TensorView{}, nullptr, cu_q, cu_kv, empty_rows);
  f.state = state;
  const bool bf16 = p.dtype == DType::bf16;
  with_head_dim(p.head_dim, [&](auto dim) {
    with_element(bf16, [&](auto t) { launch_flash_sm80_state<decltype(t), dim()>(f, stream); });
  });
  check(cudaGetLastError(), "kernel launch");
}

ExecutorState::ExecutorState(const Problem& p, const AttendOptions& options)
    : problem_(p), lse_(options.lse), states_{options.state_out, options.resume}, pv_on_(pv_skip_requested(options)) {
  cu_q_.assign(p.cu_seqlens_q);
  cu_kv_.assign(p.cu_seqlens_kv);
  empty_rows_.allocate(1);
  skipped_.allocate(1);
  if (options.qk_int8) int8_ = std::make_unique<Int8Quant>(p, options);
  if (pv_on_) {
    std::vector<float> t = options.pv_threshold_per_head;
    if (t.empty()) t.assign(static_cast<std::size_t>(p.heads_q), options.pv_threshold);
    thresholds_.assign(t);
    pv_.thresholds = thresholds_.ptr;
    pv_.vote_rows = options.pv_vote_rows == 0 ? 128 : options.pv_vote_rows;  // 0: min(tile_q, 128) = 128
    pv_.exempt_last = options.pv_exempt_last;
    pv_.skipped = skipped_.ptr;
  }
}

ExecutorState::~ExecutorState() = default;

std::size_t ExecutorState::int8_bytes() const { return int8_ ? int8_->bytes() : 0; }

void ExecutorState::enqueue(const TensorView& q, const TensorView& k, const TensorView& v, const DeviceTileMask& mask,
                            const TensorView& o, cudaStream_t stream, const SoftmaxState* resume) {
  DeviceRowStates states = states_;
  if (resume != nullptr) states.resume = resume;
  check(cudaMemsetAsync(empty_rows_.ptr, 0, sizeof(int), stream), "cudaMemsetAsync");
  check(cudaMemsetAsync(skipped_.ptr, 0, sizeof(unsigned long long), stream), "cudaMemsetAsync");
  FlashParams f = attend_params(problem_, q, k, v, mask, o, lse_, cu_q_.ptr, cu_kv_.ptr, empty_rows_.ptr,
                                pv_on_ ? &pv_ : nullptr, states);
  if (int8_ != nullptr) {  // the codes and scales first, on the same stream
    if (f.order == nullptr || !use_sm90())
      fail("cuda backend: the int8 QK mode needs the sm90 kernel and tile_q 16, 32, 64 or a multiple of 128");
    int8_->enqueue(q, k, cu_q_.ptr, cu_kv_.ptr, f, stream);
  }
  launch_flash(problem_, f, mask, stream);
}

AttendStats ExecutorState::stats(const TileMask& mask, cudaStream_t stream) const {
  check(cudaStreamSynchronize(stream), "synchronize");
  int empty_rows = 0;
  unsigned long long skipped = 0;
  check(cudaMemcpy(&empty_rows, empty_rows_.ptr, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(&skipped, skipped_.ptr, sizeof(skipped), cudaMemcpyDeviceToHost), "cudaMemcpy");
  AttendStats stats;
  stats.backend = "cuda";
  stats.pv_skipped = static_cast<std::int64_t>(skipped);
  stats.empty_rows = empty_rows;
  stats.visited_tiles = mask.visited_tiles(problem_.heads_q);
  return stats;
}

AttendStats CudaBackend::attend(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                                const TileMask& mask, const TensorView& o, const AttendOptions& options) const {
  const DeviceTileMask dmask(mask);
  ExecutorState state(p, options);
  state.enqueue(q, k, v, dmask, o, nullptr);
  return state.stats(mask, nullptr);
}

std::shared_ptr<void> CudaBackend::allocate(Memory memory, std::size_t bytes) const {
  if (memory != Memory::cuda) return nullptr;
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)), "cudaMalloc");
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

bool CudaBackend::download(Memory memory, void* host_dst, const void* src, std::size_t bytes) const {
  if (memory != Memory::cuda) return false;
  check(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return true;
}

bool CudaBackend::upload(Memory memory, void* dst, const void* host_src, std::size_t bytes) const {
  if (memory != Memory::cuda) return false;
  check(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  return true;
}

}  // namespace spattn::cuda
