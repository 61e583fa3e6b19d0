#include "inputs.hpp"

#include <cmath>
#include <cstring>

#include "spattn/error.hpp"
#include "spattn/npy.hpp"

namespace spattn::cli {

HostTensor load_tensor(const std::string& path, const char* what, Layout layout, bool bf16, bool finite) {
  const NpyArray a = read_npy(path);
  DType dtype;
  if (a.descr == "<f4") dtype = DType::f32;
  else if (a.descr == "<f2") dtype = DType::f16;
  else if (a.descr == "<u2" && bf16) dtype = DType::bf16;
  else if (a.descr == "<u2") fail(what, " '", path, "': uint16 data; pass --bf16 if these are bfloat16 bit patterns");
  else fail(what, " '", path, "': dtype ", a.descr, " is not supported (float32, float16, or bf16 as uint16)");
  std::int64_t shape[4];
  if (a.shape.size() == 4) {
    for (int i = 0; i < 4; ++i) shape[i] = a.shape[static_cast<std::size_t>(i)];
    if (layout == Layout::bnhd) std::swap(shape[1], shape[2]);  // [B,N,H,D] -> extents B,H,N,D
  } else if (a.shape.size() == 3) {
    shape[0] = 1;
    for (int i = 0; i < 3; ++i) shape[i + 1] = a.shape[static_cast<std::size_t>(i)];
    if (layout == Layout::bnhd) std::swap(shape[1], shape[2]);
  } else {
    fail(what, " '", path, "': expected a 4-d [B,H,N,D] or 3-d [H,N,D] array, got ", a.shape.size(), " dimensions");
  }
  for (std::int64_t e : shape) require(e >= 1, what, " '", path, "': empty dimension in the shape");
  HostTensor t(dtype, shape[0], shape[1], shape[2], shape[3], layout);
  require(t.size_bytes() == a.data.size(), what, " '", path, "': data size does not match its shape");
  std::memcpy(t.data(), a.data.data(), a.data.size());
  require(!finite || t.all_finite(), what, " '", path, "': contains NaN or Inf values");
  return t;
}

Workload load_inputs(const FileInputs& f) {
  require(!f.q.empty() && !f.k.empty() && !f.v.empty(), "--q/--k/--v: give all three files or none");
  Workload w;
  w.q = load_tensor(f.q, "--q", f.layout, f.bf16);
  w.k = load_tensor(f.k, "--k", f.layout, f.bf16);
  w.v = load_tensor(f.v, "--v", f.layout, f.bf16);
  require(w.q.dtype() == w.k.dtype() && w.k.dtype() == w.v.dtype(), "--q/--k/--v: dtypes differ (",
          to_string(w.q.dtype()), ", ", to_string(w.k.dtype()), ", ", to_string(w.v.dtype()), ")");
  require(w.q.batch() == w.k.batch() && w.k.batch() == w.v.batch(), "--q/--k/--v: batch sizes differ (",
          w.q.batch(), ", ", w.k.batch(), ", ", w.v.batch(), ")");
  require(w.q.dim() == w.k.dim(), "--q/--k: head dims differ (", w.q.dim(), " vs ", w.k.dim(), ")");
  require(w.k.heads() == w.v.heads() && w.k.seqlen() == w.v.seqlen(), "--k/--v: shapes differ (heads ",
          w.k.heads(), " vs ", w.v.heads(), ", length ", w.k.seqlen(), " vs ", w.v.seqlen(), ")");
  w.problem = problem_of(w.q, w.k, w.v, f.causal);
  return w;
}

}  // namespace spattn::cli
