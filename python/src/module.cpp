// _spattn: the Python binding of spattn's public API (spattn.hpp). Arrays come in through DLPack
// without a copy (dlpack_tensor.hpp); every rule — shapes, strides, dtypes, methods, masks — is the
// C++ library's, whose spattn::Error becomes the Python exception spattn.Error with the same
// message. The pure-Python package (python/spattn) allocates outputs and picks streams; this module
// only reads and writes what it is given.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "method_kwargs.hpp"
#include "spattn/error.hpp"
#include "spattn/metrics.hpp"
#include "spattn/params_file.hpp"
#include "spattn/spattn.hpp"

namespace py = pybind11;
using namespace spattn;
using python::Call;
using python::DlpackTensor;
using python::import_array;

namespace {

// ---- results -> Python ----

py::dict stats_dict(const AttendStats& s) {
  py::dict d;
  d["backend"] = s.backend;
  d["empty_rows"] = s.empty_rows;
  d["visited_tiles"] = s.visited_tiles;
  d["pv_skipped"] = s.pv_skipped;
  return d;
}

py::dict estimate_dict(const Estimate& e) {
  py::dict d;
  d["method"] = e.method;
  d["backend"] = e.backend;
  d["candidates"] = e.candidates;
  d["selected"] = e.selected;
  return d;
}

// ---- entry points ----

py::dict attend_py(py::handle q_obj, py::handle k_obj, py::handle v_obj, const TileMask& mask,
                   py::handle out_obj, bool causal, std::optional<float> scale,
                   const std::string& backend, const Call& call) {
  const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call),
                     v = import_array(v_obj, "v", call), o = import_array(out_obj, "out", call);
  const Problem p = python::problem_of(q, k, &v, causal, scale, call);
  python::check_out(o, q, p);
  AttendOptions options;
  options.backend = backend;
  options.lse = python::lse_of(call, q, p);
  AttendStats stats;
  {
    py::gil_scoped_release unlocked;
    stats = attend(p, q.view, k.view, v.view, mask, o.view, options);
  }
  return stats_dict(stats);
}

py::tuple estimate_py(const std::string& method, py::handle q_obj, py::handle k_obj, bool causal,
                      std::optional<float> scale, const std::string& backend, const Call& call,
                      const py::dict& config) {
  const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call);
  const Problem p = python::problem_of(q, k, nullptr, causal, scale, call);
  const MethodConfig mc = python::method_config_from_kwargs(method, config, p.heads_q);
  EstimateOptions options;
  options.backend = backend;
  Estimate e;
  {
    py::gil_scoped_release unlocked;
    e = estimate(mc, p, q.view, k.view, options);
  }
  py::dict info = estimate_dict(e);
  return py::make_tuple(std::move(e.mask), info);
}

py::tuple sparse_attention_py(const std::string& method, py::handle q_obj, py::handle k_obj,
                              py::handle v_obj, py::handle out_obj, bool causal,
                              std::optional<float> scale, const std::string& backend,
                              const Call& call, const py::dict& config) {
  const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call),
                     v = import_array(v_obj, "v", call), o = import_array(out_obj, "out", call);
  const Problem p = python::problem_of(q, k, &v, causal, scale, call);
  python::check_out(o, q, p);
  const MethodConfig mc = python::method_config_from_kwargs(method, config, p.heads_q);
  AttendOptions options;
  options.backend = backend;
  options.lse = python::lse_of(call, q, p);
  SparseAttentionResult r;
  {
    py::gil_scoped_release unlocked;
    r = sparse_attention(mc, p, q.view, k.view, v.view, o.view, options);
  }
  py::dict info = estimate_dict(r.estimate);
  info["attend"] = stats_dict(r.attend);
  return py::make_tuple(std::move(r.estimate.mask), info);
}

/// Writes the calibrated per-head parameters to `path` (the JSON of `spattn calibrate`, which
/// params= reads).
void calibrate_py(const std::string& method, const py::list& samples, bool causal,
                  std::optional<float> scale, const std::string& path, std::optional<float> l1,
                  std::optional<float> l2, std::optional<int> theta_steps, std::optional<float> sale_theta,
                  std::optional<float> rel_l1, const std::string& backend, const Call& call,
                  const py::dict& config) {
  require(!samples.empty(), "samples: give at least one (q, k, v)");
  std::vector<DlpackTensor> arrays;  // keeps every sample's memory alive during the search
  std::vector<Sample> inputs;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto name = "samples[" + std::to_string(i) + "]";
    py::tuple qkv;
    try {
      qkv = samples[i].cast<py::tuple>();
    } catch (const py::cast_error&) {
      fail(name, ": expected a (q, k, v) tuple");
    }
    require(qkv.size() == 3, name, ": expected (q, k, v), got ", qkv.size(), " items");
    const auto qn = name + ".q", kn = name + ".k", vn = name + ".v";
    DlpackTensor q = import_array(qkv[0], qn.c_str(), call),
                 k = import_array(qkv[1], kn.c_str(), call),
                 v = import_array(qkv[2], vn.c_str(), call);
    Sample s{python::problem_of(q, k, &v, causal, scale), q.view, k.view, v.view};
    inputs.push_back(s);
    arrays.push_back(std::move(q));
    arrays.push_back(std::move(k));
    arrays.push_back(std::move(v));
  }
  const MethodConfig base =
      python::method_config_from_kwargs(method, config, inputs[0].problem.heads_q);
  CalibrationTargets targets;  // a target not given keeps the library's default (spattn.hpp)
  targets.l1 = l1.value_or(targets.l1);
  targets.l2 = l2.value_or(targets.l2);
  targets.theta_steps = theta_steps.value_or(targets.theta_steps);
  targets.sale_theta = sale_theta.value_or(targets.sale_theta);
  targets.rel_l1 = rel_l1.value_or(targets.rel_l1);
  targets.backend = backend;
  Calibration c;
  {
    py::gil_scoped_release unlocked;
    c = calibrate(base, inputs, targets);
  }
  std::visit([&](const auto& params) { save_params_json(params, path); }, c);
}

