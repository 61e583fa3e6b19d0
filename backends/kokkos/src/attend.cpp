// The executor's entry points (executor.hpp) on the execution space of the tensors' memory.
#include "executor.hpp"
#include "run.hpp"

namespace spattn::kokkos {

namespace {

/// DeviceEstimate::Data over a mask uploaded as it is (upload_mask).
template <class Exec>
struct Uploaded final : DeviceEstimate::Data {
  TileMask host;
  Kokkos::View<std::int64_t*, typename Exec::memory_space> row_ptr_view;
  Kokkos::View<std::int32_t*, typename Exec::memory_space> tiles_view;
  Estimate download() const override {
    Estimate out;
    out.method = method;
    out.backend = "kokkos";
    out.mask = host;
    return out;
  }
};

}  // namespace

std::shared_ptr<const DeviceEstimate::Data> upload_mask(const TileMask& mask, Memory memory) {
  return on_space(memory, [&](auto exec) -> std::shared_ptr<const DeviceEstimate::Data> {
    using Exec = decltype(exec);
    auto held = std::make_shared<Uploaded<Exec>>();
    held->host = mask;
    held->row_ptr_view = to_space<Exec>("spattn::row_ptr", mask.row_ptr.data(), mask.row_ptr.size());
    held->tiles_view = to_space<Exec>("spattn::tiles", mask.tiles.data(), mask.tiles.size());
    held->shape = mask.shape;
    held->memory = memory;
    held->method = "uploaded";
    held->row_ptr = held->row_ptr_view.data();
    held->tiles = held->tiles_view.data();
    return held;
  });
}

AttendStats run_attend(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                       const TileMask& mask, const TensorView& o, const AttendOptions& options) {
  return on_space(q.memory, [&](auto exec) { return attend_on<decltype(exec)>(p, q, k, v, mask, o, options); });
}

AttendStats run_attend(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                       const MaskShape& mask, const std::int64_t* row_ptr, const std::int32_t* tiles,
                       const TensorView& o, const AttendOptions& options) {
  return on_space(q.memory,
                  [&](auto exec) { return attend_on<decltype(exec)>(p, q, k, v, mask, row_ptr, tiles, o, options); });
}

}  // namespace spattn::kokkos
