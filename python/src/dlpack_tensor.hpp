// Arrays handed in from Python, read through the DLPack protocol (__dlpack__ / __dlpack_device__)
// without a copy: NumPy arrays and torch CPU tensors (host memory), torch / CuPy CUDA tensors (CUDA
// memory). The borrowed view lives as long as the DlpackTensor, which holds the producer's capsule
// (the capsule's own destructor releases the producer's DLManagedTensor, so the caller's array is
// referenced only during the call).
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "spattn/problem.hpp"

namespace spattn::python {

struct DlpackTensor {
  pybind11::object capsule;  ///< keeps the producer's memory alive
  TensorView view;  ///< [B, H, N, D] as TensorView takes it (element strides, last dim contiguous)
  std::array<std::int64_t, 4> shape;  ///< B, H, N, D
  int device_type = 1;                ///< DLPack's: 1 CPU, 2 CUDA
  int device_id = 0;
};

/// Reads `object` (argument `name`) as a 4-d array in [B, H, N, D] index order ("bhnd") or [B, N,
/// H, D] ("bnhd", read as the strided view of its transpose). `stream`: the consumer's CUDA stream
/// passed to __dlpack__ for CUDA arrays (DLPack: 1 = the legacy default stream). Throws
/// spattn::Error naming the argument: no __dlpack__, a device other than CPU / CUDA, a dtype other
/// than float32 / float16 / bfloat16, a rank other than 4, a last dimension that is not contiguous.
DlpackTensor import_dlpack(pybind11::handle object, const char* name, const std::string& layout,
                           std::int64_t stream);

/// The DLPack device of `object` as (device_type, device_id); throws spattn::Error naming the
/// argument.
std::pair<int, int> dlpack_device(pybind11::handle object, const char* name);

/// "[2, 4, 128, 64]"
std::string shape_string(const std::array<std::int64_t, 4>& shape);

}  // namespace spattn::python
