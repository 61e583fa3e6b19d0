#include "method_kwargs.hpp"

#include <string>
#include <vector>

#include "spattn/error.hpp"
#include "spattn/params_file.hpp"

namespace py = pybind11;

namespace spattn::python {
namespace {

std::string shown(py::handle value) { return std::string(py::str(py::repr(value))); }

/// Any integer (int, numpy's; not a bool, which is an int in Python) through __index__, as text: exact, and
/// set_option refuses one its member cannot hold.
NamedValue integer_value(const std::string& key, py::handle value) {
  require(!py::isinstance<py::bool_>(value), key, ": expected a number, got a bool");
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) PyErr_Clear();
  require(static_cast<bool>(index), key, ": expected an integer, got ", shown(value));
  return {key, std::string(py::str(index))};
}

/// A keyword's value as the option's kind wants it: numbers (not bools), True/False, or a choice's name.
NamedValue named_value(const Option& option, const std::string& key, py::handle value) {
  switch (option.field.kind) {
    case OptionKind::flag:
      require(py::isinstance<py::bool_>(value), key, ": expected True or False, got ", shown(value));
      return {key, value.cast<bool>() ? 1.0 : 0.0};
    case OptionKind::choice:
      require(py::isinstance<py::str>(value), key, ": expected a string, got ", shown(value));
      return {key, value.cast<std::string>()};
    case OptionKind::integer:
      return integer_value(key, value);
    case OptionKind::real:
      require(!py::isinstance<py::bool_>(value), key, ": expected a number, got a bool");
      try {
        return {key, value.cast<double>()};
      } catch (const py::cast_error&) {
        fail(key, ": expected a number, got ", shown(value));
      }
  }
  fail(key, ": unknown option kind");
}

}  // namespace

MethodConfig method_config_from_kwargs(const std::string& method, const py::dict& config, std::int64_t heads_q) {
  const OptionTable& table = option_table(method);  // an unknown method: the registry's error, listing the known names
  std::vector<NamedValue> values;
  for (auto [key, value] : config) {
    const auto name = py::str(key).cast<std::string>();
    if (name == kParamsOption && takes_params_file(method)) {
      // A path: str or os.PathLike.
      try {
        values.push_back({name, py::str(py::module_::import("os").attr("fspath")(value)).cast<std::string>()});
      } catch (const py::error_already_set& e) {
        fail(name, ": ", e.what());
      }
      continue;
    }
    if ((name == kParamsFirstHeadOption || name == kParamsHeadsOption) && takes_params_file(method)) {
      values.push_back(integer_value(name, value));  // which heads of a per-head file (spattn.distributed)
      continue;
    }
    const Option* option = find_option(table, name);
    const std::string_view why = refusal(table, name);
    require(option != nullptr, "method '", method, "': unknown option '", name, "' (", why, why.empty() ? "" : "; ",
            method, " takes ", option_names(table), takes_params_file(method) ? ", params" : "", ")");
    values.push_back(named_value(*option, name, value));
  }
  return configure_method(method, values, heads_q, UnknownOptions::error);
}

}  // namespace spattn::python
