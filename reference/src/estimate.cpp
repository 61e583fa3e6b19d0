// The reference backend's estimators: every method, through the method's reference estimator.
#include <variant>

#include "spattn/reference/anchor_attn.hpp"
#include "spattn/reference/bfla.hpp"
#include "spattn/reference/executor.hpp"
#include "spattn/reference/fg_attn.hpp"
#include "spattn/reference/sale.hpp"
#include "spattn/reference/sparge.hpp"

namespace spattn::reference {
Estimate ReferenceBackend::estimate(const MethodConfig& config, const Problem& p, const TensorView& q, const TensorView& k,
                                    const EstimateOptions&) const {
  Estimate e;
  e.method = std::string(method_name(config));
  e.backend = std::string(name());
  std::visit(Overload{[&](const DenseConfig& c) { e.mask = TileMask::dense(MaskShape::of(p, c.tile_q, c.tile_k)); },
                      [&](const sparge::Config& c) { e.mask = sparge_estimate(p, q, k, c).mask; },
                      [&](const sale::Config& c) {
                        SaleEstimate s = sale_estimate(p, q, k, c);
                        e.mask = std::move(s.mask);
                        e.margins = std::move(s.margins);
                        e.anchor_state = std::move(s.sink_local);
                        e.candidates = s.candidates;
                        e.selected = s.selected;
                      },
                      [&](const anchor_attn::Config& c) {
                        AnchorEstimate a = anchor_attn_estimate(p, q, k, c);
                        e.mask = std::move(a.mask);
                        e.anchor_state = std::move(a.anchors);
                        e.candidates = a.candidates;
                        e.selected = a.selected;
                      },
                      [&](const fg_attn::Config& c) {
                        e.mask = fg_attn_estimate(p, q, k, c);
                        if (c.semantics == fg_attn::Semantics::union_keys)
                          e.mask = fg_attn::effective_mask(e.mask, fg_attn::merge_plan(e.mask, c), c.semantics);
                      },
                      [&](const bfla::Config& c) { e.mask = bfla_estimate(p, q, k, c); }},
             config);
  return e;
}

}  // namespace spattn::reference
