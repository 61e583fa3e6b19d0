// SpargeAttn tuned parameters: their Config and PV-skip thresholds (JSON files: io/).
#include <cmath>

#include "spattn/error.hpp"
#include "spattn/methods/sparge.hpp"

namespace spattn::sparge {

Config Params::config() const {
  Config c;
  c.block_q = block_q;
  c.block_k = block_k;
  c.theta.clear();
  c.tau.clear();
  for (const HeadParams& h : heads) {
    c.theta.push_back(h.theta);
    c.tau.push_back(h.tau);
    c.dense_heads.push_back(h.dense ? 1 : 0);
  }
  c.topk = 0.0f;  // the tuner searches τ (TopCdf)
  c.pv_threshold = pv_thresholds();
  return c;
}

std::vector<float> Params::pv_thresholds() const {
  std::vector<float> t;
  for (const HeadParams& h : heads) t.push_back(h.dense ? INFINITY : h.pv_threshold);
  return t;
}

}  // namespace spattn::sparge
