// What the Kokkos kernels take instead of the host structs (Problem, TensorView, TileMask hold std::vectors):
// plain values and pointers into the execution space's memory, copied into every kernel by value.
#pragma once

#include <Kokkos_Core.hpp>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "spattn/numerics.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/problem.hpp"
#include "workspace.hpp"

namespace spattn::kokkos {

/// Four floats moved as one 16-byte load or store (shared memory and aligned fp32 rows): what the executor's register
/// blocks read per instruction.
struct alignas(16) Float4 {
  float v[4];
};
/// Four 16-bit elements (fp16 / bf16 bits) moved as one 8-byte load or store.
struct alignas(8) Bits4 {
  std::uint16_t v[4];
};

/// A TensorView's pointer, dtype and strides (elements), readable and writable inside a kernel.
struct DeviceTensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t stride_b = 0, stride_h = 0, stride_n = 0;

  static DeviceTensor of(const TensorView& t) { return {t.data, t.dtype, t.stride_b, t.stride_h, t.stride_n}; }
  /// Element i as fp32 (exact for every dtype).
  KOKKOS_INLINE_FUNCTION float load(std::int64_t i) const {
    switch (dtype) {
      case DType::f16: return f16_bits_to_f32(static_cast<const std::uint16_t*>(data)[i]);
      case DType::bf16: return bf16_bits_to_f32(static_cast<const std::uint16_t*>(data)[i]);
      default: return static_cast<const float*>(data)[i];
    }
  }
  /// Stores x at element i, rounded (RNE) to the dtype.
  KOKKOS_INLINE_FUNCTION void store(std::int64_t i, float x) const {
    switch (dtype) {
      case DType::f16: static_cast<std::uint16_t*>(data)[i] = f32_to_f16_bits(x); return;
      case DType::bf16: static_cast<std::uint16_t*>(data)[i] = f32_to_bf16_bits(x); return;
      default: static_cast<float*>(data)[i] = x;
    }
  }
  /// Elements i … i + n − 1 (n ≤ 4) as fp32, the rest 0: one 8- or 16-byte load where the four are aligned.
  KOKKOS_INLINE_FUNCTION Float4 load4(std::int64_t i, int n) const {
    Float4 x{{0.0f, 0.0f, 0.0f, 0.0f}};
    if (dtype == DType::f32) {
      const float* p = static_cast<const float*>(data) + i;
      if (n == 4 && (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0) return *reinterpret_cast<const Float4*>(p);
    } else {
      const std::uint16_t* p = static_cast<const std::uint16_t*>(data) + i;
      if (n == 4 && (reinterpret_cast<std::uintptr_t>(p) & 7u) == 0) {
        const Bits4 bits = *reinterpret_cast<const Bits4*>(p);
        for (int e = 0; e < 4; ++e)
          x.v[e] = dtype == DType::bf16 ? bf16_bits_to_f32(bits.v[e]) : f16_bits_to_f32(bits.v[e]);
        return x;
      }
    }
    for (int e = 0; e < n; ++e) x.v[e] = load(i + e);
    return x;
  }
  /// Stores the four values at elements i … i + 3, rounded (RNE) to the dtype: one store where they are aligned.
  KOKKOS_INLINE_FUNCTION void store4(std::int64_t i, const Float4& x) const {
    if (dtype == DType::f32) {
      float* p = static_cast<float*>(data) + i;
      if ((reinterpret_cast<std::uintptr_t>(p) & 15u) == 0) {
        *reinterpret_cast<Float4*>(p) = x;
        return;
      }
    } else {
      std::uint16_t* p = static_cast<std::uint16_t*>(data) + i;
      if ((reinterpret_cast<std::uintptr_t>(p) & 7u) == 0) {
        Bits4 bits;
        for (int e = 0; e < 4; ++e) bits.v[e] = dtype == DType::bf16 ? f32_to_bf16_bits(x.v[e]) : f32_to_f16_bits(x.v[e]);
        *reinterpret_cast<Bits4*>(p) = bits;
        return;
      }
    }
    for (int e = 0; e < 4; ++e) store(i + e, x.v[e]);
  }
};

/// The Problem's shape; cu_q / cu_kv point into the execution space's memory (null: fixed lengths).
struct DeviceShape {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 0, seqlen_kv = 0, d = 0, dv = 0;
  bool causal = false;
  float scale_log2 = 0.0f;
  const std::int64_t* cu_q = nullptr;
  const std::int64_t* cu_kv = nullptr;

