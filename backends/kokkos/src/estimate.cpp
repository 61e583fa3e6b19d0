// The estimators' entry points (sparge.hpp, bfla.hpp) on the execution space of the tensors' memory.
#include "bfla.hpp"
#include "fg_attn.hpp"
#include "run.hpp"
#include "sparge.hpp"

namespace spattn::kokkos {

TileMask run_sparge(const Problem& p, const TensorView& q, const TensorView& k, const sparge::Config& c) {
  return on_space(q.memory, [&](auto exec) { return sparge_estimate_on<decltype(exec)>(p, q, k, c); });
}

TileMask run_fg_attn(const Problem& p, const TensorView& q, const TensorView& k, const fg_attn::Config& c) {
  return on_space(q.memory, [&](auto exec) { return fg_attn_estimate_on<decltype(exec)>(p, q, k, c); });
}

TileMask run_bfla(const Problem& p, const TensorView& q, const TensorView& k, const bfla::Config& c,
                  std::vector<std::vector<float>>* scores) {
  return on_space(q.memory, [&](auto exec) { return bfla_estimate_on<decltype(exec)>(p, q, k, c, scores); });
}

}  // namespace spattn::kokkos
