// libFuzzer harness: the JSON parameter files of SpargeAttn, SALE and the calibrated main knob of the other methods
// (what --params reads). A file that loads must give a configuration that validates and estimates.
#include <cstdint>
#include <string_view>

#include "small_problem.hpp"
#include "spattn/error.hpp"
#include "spattn/params_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool sparge : {true, false}) {
    try {
      const spattn::MethodConfig config = sparge ? spattn::MethodConfig(spattn::parse_sparge_params(text, "input").config())
                                                 : spattn::MethodConfig(spattn::parse_sale_params(text, "input").config());
      const std::int64_t heads = sparge ? static_cast<std::int64_t>(std::get<spattn::sparge::Config>(config).theta.size())
                                        : static_cast<std::int64_t>(std::get<spattn::sale::Config>(config).tau.size());
      if (heads <= 8) spattn::fuzz::estimate_small(config, heads);
    } catch (const spattn::Error&) {
    }
  }
  try {
    spattn::fuzz::estimate_small(spattn::parse_knob_params(text, "input").config(), 2);
  } catch (const spattn::Error&) {
  }
  return 0;
}
