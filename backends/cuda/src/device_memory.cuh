// Host-side helpers shared by the CUDA backend's files: the CUDA error check and an owned device array.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "spattn/error.hpp"

namespace spattn::cuda::detail {

/// Throws spattn::Error "cuda backend: <what>: <CUDA's message>" when e is not cudaSuccess.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("cuda backend: ", what, ": ", cudaGetErrorString(e));
}

/// Device memory for n elements of T (at least one allocated), or a copy of a host vector (null when empty);
/// freed with the owner.
template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  std::size_t n = 0;
  DeviceArray() = default;
  explicit DeviceArray(const std::vector<T>& host) { assign(host); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr); }
  void allocate(std::size_t count) {
    release();
    n = std::max<std::size_t>(count, 1);
    check(cudaMalloc(&ptr, n * sizeof(T)), "cudaMalloc");
  }
  void assign(const std::vector<T>& host) {
    release();
    if (host.empty()) return;
    allocate(host.size());
    check(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  std::size_t bytes() const { return n * sizeof(T); }

 private:
  void release() {
    cudaFree(ptr);
    ptr = nullptr;
    n = 0;
  }
};

}  // namespace spattn::cuda::detail
