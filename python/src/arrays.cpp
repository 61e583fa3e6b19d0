#include "arrays.hpp"

#include <array>

#include "spattn/error.hpp"

namespace py = pybind11;

namespace spattn::python {

DlpackTensor import_array(py::handle object, const char* name, const Call& call) {
  return import_dlpack(object, name, call.layout, call.stream);
}

void require_same_device(const DlpackTensor& t, const char* name, const DlpackTensor& q) {
  require(t.device_type == q.device_type && t.device_id == q.device_id, name,
          ": on DLPack device (", t.device_type, ", ", t.device_id, "), q on (", q.device_type,
          ", ", q.device_id, "): every array must be on one device");
}

Problem problem_of(const DlpackTensor& q, const DlpackTensor& k, const DlpackTensor* v, bool causal,
                   std::optional<float> scale) {
  Problem p;
  p.batch = q.shape[0];
  p.heads_q = q.shape[1];
  p.seqlen_q = q.shape[2];
  p.head_dim = q.shape[3];
  p.heads_kv = k.shape[1];
  p.seqlen_kv = k.shape[2];
  p.causal = causal;
  p.scale = scale;
  p.dtype = q.view.dtype;
  require_same_device(k, "k", q);
  require(k.shape[0] == p.batch && k.shape[3] == p.head_dim, "k: shape ", shape_string(k.shape),
          " does not fit q ", shape_string(q.shape),
          " (k must be [B, Hkv, Nkv, D] with q's B and D)");
  if (v != nullptr) {
    require_same_device(*v, "v", q);
    require(v->shape[0] == p.batch && v->shape[1] == p.heads_kv && v->shape[2] == p.seqlen_kv,
            "v: shape ", shape_string(v->shape), " does not fit k ", shape_string(k.shape),
            " (v must be [B, Hkv, Nkv, Dv] with k's B, Hkv and Nkv)");
    p.head_dim_v = v->shape[3];
  }
  return p;
}

void check_out(const DlpackTensor& o, const DlpackTensor& q, const Problem& p) {
  require_same_device(o, "out", q);
  const std::array<std::int64_t, 4> expected{p.batch, p.heads_q, p.seqlen_q, p.dim_v()};
  require(o.shape == expected, "out: shape ", shape_string(o.shape), ", expected ",
          shape_string(expected), " ([B, Hq, Nq, Dv])");
}

}  // namespace spattn::python
