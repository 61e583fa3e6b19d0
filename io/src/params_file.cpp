// Tuned method parameters as JSON files: SpargeAttn ("method": "sparge") and SALE ("method": "sale").
#include "spattn/params_file.hpp"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "spattn/error.hpp"

namespace spattn {

void save_params_json(const sparge::Params& params, const std::string& path) {
  nlohmann::json j;
  j["method"] = "sparge";
  j["block_q"] = params.block_q;
  j["block_k"] = params.block_k;
  j["l1"] = params.l1;
  j["l2"] = params.l2;
  j["heads"] = nlohmann::json::array();
  for (const sparge::HeadParams& h : params.heads)
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

sparge::Params load_sparge_params(const std::string& path) {
  std::ifstream in(path);
  require(in.good(), "cannot open '", path, "' for reading");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    require(j.value("method", "") == "sparge", "params '", path, "': not SpargeAttn parameters (method '",
            j.value("method", ""), "')");
    sparge::Params p;
    p.block_q = j.at("block_q").get<std::int32_t>();
    p.block_k = j.at("block_k").get<std::int32_t>();
    p.l1 = j.value("l1", 0.0f);
    p.l2 = j.value("l2", 0.0f);
    for (const auto& h : j.at("heads")) {
      sparge::HeadParams hp;
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

void save_params_json(const sale::Params& params, const std::string& path) {
  const nlohmann::json j = {{"method", "sale"},
                            {"bits", params.bits},
                            {"local_window", params.local_window},
                            {"theta", params.theta},
                            {"tau", params.tau}};
  std::ofstream out(path);
  require(out.good(), "cannot open '", path, "' for writing");
  out << j.dump(2) << "\n";
}

sale::Params load_sale_params(const std::string& path) {
  std::ifstream in(path);
  require(in.good(), "cannot open '", path, "' for reading");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    require(j.value("method", "") == "sale", "params '", path, "': not SALE parameters");
    sale::Params p;
    p.bits = j.at("bits").get<int>();
    p.local_window = j.at("local_window").get<std::int64_t>();
    p.theta = j.value("theta", 0.4f);
    p.tau = j.at("tau").get<std::vector<float>>();
    require(!p.tau.empty(), "params '", path, "': no tau values");
    p.config().validate(static_cast<std::int64_t>(p.tau.size()));
    return p;
  } catch (const nlohmann::json::exception& e) {
    fail("params '", path, "': ", e.what());
  }
}

}  // namespace spattn
