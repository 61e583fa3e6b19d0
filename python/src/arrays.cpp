#include "arrays.hpp"

#include <algorithm>
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

namespace {

std::int64_t longest(const std::vector<std::int64_t>& cu) {
  std::int64_t n = 0;
  for (std::size_t b = 0; b + 1 < cu.size(); ++b) n = std::max(n, cu[b + 1] - cu[b]);
  return n;
}

}  // namespace

Problem problem_of(const DlpackTensor& q, const DlpackTensor& k, const DlpackTensor* v, bool causal,
                   std::optional<float> scale, const Call& call) {
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
  if (call.cu_seqlens_q.empty() && call.cu_seqlens_kv.empty()) return p;
  require(!call.cu_seqlens_q.empty() && !call.cu_seqlens_kv.empty(),
          "cu_seqlens: give both cu_seqlens_q and cu_seqlens_k or neither");
  require(call.cu_seqlens_q.size() >= 2 && call.cu_seqlens_q.size() == call.cu_seqlens_kv.size(),
          "cu_seqlens: cu_seqlens_q and cu_seqlens_k must hold B+1 >= 2 offsets each, got ", call.cu_seqlens_q.size(),
          " and ", call.cu_seqlens_kv.size());
  require(p.batch == 1, "cu_seqlens: q, k and v must be packed [total, H, D] arrays");
  // Every offset is checked by Problem::validate (ascending from 0, within the longest length); the packed rows must
  // hold the last.
  require(call.cu_seqlens_q.back() == p.seqlen_q, "cu_seqlens_q: ends at ", call.cu_seqlens_q.back(),
          ", q has ", p.seqlen_q, " rows");
  require(call.cu_seqlens_kv.back() == p.seqlen_kv, "cu_seqlens_k: ends at ", call.cu_seqlens_kv.back(),
          ", k has ", p.seqlen_kv, " rows");
  p.batch = static_cast<std::int64_t>(call.cu_seqlens_q.size()) - 1;
  p.cu_seqlens_q = call.cu_seqlens_q;
  p.cu_seqlens_kv = call.cu_seqlens_kv;
  p.seqlen_q = call.max_seqlen_q > 0 ? call.max_seqlen_q : longest(call.cu_seqlens_q);
  p.seqlen_kv = call.max_seqlen_kv > 0 ? call.max_seqlen_kv : longest(call.cu_seqlens_kv);
  return p;
}

float* lse_of(const Call& call, const DlpackTensor& q, const Problem& p) {
  if (call.lse.is_none()) return nullptr;
  const DlpackTensor lse = import_dlpack(call.lse, "lse", "bhnd", call.stream);
  require_same_device(lse, "lse", q);
  const std::array<std::int64_t, 4> expected{p.batch, p.heads_q, p.seqlen_q, 1};
  require(lse.view.dtype == DType::f32 && lse.shape == expected && lse.view.stride_n == 1 &&
              lse.view.stride_h == p.seqlen_q && lse.view.stride_b == p.heads_q * p.seqlen_q,
          "lse: expected a contiguous float32 ", shape_string(expected), " array, got ", shape_string(lse.shape));
  return static_cast<float*>(lse.view.data);
}

void check_out(const DlpackTensor& o, const DlpackTensor& q, const Problem& p) {
  require_same_device(o, "out", q);
  const std::array<std::int64_t, 4> expected =
      p.varlen() ? std::array<std::int64_t, 4>{1, p.heads_q, p.cu_seqlens_q.back(), p.dim_v()}
                 : std::array<std::int64_t, 4>{p.batch, p.heads_q, p.seqlen_q, p.dim_v()};
  require(o.shape == expected, "out: shape ", shape_string(o.shape), ", expected ",
          shape_string(expected), " ([B, Hq, Nq, Dv])");
}

}  // namespace spattn::python
