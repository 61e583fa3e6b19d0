// The estimators' entry points on the execution space of the tensors' memory: each method's estimate as
// EstimateViews (device_estimate.hpp), downloaded for estimate(), held by a DeviceEstimate, or handed to the executor
// where it lies for sparse_attention().
#include <variant>

#include "anchor_attn.hpp"
#include "bfla.hpp"
#include "fg_attn.hpp"
#include "run.hpp"
#include "sale.hpp"
#include "sparge.hpp"

namespace spattn::kokkos {
namespace {

/// The method's estimate in Exec's memory (DenseConfig: the dense mask, uploaded; FG-Attn: its semantics applied there).
template <class Exec>
EstimateViews<Exec> estimate_on(const MethodConfig& config, const Problem& p, const TensorView& q, const TensorView& k) {
  return std::visit(
      Overload{[&](const DenseConfig& c) {
                 const TileMask dense = TileMask::dense(MaskShape::of(p, c.tile_q, c.tile_k));
                 EstimateViews<Exec> e{};
                 e.shape = dense.shape;
                 e.row_ptr = to_space<Exec>("spattn::row_ptr", dense.row_ptr.data(), dense.row_ptr.size());
                 e.tiles = to_space<Exec>("spattn::tiles", dense.tiles.data(), dense.tiles.size());
                 return e;
               },
               [&](const sparge::Config& c) { return sparge_estimate_on<Exec>(p, q, k, c); },
               [&](const bfla::Config& c) { return bfla_estimate_on<Exec>(p, q, k, c, nullptr); },
               [&](const fg_attn::Config& c) { return fg_attn_estimate_on<Exec>(p, q, k, c); },
               [&](const anchor_attn::Config& c) { return anchor_attn_estimate_on<Exec>(p, q, k, c); },
               [&](const sale::Config& c) { return sale_estimate_on<Exec>(p, q, k, c); }},
      config);
}

/// DeviceEstimate::Data over an EstimateViews<Exec>.
template <class Exec>
struct Held final : DeviceEstimate::Data {
  EstimateViews<Exec> e{};
  Estimate download() const override {
    Estimate out = kokkos::download(e);
    out.method = method;
    out.backend = "kokkos";
    return out;
  }
};

}  // namespace

std::shared_ptr<const DeviceEstimate::Data> run_estimate_on_device(const MethodConfig& config, const Problem& p,
                                                                  const TensorView& q, const TensorView& k) {
  return on_space(q.memory, [&](auto exec) -> std::shared_ptr<const DeviceEstimate::Data> {
    using Exec = decltype(exec);
    auto held = std::make_shared<Held<Exec>>();
    held->e = estimate_on<Exec>(config, p, q, k);
    held->shape = held->e.shape;
    held->memory = q.memory;
    held->method = std::string(method_name(config));
    held->row_ptr = held->e.row_ptr.data();
    held->tiles = held->e.tiles.data();
    return held;
  });
}

Estimate run_estimate(const MethodConfig& config, const Problem& p, const TensorView& q, const TensorView& k) {
  return on_space(q.memory, [&](auto exec) { return download(estimate_on<decltype(exec)>(config, p, q, k)); });
}

SparseAttentionResult run_sparse_attention(const MethodConfig& config, const Problem& p, const TensorView& q,
                                           const TensorView& k, const TensorView& v, const TensorView& o,
                                           const AttendOptions& options) {
  const std::shared_ptr<const DeviceEstimate::Data> device = run_estimate_on_device(config, p, q, k);
  SparseAttentionResult r;
  r.attend = run_attend(p, q, k, v, device->shape, device->row_ptr, device->tiles, o, options);
  r.estimate = device->download();
  return r;
}

TileMask run_bfla_with_scores(const Problem& p, const TensorView& q, const TensorView& k, const bfla::Config& c,
                              std::vector<std::vector<float>>& scores) {
  return on_space(q.memory, [&](auto exec) { return download_mask(bfla_estimate_on<decltype(exec)>(p, q, k, c, &scores)); });
}

}  // namespace spattn::kokkos
