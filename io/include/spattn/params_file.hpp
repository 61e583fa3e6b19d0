// Tuned method parameters as JSON files (host only; spattn::io): what `spattn calibrate` writes and
// `--params` reads. Each file names its method ("method": "sparge" or "sale"); loading checks it, every
// field and the resulting Config, and throws spattn::Error naming the file (and the field).
#pragma once

#include <string>
#include <string_view>

#include "spattn/methods/sale.hpp"
#include "spattn/methods/sparge.hpp"

namespace spattn {

void save_params_json(const sparge::Params& params, const std::string& path);
sparge::Params load_sparge_params(const std::string& path);

void save_params_json(const sale::Params& params, const std::string& path);
sale::Params load_sale_params(const std::string& path);

/// The loaders on JSON text in memory; `what` names it in messages ("params '<what>': …").
sparge::Params parse_sparge_params(std::string_view json, const std::string& what);
sale::Params parse_sale_params(std::string_view json, const std::string& what);

}  // namespace spattn
