// Host-side helpers shared by the CUDA backend's files: the CUDA error check, the workspace arena and an owned device
// array (device-side helpers: estimator_kernels.cuh, flash_helpers.cuh, warp_primitives.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "spattn/error.hpp"

namespace spattn::cuda::detail {

/// Throws spattn::Error "cuda backend: <what>: <CUDA's message>" when e is not cudaSuccess.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("cuda backend: ", what, ": ", cudaGetErrorString(e));
}

/// Calls f(std::integral_constant<int, D>{}) for the head dim d among Dims, the head dims a kernel is instantiated
/// for; throws spattn::Error for any other (the dispatcher's not_supported_reasons keep those out first).
template <int... Dims, class F>
void with_head_dim_of(std::int64_t d, F&& f) {
  const bool found = ((d == Dims ? (f(std::integral_constant<int, Dims>{}), true) : false) || ...);
  if (!found) fail("cuda backend: no kernel for head dim ", d);
}
/// with_head_dim_of for the head dims of the executor (and of every kernel that takes them all): 64, 96, 128, 256.
template <class F>
void with_head_dim(std::int64_t d, F&& f) {
  with_head_dim_of<64, 96, 128, 256>(d, static_cast<F&&>(f));
}
/// Calls f(T{}) with T the device element type of a bf16 or fp16 tensor: __nv_bfloat16 or __half.
template <class F>
void with_element(bool bf16, F&& f) {
  if (bf16) f(__nv_bfloat16{});
  else f(__half{});
}

/// Where the backend's device allocations come from while an ArenaScope is active on this thread: a caller's
/// workspace, carved in 256-byte aligned pieces (cuda::Plan's workspace option), or nothing at all while measuring
/// (base null: pieces are counted, their addresses are never dereferenced, uploads are skipped). Otherwise cudaMalloc.
class Arena {
 public:
  static constexpr std::size_t kAlign = 256;
  Arena(void* base, std::size_t bytes) : base_(static_cast<char*>(base)), bytes_(bytes) {}
  bool measuring() const { return base_ == nullptr; }
  std::size_t used() const { return used_; }
  void* take(std::size_t bytes) {
    const std::size_t at = used_;
    used_ += (bytes + kAlign - 1) / kAlign * kAlign;
    if (measuring()) return reinterpret_cast<void*>(kAlign + at);  // a distinct, never dereferenced address
    if (used_ > bytes_)
      fail("cuda plan: the caller's workspace of ", bytes_, " bytes is too small (Plan::required_bytes gives the size)");
    return base_ + at;
  }

 private:
  char* base_;
  std::size_t bytes_, used_ = 0;
};
inline thread_local Arena* current_arena = nullptr;
/// Makes `arena` the source of this thread's device allocations for the scope's lifetime.
class ArenaScope {
 public:
  explicit ArenaScope(Arena& arena) : previous_(current_arena) { current_arena = &arena; }
  ~ArenaScope() { current_arena = previous_; }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  Arena* previous_;
};

/// bytes of device memory (at least 1): from the current arena (owned = false) or cudaMalloc (owned = true).
inline void* device_allocate(std::size_t bytes, bool& owned) {
  bytes = std::max<std::size_t>(bytes, 1);
  owned = current_arena == nullptr;
  if (!owned) return current_arena->take(bytes);
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}
inline void device_free(void* p, bool owned) {
  if (owned) cudaFree(p);
}
/// True while Plan::required_bytes measures: allocations are counted only, nothing may touch the device.
inline bool measuring() { return current_arena != nullptr && current_arena->measuring(); }
/// A synchronous host → device copy into memory from device_allocate (none while measuring).
inline void upload(void* dst, const void* src, std::size_t bytes) {
  if (!measuring() && bytes > 0) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

/// Device memory for n elements of T (at least one allocated, by device_allocate), or a copy of a host vector (null
/// when empty); freed with the owner.
template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  std::size_t n = 0;
  DeviceArray() = default;
  explicit DeviceArray(const std::vector<T>& host) { assign(host); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { device_free(ptr, owned_); }
  void allocate(std::size_t count) {
    release();
    n = std::max<std::size_t>(count, 1);
    ptr = static_cast<T*>(device_allocate(n * sizeof(T), owned_));
  }
  void assign(const std::vector<T>& host) {
    release();
    if (host.empty()) return;
    allocate(host.size());
    upload(ptr, host.data(), host.size() * sizeof(T));
  }
  std::size_t bytes() const { return n * sizeof(T); }

 private:
  void release() {
    device_free(ptr, owned_);
    ptr = nullptr;
    n = 0;
  }
  bool owned_ = true;
};

}  // namespace spattn::cuda::detail
