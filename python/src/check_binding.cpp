// spattn._spattn.check_attention: spattn/check.hpp's checker for spattn.testing (the mask conversions from
// FlexAttention and FlashInfer formats are Python's, in python/spattn/testing.py).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "arrays.hpp"
#include "bindings.hpp"
#include "spattn/check.hpp"
#include "spattn/error.hpp"

namespace py = pybind11;

namespace spattn::python {
namespace {

using ElementArray = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>;

py::dict report_dict(const CheckReport& r) {
  py::dict d;
  d["passed"] = r.passed;
  d["mask_kind"] = r.mask_kind;
  d["factor"] = r.factor;
  d["atol"] = r.atol;
  d["reference_error"] = r.reference_error;
  d["bound"] = r.bound;
  d["max_error"] = r.max_error;
  py::array_t<double> head_error({r.batch, r.heads}), head_reference_error({r.batch, r.heads});
  std::copy(r.head_error.begin(), r.head_error.end(), head_error.mutable_data());
  std::copy(r.head_reference_error.begin(), r.head_reference_error.end(), head_reference_error.mutable_data());
  d["head_error"] = head_error;
  d["head_reference_error"] = head_reference_error;
  d["failing_rows"] = r.failing_rows;
  d["non_finite"] = r.non_finite;
  if (r.first_failure.batch >= 0) {
    py::dict f;
    f["batch"] = r.first_failure.batch;
    f["head"] = r.first_failure.head;
    f["row"] = r.first_failure.row;
    f["column"] = r.first_failure.column;
    f["got"] = r.first_failure.got;
    f["want"] = r.first_failure.want;
    d["first_failure"] = f;
  } else {
    d["first_failure"] = py::none();
  }
  d["text"] = r.text();
  return d;
}

/// Exactly one of tile_mask and element ([B or 1, H or 1, Nq, Nkv], nonzero = visible) is given.
py::dict check_attention_py(py::handle q_obj, py::handle k_obj, py::handle v_obj, py::handle out_obj,
                            const TileMask* tile_mask, std::optional<ElementArray> element, bool causal,
                            std::optional<float> scale, double factor, std::optional<double> atol, const Call& call) {
  const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call),
                     v = import_array(v_obj, "v", call), o = import_array(out_obj, "out", call);
  const Problem p = problem_of(q, k, &v, causal, scale);
  check_out(o, q, p);
  const CheckOptions options{factor, atol};
  require((tile_mask != nullptr) != element.has_value(), "check_attention: give one mask (a TileMask or an element mask)");
  CheckReport r;
  if (tile_mask != nullptr) {
    py::gil_scoped_release unlocked;
    r = check_attention(p, q.view, k.view, v.view, o.view, *tile_mask, options);
  } else {
    const ElementArray& e = *element;
    require(e.ndim() == 4 && e.shape(2) == p.seqlen_q && e.shape(3) == p.seqlen_kv,
            "mask: expected a boolean [B or 1, H or 1, Nq = ", p.seqlen_q, ", Nkv = ", p.seqlen_kv, "] array, got ",
            e.ndim(), " dimensions", e.ndim() == 4 ? " of shape [" + std::to_string(e.shape(0)) + ", " +
                                                         std::to_string(e.shape(1)) + ", " + std::to_string(e.shape(2)) +
                                                         ", " + std::to_string(e.shape(3)) + "]"
                                                   : std::string());
    const ElementMask mask{e.data(), e.shape(0), e.shape(1)};
    py::gil_scoped_release unlocked;
    r = check_attention(p, q.view, k.view, v.view, o.view, mask, options);
  }
  return report_dict(r);
}

}  // namespace

void bind_check(py::module_& m) {
  m.def("check_attention", &check_attention_py, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"),
        py::arg("tile_mask"), py::arg("element"), py::arg("causal"), py::arg("scale"), py::arg("factor"),
        py::arg("atol"), py::arg("call"));
}

}  // namespace spattn::python
