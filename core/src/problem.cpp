#include "spattn/problem.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "spattn/checked.hpp"
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

std::string_view to_string(Memory memory) {
  switch (memory) {
    case Memory::host: return "host";
    case Memory::cuda: return "CUDA";
    case Memory::hip: return "HIP";
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
  checked_product("TensorView::dense [batch, heads, seqlen, dim]", {batch, heads, seqlen, dim});
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
  checked_product("TensorView::packed [heads, dim]", {heads, dim});
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.stride_h = dim;
  v.stride_n = heads * dim;
  v.stride_b = 0;
  return v;
}

float Problem::softmax_scale() const {
  return scale ? *scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
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
    // Compared before subtracting: offsets come from the caller and may be anything.
    require(cu[b] <= cu[b + 1], name, ": offsets must be non-decreasing, got ", cu[b], " then ", cu[b + 1]);
    longest = std::max(longest, cu[b + 1] - cu[b]);
  }
  require(longest == max_len, name, ": the longest sequence has ", longest,
          " tokens but the problem's maximum length is ", max_len);
}

}  // namespace

void Problem::validate() const {
  constexpr std::int64_t kMax = std::int64_t{1} << 62;  // extents beyond are caught here, before any product
  require_in("batch", batch, Interval<std::int64_t>{1, kMax});
  require_in("heads_q", heads_q, Interval<std::int64_t>{1, kMax});
  require_in("heads_kv", heads_kv, Interval<std::int64_t>{1, kMax});
  require(heads_q % heads_kv == 0, "heads_q: must be a multiple of heads_kv (", heads_kv, "), got ", heads_q);
  require_in("seqlen_q", seqlen_q, Interval<std::int64_t>{1, kMax});
  require_in("seqlen_kv", seqlen_kv, Interval<std::int64_t>{1, kMax});
  require_in("head_dim", head_dim, Interval<std::int64_t>{kMinHeadDim, kMaxHeadDim});
  require(head_dim % 8 == 0, "head_dim: must be a multiple of 8, got ", head_dim);
  if (head_dim_v) {
    require_in("head_dim_v", *head_dim_v, Interval<std::int64_t>{kMinHeadDim, kMaxHeadDim});
    require(*head_dim_v % 8 == 0, "head_dim_v: must be a multiple of 8, got ", *head_dim_v);
  }
  // Every score is multiplied by scale·log2 e: near FLT_MAX that product is inf, and 0·inf a NaN (found by fuzz_api).
  if (scale) require_in("scale", *scale, Interval<float>{0.0f, kMaxScale});
  // Every tensor must be addressable and allocatable before anything indexes or allocates by these extents.
  checked_bytes("q [batch, heads_q, seqlen_q, head_dim]", {batch, heads_q, seqlen_q, head_dim}, 4);
  checked_bytes("k [batch, heads_kv, seqlen_kv, head_dim]", {batch, heads_kv, seqlen_kv, head_dim}, 4);
  checked_bytes("v [batch, heads_kv, seqlen_kv, head_dim_v]", {batch, heads_kv, seqlen_kv, dim_v()}, 4);
  checked_bytes("o [batch, heads_q, seqlen_q, head_dim_v]", {batch, heads_q, seqlen_q, dim_v()}, 4);
  require(cu_seqlens_q.empty() == cu_seqlens_kv.empty(),
          "cu_seqlens: give both cu_seqlens_q and cu_seqlens_kv or neither (got ", cu_seqlens_q.size(), " and ",
          cu_seqlens_kv.size(), " offsets)");
  if (varlen()) {
    check_cu_seqlens(cu_seqlens_q, batch, seqlen_q, "cu_seqlens_q");
    check_cu_seqlens(cu_seqlens_kv, batch, seqlen_kv, "cu_seqlens_kv");
  }
  if (!causal) return;
  // One check for a uniform batch: a loop over its entries would take as long as the batch is large.
  for (std::int64_t b = 0; b < (varlen() ? batch : 1); ++b)
    require(seqlen_q_of(b) <= seqlen_kv_of(b), "seqlen_q: causal attention needs seqlen_q <= seqlen_kv, got ",
            seqlen_q_of(b), " > ", seqlen_kv_of(b), varlen() ? " (a sequence of the batch)" : "");
}

namespace {

/// `rows`: the rows of one (batch, head) the view addresses (a packed variable-length view: all of them).
void check_view(const TensorView& t, const char* name, DType dtype, std::int64_t batch, std::int64_t heads,
                std::int64_t rows, std::int64_t dim) {
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
  // Every element's offset b·stride_b + h·stride_h + n·stride_n + d must be computable.
  const std::string what = std::string(name) + ": the offset of the last element";
  checked_sum(what, {checked_product(what, {batch - 1, t.stride_b}), checked_product(what, {heads - 1, t.stride_h}),
                     checked_product(what, {std::max<std::int64_t>(rows - 1, 0), t.stride_n}), dim});
}

/// The rows of one (batch, head) a view addresses: all packed rows of a variable-length batch.
std::int64_t view_rows(const std::vector<std::int64_t>& cu_seqlens, std::int64_t seqlen) {
  return cu_seqlens.empty() ? seqlen : cu_seqlens.back();
}

}  // namespace

void Problem::validate(const TensorView& q, const TensorView& k, const TensorView& v,
                       const TensorView& o) const {
  validate(q, k);
  check_view(v, "v", dtype, batch, heads_kv, view_rows(cu_seqlens_kv, seqlen_kv), dim_v());
  check_view(o, "o", dtype, batch, heads_q, view_rows(cu_seqlens_q, seqlen_q), dim_v());
}

void Problem::validate(const TensorView& q, const TensorView& k) const {
  validate();
  check_view(q, "q", dtype, batch, heads_q, view_rows(cu_seqlens_q, seqlen_q), head_dim);
  check_view(k, "k", dtype, batch, heads_kv, view_rows(cu_seqlens_kv, seqlen_kv), head_dim);
}

std::string Problem::describe() const {
  std::ostringstream s;
  s << "B=" << batch << " Hq=" << heads_q << " Hkv=" << heads_kv << " Nq=" << seqlen_q << " Nkv=" << seqlen_kv
    << " D=" << head_dim << " Dv=" << dim_v() << (causal ? " causal" : " non-causal") << " " << to_string(dtype)
    << (varlen() ? " varlen" : "");
  return s.str();
}

}  // namespace spattn