  KOKKOS_INLINE_FUNCTION std::int64_t nq(std::int64_t b) const { return cu_q ? cu_q[b + 1] - cu_q[b] : seqlen_q; }
  KOKKOS_INLINE_FUNCTION std::int64_t nkv(std::int64_t b) const { return cu_kv ? cu_kv[b + 1] - cu_kv[b] : seqlen_kv; }
  KOKKOS_INLINE_FUNCTION std::int64_t group() const { return heads_q / heads_kv; }
  /// Element offset of row n of head h of sequence b (the reference's row_offset, spattn/tensor_rows.hpp).
  KOKKOS_INLINE_FUNCTION std::int64_t row(const DeviceTensor& t, bool is_q, std::int64_t b, std::int64_t h,
                                          std::int64_t n) const {
    const std::int64_t base = cu_q ? 0 : b * t.stride_b;
    const std::int64_t first = cu_q ? (is_q ? cu_q[b] : cu_kv[b]) : 0;
    return base + h * t.stride_h + (first + n) * t.stride_n;
  }
};

/// An execution space's copy of a host array (the mask's CSR arrays, cu_seqlens, per-head parameters), in the
/// backend's workspace (workspace.hpp), copied on Exec's default instance after the work enqueued before (a GPU copies
/// pageable memory through a staging buffer before the call returns: `data` may go as soon as it does).
template <class Exec, class T>
Kokkos::View<T*, typename Exec::memory_space> to_space(const char* label, const T* data, std::size_t n) {
  Kokkos::View<T*, typename Exec::memory_space> out = detail::workspace<Exec, T>(label, n, false);
  Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(data, n);
  if (n > 0) Kokkos::deep_copy(Exec(), out, host);
  return out;
}

/// The host's copy of an execution space's array (the estimators' bitmaps, margins, counts), after the kernels that
/// write it.
template <class T, class... P>
std::vector<T> to_host(const Kokkos::View<T*, P...>& view) {
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
  return std::vector<T>(host.data(), host.data() + host.size());
}

/// The totals of per-row (candidates, selected) pairs counted in an execution space: {Σ candidates, Σ selected}.
template <class... P>
std::array<std::int64_t, 2> count_totals(const Kokkos::View<std::int64_t*, P...>& counts) {
  const std::vector<std::int64_t> pairs = to_host(counts);
  std::array<std::int64_t, 2> total{0, 0};
  for (std::size_t r = 0; r + 1 < pairs.size(); r += 2) total[0] += pairs[r], total[1] += pairs[r + 1];
  return total;
}

/// The problem in an execution space: its sequence offsets copied there (they must outlive the kernels that read
/// them) and the DeviceShape over them — what every kernel of the backend starts from.
template <class Exec>
struct ProblemOn {
  Kokkos::View<std::int64_t*, typename Exec::memory_space> cu_q, cu_kv;
  DeviceShape shape;
  explicit ProblemOn(const Problem& p)
      : cu_q(to_space<Exec>("spattn::cu_q", p.cu_seqlens_q.data(), p.cu_seqlens_q.size())),
        cu_kv(to_space<Exec>("spattn::cu_kv", p.cu_seqlens_kv.data(), p.cu_seqlens_kv.size())),
        shape{p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_kv, p.head_dim, p.dim_v(), p.causal,
              scale_log2(p.softmax_scale()), p.varlen() ? cu_q.data() : nullptr, p.varlen() ? cu_kv.data() : nullptr} {}
};

/// Team size of the kernels: one thread on a host space (Serial), 128 on a GPU.
template <class Exec>
constexpr int team_size() {
  return Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible ? 1 : 128;
}

/// Calls f(exec) with the execution space that runs on `memory` (CUDA memory: Kokkos::Cuda; HIP memory: Kokkos::HIP;
/// host memory: the default host space). The caller checked that this build serves `memory` (run.hpp: serves()).
template <class F>
auto on_space(Memory memory, F f) {
#if defined(KOKKOS_ENABLE_CUDA)
  if (memory == Memory::cuda) return f(Kokkos::Cuda());
#endif
#if defined(KOKKOS_ENABLE_HIP)
  if (memory == Memory::hip) return f(Kokkos::HIP());
#endif
  (void)memory;
  return f(Kokkos::DefaultHostExecutionSpace());
}

/// Team scratch level for `bytes` per team: 0 (on chip on a GPU) where it fits, else 1 (global memory).
template <class Exec>
int scratch_level(std::size_t bytes) {
  return bytes <= static_cast<std::size_t>(Kokkos::TeamPolicy<Exec>::scratch_size_max(0)) ? 0 : 1;
}

}  // namespace spattn::kokkos
