// Problem: the shape of one attention call, and TensorView: where its tensors live.
//
// Conventions (one for the whole library):
// - Q is [B, Hq, Nq, D], K is [B, Hkv, Nkv, D], V is [B, Hkv, Nkv, Dv], O is [B, Hq, Nq, Dv], addressed
//   through element strides, so [B,H,N,D] and [B,N,H,D] are both views; the last dimension is contiguous.
// - Hq is a multiple of Hkv (MHA, GQA, MQA); query head h reads KV head h / (Hq / Hkv).
// - Causal attention is aligned bottom-right: query row i sees keys j <= i + (Nkv - Nq), and needs
//   Nq <= Nkv. Non-causal attention accepts any Nq, Nkv (cross-attention).
// - Variable-length batches: cu_seqlens_q / cu_seqlens_kv (B+1 ascending offsets starting at 0) give each
//   sequence's rows in a packed tensor; seqlen_q / seqlen_kv are then the maxima, and the batch stride of
//   the views is ignored (row n of sequence b is row cu_seqlens[b] + n).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spattn {

enum class DType : std::uint8_t { f32, f16, bf16 };

std::string_view to_string(DType dtype);
/// Parses "f32"/"fp32"/"float32", "f16"/"fp16"/"float16", "bf16"/"bfloat16"; throws spattn::Error.
DType parse_dtype(std::string_view name);
inline std::size_t dtype_size(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

enum class Layout : std::uint8_t { bhnd, bnhd };

/// Where a view's memory lives; backends declare which spaces they read. cuda: NVIDIA device memory (cudaMalloc);
/// hip: AMD device memory (hipMalloc).
enum class Memory : std::uint8_t { host, cuda, hip };
/// "host", "CUDA" or "HIP", for messages.
std::string_view to_string(Memory memory);

/// A strided 4-d view [B, H, N, Dim] over memory the caller owns; strides are in elements.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t stride_b = 0, stride_h = 0, stride_n = 0;
  Memory memory = Memory::host;

  /// Dense view of a [B, H, N, dim] (Layout::bhnd) or [B, N, H, dim] (Layout::bnhd) array; throws spattn::Error
  /// when the extents are negative or their product overflows.
  static TensorView dense(void* data, DType dtype, Layout layout, std::int64_t batch, std::int64_t heads,
                          std::int64_t seqlen, std::int64_t dim);
  /// Packed variable-length view [total_tokens, H, dim].
  static TensorView packed(void* data, DType dtype, std::int64_t heads, std::int64_t dim);
  /// Head h alone, as a single-head view (same strides; per-head calibration and slicing).
  TensorView head(std::int64_t h) const {
    TensorView v = *this;
    v.data = static_cast<char*>(data) + h * stride_h * static_cast<std::int64_t>(dtype_size(dtype));
    return v;
  }
};

/// Ranges (validate() checks them): every extent >= 1; head dims multiples of 8 in [32, 256]; each tensor the
/// problem describes — q, k, v, o, counted in fp32 — at most kMaxAllocationBytes (spattn/checked.hpp).
struct Problem {
  std::int64_t batch = 1;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;
  std::int64_t seqlen_q = 0;
  std::int64_t seqlen_kv = 0;
  std::int64_t head_dim = 0;
  std::optional<std::int64_t> head_dim_v;  ///< V's head dimension; unset: head_dim
  bool causal = false;
  std::optional<float> scale;  ///< softmax scale in [0, kMaxScale]; unset: 1/sqrt(head_dim)
  DType dtype = DType::f32;
  std::vector<std::int64_t> cu_seqlens_q;   ///< empty, or B+1 offsets (variable-length batch)
  std::vector<std::int64_t> cu_seqlens_kv;  ///< empty, or B+1 offsets (variable-length batch)

  static constexpr float kMaxScale = 0x1p64f;  ///< scale in [0, 2^64]: scale·log2 e stays far inside fp32
  static constexpr std::int64_t kMinHeadDim = 32;
  static constexpr std::int64_t kMaxHeadDim = 256;

  std::int64_t dim_v() const { return head_dim_v.value_or(head_dim); }
  float softmax_scale() const;
  bool varlen() const { return !cu_seqlens_q.empty(); }
  std::int64_t group_size() const { return heads_q / heads_kv; }
  std::int64_t kv_head_of(std::int64_t hq) const { return hq / group_size(); }
  std::int64_t seqlen_q_of(std::int64_t b) const;
  std::int64_t seqlen_kv_of(std::int64_t b) const;
  std::int64_t row_offset_q(std::int64_t b) const { return varlen() ? cu_seqlens_q[b] : 0; }
  std::int64_t row_offset_kv(std::int64_t b) const { return varlen() ? cu_seqlens_kv[b] : 0; }
  /// Causal diagonal offset of sequence b: row i sees keys j <= i + causal_offset(b).
  std::int64_t causal_offset(std::int64_t b) const { return seqlen_kv_of(b) - seqlen_q_of(b); }
  /// Number of keys query row i of sequence b attends to before any sparsity (causal rule, bounds).
  std::int64_t visible_keys(std::int64_t b, std::int64_t i) const;

  /// Throws spattn::Error naming the first inconsistent argument and its value.
  void validate() const;
  /// validate() plus the views: dtypes, strides (non-negative, rows of one head not overlapping, every element's
  /// offset within 64 bits).
  void validate(const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o) const;
  /// validate() plus the q and k views (what an estimator reads).
  void validate(const TensorView& q, const TensorView& k) const;

  std::string describe() const;
};

}  // namespace spattn
