#include "method_kwargs.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>

#include "../../tools/methods.hpp"
#include "spattn/error.hpp"

namespace py = pybind11;

namespace spattn::python {
namespace {

template <class T>
T cast_value(py::handle value, const std::string& key, const char* expected) {
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    fail(key, ": expected ", expected, ", got ", std::string(py::str(py::repr(value))));
  }
}

template <class T>
std::function<void(cli::MethodOptions&, py::handle, const std::string&)> number(
    std::optional<T> cli::MethodOptions::*field) {
  return [field](cli::MethodOptions& o, py::handle value, const std::string& key) {
    // bool is an int in Python; a flag given to a numeric option is a mistake.
    require(!py::isinstance<py::bool_>(value), key, ": expected a number, got a bool");
    o.*field = cast_value<T>(value, key, "a number");
  };
}

std::function<void(cli::MethodOptions&, py::handle, const std::string&)> text(
    std::string cli::MethodOptions::*field) {
  return [field](cli::MethodOptions& o, py::handle value, const std::string& key) {
    require(py::isinstance<py::str>(value), key, ": expected a string, got ",
            std::string(py::str(py::repr(value))));
    o.*field = value.cast<std::string>();
  };
}

const std::map<std::string,
               std::function<void(cli::MethodOptions&, py::handle, const std::string&)>>&
setters() {
  using O = cli::MethodOptions;
  static const std::map<std::string, std::function<void(O&, py::handle, const std::string&)>> table{
      {"tile_q", number(&O::tile_q)},
      {"tile_k", number(&O::tile_k)},
      {"top_p", number(&O::top_p)},
      {"merge", text(&O::merge)},
      {"semantics", text(&O::semantics)},
      {"theta", number(&O::theta)},
      {"step", number(&O::step)},
      {"block", number(&O::block)},
      {"group", number(&O::group)},
      {"gamma", number(&O::gamma)},
      {"eta", number(&O::eta)},
      {"rho", number(&O::rho)},
      {"rescue_seed", number(&O::rescue_seed)},
      {"rescue_grid", text(&O::rescue_grid)},
      {"keep_ratio", number(&O::keep_ratio)},
      {"sim_threshold", number(&O::sim_threshold)},
      {"cdf_threshold", number(&O::cdf_threshold)},
      {"topk", number(&O::topk)},
      {"sink",
       [](O& o, py::handle value, const std::string& key) {
         require(py::isinstance<py::bool_>(value), key, ": expected True or False, got ",
                 std::string(py::str(py::repr(value))));
         o.sink = value.cast<bool>();
       }},
      // A path: str or os.PathLike.
      {"params",
       [](O& o, py::handle value, const std::string&) {
         o.params = py::str(py::module_::import("os").attr("fspath")(value)).cast<std::string>();
       }},
      {"bits", number(&O::bits)},
      {"tau", number(&O::tau)},
      {"local_window", number(&O::local_window)},
  };
  return table;
}

std::string joined(const std::vector<std::string_view>& names) {
  std::string s;
  for (auto n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s.empty() ? "nothing" : s;
}

}  // namespace

MethodConfig method_config_from_kwargs(const std::string& method, const py::dict& config,
                                       std::int64_t heads_q) {
  const std::vector<std::string_view>& takes = cli::method_option_names(method);
  cli::MethodOptions options;
  for (auto [key, value] : config) {
    const auto name = py::str(key).cast<std::string>();
    require(std::find(takes.begin(), takes.end(), name) != takes.end(), "method '", method,
            "': unknown option '", name, "' (", method, " takes ", joined(takes), ")");
    try {
      setters().at(name)(options, value, name);
    } catch (const py::error_already_set& e) {
      fail(name, ": ", e.what());
    }
  }
  return cli::method_config(method, options, heads_q);
}

}  // namespace spattn::python
