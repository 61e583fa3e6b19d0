// The estimators' entry points (sparge.hpp, bfla.hpp) on the execution space of the tensors' memory.
#include "anchor_attn.hpp"
#include "bfla.hpp"
#include "fg_attn.hpp"
#include "sale.hpp"
#include "run.hpp"
#include "sparge.hpp"

namespace spattn::kokkos {

TileMask run_sparge(const Problem& p, const TensorView& q, const TensorView& k, const sparge::Config& c) {
  return on_space(q.memory, [&](auto exec) { return sparge_estimate_on<decltype(exec)>(p, q, k, c); });
}

TileMask run_fg_attn(const Problem& p, const TensorView& q, const TensorView& k, const fg_attn::Config& c) {
  return on_space(q.memory, [&](auto exec) { return fg_attn_estimate_on<decltype(exec)>(p, q, k, c); });
}

TileMask run_anchor_attn(const Problem& p, const TensorView& q, const TensorView& k, const anchor_attn::Config& c,
                         std::vector<AnchorStats>& anchors, std::int64_t counts[2]) {
  AnchorResult r = on_space(q.memory, [&](auto exec) { return anchor_attn_estimate_on<decltype(exec)>(p, q, k, c); });
  anchors = std::move(r.anchors);
  counts[0] = r.candidates;
  counts[1] = r.selected;
  return std::move(r.mask);
}

TileMask run_sale(const Problem& p, const TensorView& q, const TensorView& k, const sale::Config& c,
                  std::vector<float>& margins, std::vector<SoftmaxState>& sink_local, std::int64_t counts[2]) {
  SaleResult r = on_space(q.memory, [&](auto exec) { return sale_estimate_on<decltype(exec)>(p, q, k, c); });
  margins = std::move(r.margins);
  sink_local = std::move(r.sink_local);
  counts[0] = r.candidates;
  counts[1] = r.selected;
  return std::move(r.mask);
}

TileMask run_bfla(const Problem& p, const TensorView& q, const TensorView& k, const bfla::Config& c,
                  std::vector<std::vector<float>>* scores) {
  return on_space(q.memory, [&](auto exec) { return bfla_estimate_on<decltype(exec)>(p, q, k, c, scores); });
}

}  // namespace spattn::kokkos