/// The oracle mask (spattn/oracle.hpp) of q and k at tile_q × tile_k, one mask per query head or per KV head, for
/// one budget: "mass" (τ), "density" (ρ) or "threshold" (ε). q and k in host memory (the reference computes it).
TileMask oracle_mask_py(py::handle q_obj, py::handle k_obj, bool causal, std::optional<float> scale,
                        std::int32_t tile_q, std::int32_t tile_k, bool per_kv_head, const std::string& budget,
                        float value, const Call& call) {
  const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call);
  const Problem p = python::problem_of(q, k, nullptr, causal, scale, call);
  OracleBudget b;
  if (budget == "mass") {
    b = OracleBudget::mass(value);
  } else if (budget == "density") {
    b = OracleBudget::density(value);
  } else if (budget == "threshold") {
    b = OracleBudget::threshold(value);
  } else {
    fail("budget: expected 'mass', 'density' or 'threshold', got '", budget, "'");
  }
  const MaskShape shape = MaskShape::of(p, tile_q, tile_k, per_kv_head);
  py::gil_scoped_release unlocked;
  return oracle_mask(p, q.view, k.view, shape, b);
}

/// spattn/metrics.hpp's output_error of two float32 arrays of one size (flattened in C order).
py::dict output_error_py(py::array_t<float, py::array::c_style | py::array::forcecast> got,
                         py::array_t<float, py::array::c_style | py::array::forcecast> want) {
  const OutputError e = output_error({got.data(), static_cast<std::size_t>(got.size())},
                                     {want.data(), static_cast<std::size_t>(want.size())});
  py::dict d;
  d["rel_l1"] = e.rel_l1;
  d["max_abs"] = e.max_abs;
  d["l1"] = e.l1;
  d["reference_l1"] = e.reference_l1;
  d["first_non_finite"] = e.first_non_finite;
  return d;
}

}  // namespace

PYBIND11_MODULE(_spattn, m) {
  m.doc() = "spattn's C++ library (see the spattn package for the documented API)";
  py::register_exception<Error>(m, "Error", PyExc_ValueError);
  python::bind_tile_mask(m);

  py::class_<Call>(m, "Call")
      .def(py::init<>())
      .def_readwrite("layout", &Call::layout)
      .def_readwrite("stream", &Call::stream)
      .def_readwrite("cu_seqlens_q", &Call::cu_seqlens_q)
      .def_readwrite("cu_seqlens_kv", &Call::cu_seqlens_kv)
      .def_readwrite("max_seqlen_q", &Call::max_seqlen_q)
      .def_readwrite("max_seqlen_kv", &Call::max_seqlen_kv)
      .def_readwrite("lse", &Call::lse);

  m.def("attend", &attend_py, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"),
        py::arg("out"), py::arg("causal"), py::arg("scale"), py::arg("backend"), py::arg("call"));
  m.def("estimate", &estimate_py, py::arg("method"), py::arg("q"), py::arg("k"), py::arg("causal"),
        py::arg("scale"), py::arg("backend"), py::arg("call"), py::arg("config"));
  m.def("sparse_attention", &sparse_attention_py, py::arg("method"), py::arg("q"), py::arg("k"),
        py::arg("v"), py::arg("out"), py::arg("causal"), py::arg("scale"), py::arg("backend"),
        py::arg("call"), py::arg("config"));
  m.def("calibrate", &calibrate_py, py::arg("method"), py::arg("samples"), py::arg("causal"),
        py::arg("scale"), py::arg("path"), py::arg("l1"), py::arg("l2"), py::arg("theta_steps"),
        py::arg("sale_theta"), py::arg("rel_l1"), py::arg("backend"), py::arg("call"), py::arg("config"));
  m.def("oracle_mask", &oracle_mask_py, py::arg("q"), py::arg("k"), py::arg("causal"), py::arg("scale"),
        py::arg("tile_q"), py::arg("tile_k"), py::arg("per_kv_head"), py::arg("budget"), py::arg("value"),
        py::arg("call"));
  m.def("output_error", &output_error_py, py::arg("got"), py::arg("want"));
  m.def("methods", [] {
    std::vector<std::pair<std::string, std::string>> list;
    for (const MethodInfo& info : method_registry()) list.emplace_back(info.name, info.summary);
    return list;
  });
  m.def("backends", [] {
    std::vector<std::string> names;
    for (const auto& b : backends()) names.emplace_back(b->name());
    return names;
  });
  python::bind_plan(m);
  python::bind_check(m);
}
