// The backend's working memory, reused from call to call. A Kokkos View in CUDA or HIP memory costs an allocation and
// a synchronous copy of its header, and its release a cudaFree / hipFree, which waits for the whole device: per call,
// that is tens of allocations in the middle of a pipeline that should only enqueue kernels. Instead every array the
// backend needs (estimators' workspaces, masks, uploaded offsets and parameters) is a View over a cached buffer.
//
// A buffer is free again when no View but the cache's own refers to it (use_count() == 1): the caller dropped every
// copy, e.g. a DeviceEstimate went out of scope. The backend's kernels and copies run in order on the execution space's
// default instance, so the next holder's work is enqueued after every kernel of the previous holder that could still
// read it. Buffers are kept, per value type and memory space, until Kokkos finalizes.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace spattn::kokkos::detail {

template <class T, class Mem>
class WorkspaceCache {
 public:
  using View = Kokkos::View<T*, Mem>;

  static WorkspaceCache& get() {
    static auto* cache = new WorkspaceCache;  // never destroyed: emptied by a finalize hook, before Kokkos' spaces go
    return *cache;
  }

  /// A View of n entries (uninitialised) over the smallest free buffer that holds them, or a new one.
  View take(const char* label, std::size_t n) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!hooked_) {  // once per Kokkos initialisation
      Kokkos::push_finalize_hook([this] {
        const std::lock_guard<std::mutex> hold(mutex_);
        buffers_.clear();
        hooked_ = false;
      });
      hooked_ = true;
    }
    View* best = nullptr;
    for (View& b : buffers_)
      if (b.use_count() == 1 && b.extent(0) >= n && (best == nullptr || b.extent(0) < best->extent(0))) best = &b;
    if (best == nullptr) {
      buffers_.emplace_back(Kokkos::view_alloc(std::string(label), Kokkos::WithoutInitializing), rounded(n));
      best = &buffers_.back();
    }
    return Kokkos::subview(*best, std::make_pair(std::size_t{0}, n));
  }

 private:
  /// n rounded up so that a buffer serves a range of sizes: a power of two up to 4096 entries, then a multiple of an
  /// eighth of the largest power of two below n (at most 12.5 % more).
  static std::size_t rounded(std::size_t n) {
    std::size_t p = 1;
    while (p < n && p < 4096) p <<= 1;
    if (n <= 4096) return p;
    std::size_t top = 4096;
    while (2 * top <= n) top <<= 1;
    const std::size_t step = top / 8;
    return (n + step - 1) / step * step;
  }

  std::mutex mutex_;
  std::vector<View> buffers_;
  bool hooked_ = false;
};

/// n entries of T in Exec's memory from the cache, zero-filled on Exec's default instance unless `zeroed` is false.
template <class Exec, class T>
Kokkos::View<T*, typename Exec::memory_space> workspace(const char* label, std::size_t n, bool zeroed = true) {
  Kokkos::View<T*, typename Exec::memory_space> v = WorkspaceCache<T, typename Exec::memory_space>::get().take(label, n);
  if (zeroed && n > 0) Kokkos::deep_copy(Exec(), v, T{});
  return v;
}

}  // namespace spattn::kokkos::detail
