// The executor's entry points (executor.hpp) on the execution space of the tensors' memory.
#include "executor.hpp"
#include "run.hpp"

namespace spattn::kokkos {

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
