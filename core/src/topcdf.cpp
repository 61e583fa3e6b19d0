#include "spattn/topcdf.hpp"

#include <algorithm>
#include <cmath>

#include "spattn/error.hpp"

namespace spattn {

int top_cdf(const float* p, const std::uint8_t* valid, int n, const TopCdfParams& params, std::uint8_t* keep,
            std::vector<int>& order) {
  require(n >= 0 && n <= kTopCdfMaxEntries, "top_cdf: n must be in [0, ", kTopCdfMaxEntries, "], got ", n);
  require(params.min_keep >= 0, "top_cdf: min_keep must be >= 0, got ", params.min_keep);
  require(!std::isnan(params.tau), "top_cdf: tau is NaN");
  order.clear();
  for (int i = 0; i < n; ++i) {
    keep[i] = 0;
    if (valid != nullptr && valid[i] == 0) continue;
    require(std::isfinite(p[i]) && p[i] >= 0.0f, "top_cdf: entry ", i, " is ", p[i], " (entries are finite and >= 0)");
    order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [p](int a, int b) { return selection_before(p[a], a, p[b], b); });
  const int n_valid = static_cast<int>(order.size());
  std::vector<float> sorted(order.size());
  for (int t = 0; t < n_valid; ++t) sorted[t] = p[order[t]];
  const int kept = top_cdf_count(sorted.data(), n_valid, params.tau, params.min_keep, params.include_crossing);
  for (int t = 0; t < kept; ++t) keep[order[t]] = 1;
  return kept;
}

std::vector<int> top_cdf(const std::vector<float>& p, const TopCdfParams& params,
                         const std::vector<std::uint8_t>* valid) {
  require(valid == nullptr || valid->size() == p.size(), "top_cdf: valid has ", valid ? valid->size() : 0,
          " entries for ", p.size(), " probabilities");
  std::vector<std::uint8_t> keep(p.size());
  std::vector<int> order;
  top_cdf(p.data(), valid ? valid->data() : nullptr, static_cast<int>(p.size()), params, keep.data(), order);
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(p.size()); ++i)
    if (keep[i]) out.push_back(i);
  return out;
}

}  // namespace spattn
