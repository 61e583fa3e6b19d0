#include "dlpack_tensor.hpp"

#include <sstream>

// The DLPack header: Debian's libdlpack-dev (dlpack/dlpack.h), or where that is not installed a copy
// of the one PyTorch installs (python/CMakeLists.txt; only the header is used, nothing of torch is
// linked).
#include <dlpack/dlpack.h>

#include "spattn/error.hpp"

namespace py = pybind11;

namespace spattn::python {
namespace {

DType dtype_of(const DLDataType& t, const char* name) {
  require(t.lanes == 1, name, ": vector dtypes (lanes ", t.lanes, ") are not supported");
  if (t.code == kDLFloat && t.bits == 32) return DType::f32;
  if (t.code == kDLFloat && t.bits == 16) return DType::f16;
  if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
  fail(name, ": dtype (DLPack code ", int(t.code), ", ", int(t.bits),
       " bits) is not supported: spattn takes float32, float16 or bfloat16");
}

/// The message of the Python exception being handled (inside a catch of error_already_set).
std::string python_message(const py::error_already_set& e) { return e.what(); }

}  // namespace

std::string shape_string(const std::array<std::int64_t, 4>& shape) {
  std::ostringstream s;
  s << "[" << shape[0] << ", " << shape[1] << ", " << shape[2] << ", " << shape[3] << "]";
  return s.str();
}

std::pair<int, int> dlpack_device(py::handle object, const char* name) {
  require(py::hasattr(object, "__dlpack__") && py::hasattr(object, "__dlpack_device__"), name,
          ": expected an array with __dlpack__ (NumPy, torch, CuPy, JAX), got ",
          std::string(py::str(py::type::of(object).attr("__name__"))));
  try {
    auto device = object.attr("__dlpack_device__")().cast<py::tuple>();
    return {device[0].cast<int>(), device[1].cast<int>()};
  } catch (const py::error_already_set& e) {
    fail(name, ": __dlpack_device__ failed: ", python_message(e));
  } catch (const py::cast_error& e) {
    fail(name, ": __dlpack_device__ did not return (device_type, device_id)");
  }
}

DlpackTensor import_dlpack(py::handle object, const char* name, const std::string& layout,
                           std::int64_t stream) {
  require(layout == "bhnd" || layout == "bnhd", "layout: expected 'bhnd' or 'bnhd', got '", layout,
          "'");
  DlpackTensor t;
  std::tie(t.device_type, t.device_id) = dlpack_device(object, name);
  require(t.device_type == kDLCPU || t.device_type == kDLCUDA, name, ": DLPack device type ",
          t.device_type, " is not supported (CPU = 1 or CUDA = 2)");
  try {
    // DLPack: a host array takes no stream; a CUDA producer makes its pending work visible on the
    // consumer's stream.
    t.capsule = t.device_type == kDLCPU ? object.attr("__dlpack__")()
                                        : object.attr("__dlpack__")(py::arg("stream") = stream);
  } catch (const py::error_already_set& e) {
    fail(name, ": cannot be read through DLPack: ", python_message(e));
  }
  require(PyCapsule_IsValid(t.capsule.ptr(), "dltensor"), name,
          ": __dlpack__ did not return an unconsumed 'dltensor' capsule");
  // The capsule is not renamed "used_dltensor": its destructor then releases the DLManagedTensor
  // when the capsule goes (DLPack's rule for a capsule its consumer did not take over).
  const auto* managed =
      static_cast<const DLManagedTensor*>(PyCapsule_GetPointer(t.capsule.ptr(), "dltensor"));
  const DLTensor& dl = managed->dl_tensor;
  require(dl.device.device_type == t.device_type, name,
          ": __dlpack__ and __dlpack_device__ disagree on the device");
  require(dl.ndim == 4, name, ": expected 4 dimensions [B, ", layout == "bhnd" ? "H, N" : "N, H",
          ", D], got ", dl.ndim);
  std::array<std::int64_t, 4> shape{}, strides{};
  for (int i = 3; i >= 0; --i) {
    shape[i] = dl.shape[i];
    // No strides: compact row-major (DLPack before 1.0 allows it).
    strides[i] =
        dl.strides != nullptr ? dl.strides[i] : (i == 3 ? 1 : strides[i + 1] * shape[i + 1]);
  }
  require(strides[3] == 1 || shape[3] == 1, name,
          ": the last dimension must be contiguous (stride 1), got stride ", strides[3],
          " (pass a copy with a contiguous last dimension)");
  if (layout == "bnhd") {
    std::swap(shape[1], shape[2]);
    std::swap(strides[1], strides[2]);
  }
  // A dimension of extent 1 is never stepped over, and producers report any stride for it (torch gives 1 to a
  // one-token query [B, H, 1, D]): it gets the compact stride over the dimensions inside it, which the views' checks
  // and the GPU's tensor descriptors take.
  if (shape[2] == 1) strides[2] = shape[3];
  if (shape[1] == 1) strides[1] = strides[2] * shape[2];
  if (shape[0] == 1) strides[0] = strides[1] * shape[1];
  t.shape = shape;
  t.view.data = static_cast<char*>(dl.data) + dl.byte_offset;
  t.view.dtype = dtype_of(dl.dtype, name);
  t.view.stride_b = strides[0];
  t.view.stride_h = strides[1];
  t.view.stride_n = strides[2];
  t.view.memory = t.device_type == kDLCPU ? Memory::host : Memory::cuda;
  return t;
}

}  // namespace spattn::python
