// spattn._spattn.Plan: spattn::cuda::Plan for Python (the package's spattn.Plan), in builds with
// the CUDA backend.
#include <pybind11/stl.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

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
  /// `call`: the layout, a variable-length batch's offsets and the LSE array every run writes (its stream is not
  /// used: only the shapes are read here). `workspace`: (device pointer, bytes) of the caller's memory that the
  /// plan's device buffers are carved from (cuda::Workspace), or none: the plan allocates its own.
  PyPlan(const std::string& method, py::handle q_obj, py::handle k_obj, py::handle v_obj,
         bool causal, std::optional<float> scale, const Call& call, const py::dict& config,
         std::optional<std::pair<std::uintptr_t, std::size_t>> workspace)
      : layout_(call.layout) {
    const Arrays a = read(method, q_obj, k_obj, v_obj, causal, scale, call, config);
    problem_ = a.problem;
    shapes_ = a.shapes;
    if (workspace)
      plan_ = std::make_unique<cuda::Plan>(
          a.config, problem_, a.options,
          cuda::Workspace{reinterpret_cast<void*>(workspace->first), workspace->second});
    else
      plan_ = std::make_unique<cuda::Plan>(a.config, problem_, a.options);
  }

  /// The bytes a workspace for this plan needs (cuda::Plan::required_bytes; nothing is allocated).
  static std::size_t required_bytes(const std::string& method, py::handle q_obj, py::handle k_obj,
                                    py::handle v_obj, bool causal, std::optional<float> scale,
                                    const Call& call, const py::dict& config) {
    const Arrays a = read(method, q_obj, k_obj, v_obj, causal, scale, call, config);
    return cuda::Plan::required_bytes(a.config, a.problem, a.options);
  }

  /// Enqueues on `stream`; `dlpack_stream` is what the arrays' producer is told (-1: no
  /// synchronisation, for arrays whose pending work is already on `stream`, the producer's current
  /// stream).
  void run(py::handle q_obj, py::handle k_obj, py::handle v_obj, py::handle out_obj,
           std::int64_t stream, std::int64_t dlpack_stream) {
    const Call call{layout_, dlpack_stream};
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
  struct Arrays {
    MethodConfig config;
    Problem problem;
    AttendOptions options;
    std::array<std::array<std::int64_t, 4>, 3> shapes;
  };
  static Arrays read(const std::string& method, py::handle q_obj, py::handle k_obj,
                     py::handle v_obj, bool causal, std::optional<float> scale, const Call& call,
                     const py::dict& config) {
    const Call shapes_only{call.layout, -1};  // DLPack stream -1: no synchronisation
    const DlpackTensor q = import_array(q_obj, "q", shapes_only),
                       k = import_array(k_obj, "k", shapes_only),
                       v = import_array(v_obj, "v", shapes_only);
    Arrays a;
    a.problem = problem_of(q, k, &v, causal, scale, call);
    a.shapes = {q.shape, k.shape, v.shape};
    a.config = method_config_from_kwargs(method, config, a.problem.heads_q);
    a.options.lse = lse_of(call, q, a.problem);
    return a;
  }

  std::string layout_;
  Problem problem_;
  std::array<std::array<std::int64_t, 4>, 3> shapes_{};
  std::unique_ptr<cuda::Plan> plan_;
};

}  // namespace

void bind_plan(py::module_& m) {
  m.attr("has_cuda") = true;
  py::class_<PyPlan>(m, "Plan")
      .def(py::init<const std::string&, py::handle, py::handle, py::handle, bool,
                    std::optional<float>, const Call&, const py::dict&,
                    std::optional<std::pair<std::uintptr_t, std::size_t>>>(),
           py::arg("method"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"),
           py::arg("scale"), py::arg("call"), py::arg("config"), py::arg("workspace"))
      .def_static("required_bytes", &PyPlan::required_bytes, py::arg("method"), py::arg("q"),
                  py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("scale"), py::arg("call"),
                  py::arg("config"))
      .def("run", &PyPlan::run, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"),
           py::arg("stream"), py::arg("dlpack_stream"))
      .def("mask", &PyPlan::mask, py::arg("stream"))
      .def_property_readonly("workspace_bytes", &PyPlan::workspace_bytes);
}
#else
void bind_plan(py::module_& m) { m.attr("has_cuda") = false; }
#endif

}  // namespace spattn::python
