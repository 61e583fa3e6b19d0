// HostTensor: an owning, dense [B, H, N, dim] array of fp32/fp16/bf16 on the host — what the program, the
// workloads, the tests and the benchmarks hand to the library as TensorViews.
#pragma once

#include <cstdint>
#include <vector>

#include "spattn/numerics.hpp"
#include "spattn/problem.hpp"

namespace spattn {

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::int64_t batch, std::int64_t heads, std::int64_t seqlen, std::int64_t dim,
             Layout layout = Layout::bhnd);

  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  std::int64_t batch() const { return shape_[0]; }
  std::int64_t heads() const { return shape_[1]; }
  std::int64_t seqlen() const { return shape_[2]; }
  std::int64_t dim() const { return shape_[3]; }
  std::int64_t numel() const { return shape_[0] * shape_[1] * shape_[2] * shape_[3]; }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  std::size_t size_bytes() const { return bytes_.size(); }

  TensorView view() const;

  std::int64_t offset(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t d) const;
  float get(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t d) const;
  /// Stores x rounded (RNE) to the tensor's dtype.
  void set(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t d, float x);
  /// Fills every element with a bit pattern no kernel produces (a signalling-NaN-like pattern), so a test
  /// can tell which elements a kernel wrote.
  void poison();
  /// All values as fp32 in [B, H, N, dim] order.
  std::vector<float> to_float() const;
  bool all_finite() const;

 private:
  DType dtype_ = DType::f32;
  Layout layout_ = Layout::bhnd;
  std::int64_t shape_[4] = {0, 0, 0, 0};
  std::int64_t strides_[3] = {0, 0, 0};  ///< of view(): b, h, n (computed once, with the checked extents)
  std::vector<std::uint8_t> bytes_;
};

}  // namespace spattn
