// SpargeAttn tuned parameters as JSON.
#include <fstream>
#include <nlohmann/json.hpp>

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

void Params::save_json(const std::string& path) const {
  nlohmann::json j;
  j["method"] = "sparge";
  j["block_q"] = block_q;
  j["block_k"] = block_k;
  j["l1"] = l1;
  j["l2"] = l2;
  j["heads"] = nlohmann::json::array();
  for (const HeadParams& h : heads)
    j["heads"].push_back({{"theta", h.theta},
                          {"tau", h.tau},
                          {"pv_threshold", std::isinf(h.pv_threshold) ? nlohmann::json("inf") : nlohmann::json(h.pv_threshold)},
                          {"dense", h.dense},
                          {"sparsity", h.sparsity},
                          {"rel_l1", h.rel_l1}});
  std::ofstream out(path);
  require(out.good(), "cannot open '", path, "' for writing");
  out << j.dump(2) << "\n";
  require(out.good(), "error writing '", path, "'");
}

Params Params::load_json(const std::string& path) {
  std::ifstream in(path);
  require(in.good(), "cannot open '", path, "' for reading");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    require(j.value("method", "") == "sparge", "params '", path, "': not SpargeAttn parameters (method '",
            j.value("method", ""), "')");
    Params p;
    p.block_q = j.at("block_q").get<std::int32_t>();
    p.block_k = j.at("block_k").get<std::int32_t>();
    p.l1 = j.value("l1", 0.0f);
    p.l2 = j.value("l2", 0.0f);
    for (const auto& h : j.at("heads")) {
      HeadParams hp;
      hp.theta = h.at("theta").get<float>();
      hp.tau = h.at("tau").get<float>();
      const auto& pv = h.at("pv_threshold");
      hp.pv_threshold = pv.is_string() && pv.get<std::string>() == "inf" ? INFINITY : pv.get<float>();
      hp.dense = h.at("dense").get<bool>();
      hp.sparsity = h.value("sparsity", 0.0);
      hp.rel_l1 = h.value("rel_l1", 0.0);
      p.heads.push_back(hp);
    }
    require(!p.heads.empty(), "params '", path, "': no heads");
    p.config().validate(static_cast<std::int64_t>(p.heads.size()));
    return p;
  } catch (const nlohmann::json::exception& e) {
    fail("params '", path, "': ", e.what());
  }
}

}  // namespace spattn::sparge
