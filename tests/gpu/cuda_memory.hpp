// CUDA memory for the GPU tests: the conformance table's memory adapter (device copies of host tensors, poisoned
// outputs) and a raw device buffer for the tests that manage their own (graphs, workspaces, PV-skip cases).
#pragma once

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "../conformance/conformance.hpp"

namespace spattn::test {

inline void cuda_check(cudaError_t e) { REQUIRE_MESSAGE(e == cudaSuccess, cudaGetErrorString(e)); }

class CudaMemory final : public conformance::MemoryAdapter {
 public:
  ~CudaMemory() override {
    for (void* p : buffers_) cudaFree(p);
  }
  Memory memory() const override { return Memory::cuda; }
  TensorView upload(const HostTensor& t) override {
    TensorView v = t.view();
    v.data = alloc(t.size_bytes());
    cuda_check(cudaMemcpy(v.data, t.data(), t.size_bytes(), cudaMemcpyHostToDevice));
    v.memory = Memory::cuda;
    return v;
  }
  TensorView poisoned_like(const HostTensor& t) override {
    TensorView v = t.view();
    v.data = alloc(t.size_bytes());
    cuda_check(cudaMemset(v.data, 0xff, t.size_bytes()));
    v.memory = Memory::cuda;
    return v;
  }
  float* poisoned_floats(std::size_t n) override {
    auto* p = static_cast<float*>(alloc(n * sizeof(float)));
    cuda_check(cudaMemset(p, 0xff, n * sizeof(float)));
    return p;
  }
  void download(const TensorView& from, HostTensor& to) override {
    cuda_check(cudaMemcpy(to.data(), from.data, to.size_bytes(), cudaMemcpyDeviceToHost));
  }
  void download(const float* from, std::vector<float>& to) override {
    cuda_check(cudaMemcpy(to.data(), from, to.size() * sizeof(float), cudaMemcpyDeviceToHost));
  }

 private:
  void* alloc(std::size_t bytes) {
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, bytes > 0 ? bytes : 1));
    buffers_.push_back(p);
    return p;
  }
  std::vector<void*> buffers_;
};

/// A device allocation of n bytes, freed with the object.
struct DeviceTensor {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  explicit DeviceTensor(std::size_t n) : bytes(n) { cuda_check(cudaMalloc(&ptr, n)); }
  ~DeviceTensor() { cudaFree(ptr); }
};

/// `host` copied into `dev` (large enough): a view of the same layout in CUDA memory.
inline TensorView on_device(const HostTensor& host, DeviceTensor& dev) {
  cuda_check(cudaMemcpy(dev.ptr, host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  TensorView v = host.view();
  v.data = dev.ptr;
  v.memory = Memory::cuda;
  return v;
}

}  // namespace spattn::test
