// spattn._spattn.Plan: spattn::cuda::Plan for Python (the package's spattn.Plan), in builds with
// the CUDA backend.
#include <pybind11/stl.h>

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "arrays.hpp"
#include "bindings.hpp"
#include "method_kwargs.hpp"
#include "spattn/error.hpp"
#if defined(SPATTN_HAVE_CUDA)
#include "spattn/cuda/plan.hpp"
#endif

namespace py = pybind11;

namespace spattn::python {

#if defined(SPATTN_HAVE_CUDA)
namespace {

/// spattn::cuda::Plan for Python: one method and problem shape on the GPU, estimate -> attend on
/// the caller's stream with no allocation or synchronisation (CUDA-graph capturable).
class PyPlan {
 public:
  PyPlan(const std::string& method, py::handle q_obj, py::handle k_obj, py::handle v_obj,
         bool causal, std::optional<float> scale, const std::string& layout, const py::dict& config)
      : call_{layout, -1} {  // DLPack stream -1: no synchronisation; only the shapes are read here
    const DlpackTensor q = import_array(q_obj, "q", call_), k = import_array(k_obj, "k", call_),
                       v = import_array(v_obj, "v", call_);
    problem_ = problem_of(q, k, &v, causal, scale);
    shapes_ = {q.shape, k.shape, v.shape};
    plan_ = std::make_unique<cuda::Plan>(
        method_config_from_kwargs(method, config, problem_.heads_q), problem_);
  }

  /// Enqueues on `stream`; `dlpack_stream` is what the arrays' producer is told (-1: no
  /// synchronisation, for arrays whose pending work is already on `stream`, the producer's current
  /// stream).
  void run(py::handle q_obj, py::handle k_obj, py::handle v_obj, py::handle out_obj,
           std::int64_t stream, std::int64_t dlpack_stream) {
    const Call call{call_.layout, dlpack_stream};
    const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call),
                       v = import_array(v_obj, "v", call), o = import_array(out_obj, "out", call);
    const std::array<const DlpackTensor*, 3> given{&q, &k, &v};
    const char* names[] = {"q", "k", "v"};
    for (std::size_t i = 0; i < 3; ++i) {
      require(given[i]->shape == shapes_[i] && given[i]->view.dtype == problem_.dtype, names[i],
              ": shape ", shape_string(given[i]->shape), " ", to_string(given[i]->view.dtype),
              " differs from the plan's ", shape_string(shapes_[i]), " ",
              to_string(problem_.dtype));
      require(given[i]->device_type == 2, names[i], ": a Plan runs on CUDA arrays");
    }
    require_same_device(k, "k", q);
    require_same_device(v, "v", q);
    check_out(o, q, problem_);
    problem_.validate(q.view, k.view, v.view, o.view);
    py::gil_scoped_release unlocked;
    plan_->run(q.view, k.view, v.view, o.view, reinterpret_cast<CUstream_st*>(stream));
  }

  TileMask mask(std::int64_t stream) const {
    py::gil_scoped_release unlocked;
    return plan_->selection(reinterpret_cast<CUstream_st*>(stream));
  }
  std::size_t workspace_bytes() const { return plan_->workspace_bytes(); }

 private:
  Call call_;
  Problem problem_;
  std::array<std::array<std::int64_t, 4>, 3> shapes_{};
  std::unique_ptr<cuda::Plan> plan_;
};

}  // namespace

void bind_plan(py::module_& m) {
  m.attr("has_cuda") = true;
  py::class_<PyPlan>(m, "Plan")
      .def(py::init<const std::string&, py::handle, py::handle, py::handle, bool,
                    std::optional<float>, const std::string&, const py::dict&>(),
           py::arg("method"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"),
           py::arg("scale"), py::arg("layout"), py::arg("config"))
      .def("run", &PyPlan::run, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"),
           py::arg("stream"), py::arg("dlpack_stream"))
      .def("mask", &PyPlan::mask, py::arg("stream"))
      .def_property_readonly("workspace_bytes", &PyPlan::workspace_bytes);
}
#else
void bind_plan(py::module_& m) { m.attr("has_cuda") = false; }
#endif

}  // namespace spattn::python
