#include "spattn/tensor.hpp"

#include <cmath>
#include <cstring>
#include <new>

#include "spattn/checked.hpp"
#include "spattn/error.hpp"

namespace spattn {

HostTensor::HostTensor(DType dtype, std::int64_t batch, std::int64_t heads, std::int64_t seqlen,
                       std::int64_t dim, Layout layout)
    : dtype_(dtype), layout_(layout), shape_{batch, heads, seqlen, dim} {
  const std::int64_t bytes = checked_bytes("HostTensor [batch, heads, seqlen, dim]", {batch, heads, seqlen, dim},
                                           static_cast<std::int64_t>(dtype_size(dtype)));
  const TensorView v = TensorView::dense(nullptr, dtype, layout, batch, heads, seqlen, dim);
  strides_[0] = v.stride_b;
  strides_[1] = v.stride_h;
  strides_[2] = v.stride_n;
  try {
    bytes_.assign(static_cast<std::size_t>(bytes), 0);
  } catch (const std::bad_alloc&) {
    fail("HostTensor [", batch, ", ", heads, ", ", seqlen, ", ", dim, "]: out of memory allocating ", bytes, " bytes");
  }
}

TensorView HostTensor::view() const {
  TensorView v;
  v.data = const_cast<std::uint8_t*>(bytes_.data());
  v.dtype = dtype_;
  v.stride_b = strides_[0];
  v.stride_h = strides_[1];
  v.stride_n = strides_[2];
  return v;
}

std::int64_t HostTensor::offset(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t d) const {
  return b * strides_[0] + h * strides_[1] + n * strides_[2] + d;
}

float HostTensor::get(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t d) const {
  const std::size_t at = static_cast<std::size_t>(offset(b, h, n, d)) * dtype_size(dtype_);
  if (dtype_ == DType::f32) {
    float x;
    std::memcpy(&x, bytes_.data() + at, 4);
    return x;
  }
  std::uint16_t bits;
  std::memcpy(&bits, bytes_.data() + at, 2);
  return dtype_ == DType::f16 ? f16_bits_to_f32(bits) : bf16_bits_to_f32(bits);
}

void HostTensor::set(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t d, float x) {
  const std::size_t at = static_cast<std::size_t>(offset(b, h, n, d)) * dtype_size(dtype_);
  if (dtype_ == DType::f32) {
    std::memcpy(bytes_.data() + at, &x, 4);
    return;
  }
  const std::uint16_t bits = dtype_ == DType::f16 ? f32_to_f16_bits(x) : f32_to_bf16_bits(x);
  std::memcpy(bytes_.data() + at, &bits, 2);
}

void HostTensor::poison() {
  // 0x7fa5 / 0x7fa5a5a5: NaN patterns with a recognisable payload in every dtype.
  for (std::size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = (i % 2 == 0) ? 0xa5 : 0x7f;
  if (dtype_ == DType::f32) {
    const std::uint32_t pattern = 0x7fa5a5a5u;
    for (std::size_t i = 0; i + 4 <= bytes_.size(); i += 4) std::memcpy(bytes_.data() + i, &pattern, 4);
  }
}

std::vector<float> HostTensor::to_float() const {
  std::vector<float> out(static_cast<std::size_t>(numel()));
  std::size_t i = 0;
  for (std::int64_t b = 0; b < shape_[0]; ++b)
    for (std::int64_t h = 0; h < shape_[1]; ++h)
      for (std::int64_t n = 0; n < shape_[2]; ++n)
        for (std::int64_t d = 0; d < shape_[3]; ++d) out[i++] = get(b, h, n, d);
  return out;
}

bool HostTensor::all_finite() const {
  for (float x : to_float())
    if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace spattn
