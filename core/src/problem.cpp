#include "spattn/problem.hpp"

#include <cmath>
#include <sstream>

#include "spattn/error.hpp"
#include "spattn/mask_policy.hpp"

namespace spattn {

std::string_view to_string(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "fp32" || name == "float32") return DType::f32;
  if (name == "f16" || name == "fp16" || name == "float16") return DType::f16;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  fail("dtype: unknown dtype '", name, "' (expected f32, f16 or bf16)");
}

TensorView TensorView::dense(void* data, DType dtype, Layout layout, std::int64_t batch, std::int64_t heads,
                             std::int64_t seqlen, std::int64_t dim) {
  (void)batch;
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  if (layout == Layout::bhnd) {
    v.stride_n = dim;
    v.stride_h = seqlen * dim;
    v.stride_b = heads * seqlen * dim;
  } else {
    v.stride_h = dim;
    v.stride_n = heads * dim;
    v.stride_b = seqlen * heads * dim;
  }
  return v;
}

TensorView TensorView::packed(void* data, DType dtype, std::int64_t heads, std::int64_t dim) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.stride_h = dim;
  v.stride_n = heads * dim;
  v.stride_b = 0;
  return v;
}

float Problem::softmax_scale() const {
  return scale != 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

std::int64_t Problem::seqlen_q_of(std::int64_t b) const {
  return varlen() ? cu_seqlens_q[b + 1] - cu_seqlens_q[b] : seqlen_q;
}

std::int64_t Problem::seqlen_kv_of(std::int64_t b) const {
  return varlen() ? cu_seqlens_kv[b + 1] - cu_seqlens_kv[b] : seqlen_kv;
}

std::int64_t Problem::visible_keys(std::int64_t b, std::int64_t i) const {
  return mask_policy::row_key_end(i, seqlen_q_of(b), seqlen_kv_of(b), causal);
}

namespace {

void check_cu_seqlens(const std::vector<std::int64_t>& cu, std::int64_t batch, std::int64_t max_len,
                      const char* name) {
  require(static_cast<std::int64_t>(cu.size()) == batch + 1, name, ": expected batch + 1 = ", batch + 1,
          " offsets, got ", cu.size());
  require(cu[0] == 0, name, "[0]: must be 0, got ", cu[0]);
  std::int64_t longest = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = cu[b + 1] - cu[b];
    require(len >= 0, name, ": offsets must be non-decreasing, got ", cu[b], " then ", cu[b + 1]);
    longest = len > longest ? len : longest;
  }
  require(longest == max_len, name, ": the longest sequence has ", longest,
          " tokens but the problem's maximum length is ", max_len);
}

}  // namespace

void Problem::validate() const {
  require(batch >= 1, "batch: must be >= 1, got ", batch);
  require(heads_q >= 1, "heads_q: must be >= 1, got ", heads_q);
  require(heads_kv >= 1, "heads_kv: must be >= 1, got ", heads_kv);
  require(heads_q % heads_kv == 0, "heads_q: must be a multiple of heads_kv (", heads_kv, "), got ", heads_q);
  require(seqlen_q >= 1, "seqlen_q: must be >= 1, got ", seqlen_q);
  require(seqlen_kv >= 1, "seqlen_kv: must be >= 1, got ", seqlen_kv);
  require(head_dim >= kMinHeadDim && head_dim <= kMaxHeadDim, "head_dim: must be in [", kMinHeadDim, ", ",
          kMaxHeadDim, "], got ", head_dim);
  require(head_dim % 8 == 0, "head_dim: must be a multiple of 8, got ", head_dim);
  require(head_dim_v == 0 || (head_dim_v >= kMinHeadDim && head_dim_v <= kMaxHeadDim && head_dim_v % 8 == 0),
          "head_dim_v: must be 0 (= head_dim) or a multiple of 8 in [", kMinHeadDim, ", ", kMaxHeadDim,
          "], got ", head_dim_v);
  require(std::isfinite(scale) && scale >= 0.0f, "scale: must be finite and >= 0 (0 = 1/sqrt(head_dim)), got ",
          scale);
  require(cu_seqlens_q.empty() == cu_seqlens_kv.empty(),
          "cu_seqlens: give both cu_seqlens_q and cu_seqlens_kv or neither (got ", cu_seqlens_q.size(), " and ",
          cu_seqlens_kv.size(), " offsets)");
  if (varlen()) {
    check_cu_seqlens(cu_seqlens_q, batch, seqlen_q, "cu_seqlens_q");
    check_cu_seqlens(cu_seqlens_kv, batch, seqlen_kv, "cu_seqlens_kv");
  }
  if (causal) {
    for (std::int64_t b = 0; b < batch; ++b) {
      require(seqlen_q_of(b) <= seqlen_kv_of(b), "seqlen_q: causal attention needs seqlen_q <= seqlen_kv, got ",
              seqlen_q_of(b), " > ", seqlen_kv_of(b), varlen() ? " (a sequence of the batch)" : "");
    }
  }
}

namespace {

void check_view(const TensorView& t, const char* name, DType dtype, std::int64_t heads, std::int64_t dim) {
  require(t.data != nullptr, name, ": data pointer is null");
  require(t.dtype == dtype || std::string_view(name) == "o", name, ": dtype ", to_string(t.dtype),
          " differs from the problem's ", to_string(dtype));
  require(t.stride_b >= 0 && t.stride_h >= 0 && t.stride_n >= 0, name, ": strides must be >= 0, got (",
          t.stride_b, ", ", t.stride_h, ", ", t.stride_n, ")");
  // Rows of one head must not overlap: each row holds `dim` contiguous elements.
  require(t.stride_n >= dim || t.stride_n == 0, name, ": stride_n (", t.stride_n,
          ") is smaller than the row length ", dim);
  require(heads == 1 || t.stride_h >= dim, name, ": stride_h (", t.stride_h,
          ") is smaller than the row length ", dim);
}

}  // namespace

void Problem::validate(const TensorView& q, const TensorView& k, const TensorView& v,
                       const TensorView& o) const {
  validate();
  check_view(q, "q", dtype, heads_q, head_dim);
  check_view(k, "k", dtype, heads_kv, head_dim);
  check_view(v, "v", dtype, heads_kv, dim_v());
  check_view(o, "o", dtype, heads_q, dim_v());
}

void Problem::validate(const TensorView& q, const TensorView& k) const {
  validate();
  check_view(q, "q", dtype, heads_q, head_dim);
  check_view(k, "k", dtype, heads_kv, head_dim);
}

std::string Problem::describe() const {
  std::ostringstream s;
  s << "B=" << batch << " Hq=" << heads_q << " Hkv=" << heads_kv << " Nq=" << seqlen_q << " Nkv=" << seqlen_kv
    << " D=" << head_dim << " Dv=" << dim_v() << (causal ? " causal" : " non-causal") << " " << to_string(dtype)
    << (varlen() ? " varlen" : "");
  return s.str();
}

}  // namespace spattn
