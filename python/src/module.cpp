// _spattn: the Python binding of spattn's public API (spattn.hpp). Arrays come in through DLPack without a copy
// (dlpack_tensor.hpp); every rule — shapes, strides, dtypes, methods, masks — is the C++ library's, whose
// spattn::Error becomes the Python exception spattn.Error with the same message. The pure-Python package
// (python/spattn) allocates outputs and picks streams; this module only reads and writes what it is given.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "dlpack_tensor.hpp"
#include "method_kwargs.hpp"
#include "spattn/error.hpp"
#include "spattn/mask_file.hpp"
#include "spattn/params_file.hpp"
#include "spattn/spattn.hpp"
#if defined(SPATTN_HAVE_CUDA)
#include "spattn/cuda/plan.hpp"
#endif

namespace py = pybind11;
using namespace spattn;
using python::DlpackTensor;

namespace {

// ---- tensors -> Problem ----

struct Call {
  std::string layout = "bhnd";
  std::int64_t stream = 1;  ///< DLPack stream of CUDA arrays (1: the legacy default stream the public API runs on)
};

DlpackTensor import_array(py::handle object, const char* name, const Call& call) {
  return python::import_dlpack(object, name, call.layout, call.stream);
}

void require_same_device(const DlpackTensor& t, const char* name, const DlpackTensor& q) {
  require(t.device_type == q.device_type && t.device_id == q.device_id, name, ": on DLPack device (", t.device_type,
          ", ", t.device_id, "), q on (", q.device_type, ", ", q.device_id, "): every array must be on one device");
}

/// The problem the arrays describe: q [B, Hq, Nq, D], k [B, Hkv, Nkv, D], v [B, Hkv, Nkv, Dv]. The views carry no
/// extents, so the agreement of the arrays' shapes is checked here; everything else by Problem::validate.
Problem problem_of(const DlpackTensor& q, const DlpackTensor& k, const DlpackTensor* v, bool causal,
                   std::optional<float> scale) {
  Problem p;
  p.batch = q.shape[0];
  p.heads_q = q.shape[1];
  p.seqlen_q = q.shape[2];
  p.head_dim = q.shape[3];
  p.heads_kv = k.shape[1];
  p.seqlen_kv = k.shape[2];
  p.causal = causal;
  p.scale = scale;
  p.dtype = q.view.dtype;
  require_same_device(k, "k", q);
  require(k.shape[0] == p.batch && k.shape[3] == p.head_dim, "k: shape ", python::shape_string(k.shape),
          " does not fit q ", python::shape_string(q.shape), " (k must be [B, Hkv, Nkv, D] with q's B and D)");
  if (v != nullptr) {
    require_same_device(*v, "v", q);
    require(v->shape[0] == p.batch && v->shape[1] == p.heads_kv && v->shape[2] == p.seqlen_kv, "v: shape ",
            python::shape_string(v->shape), " does not fit k ", python::shape_string(k.shape),
            " (v must be [B, Hkv, Nkv, Dv] with k's B, Hkv and Nkv)");
    p.head_dim_v = v->shape[3];
  }
  return p;
}

void check_out(const DlpackTensor& o, const DlpackTensor& q, const Problem& p) {
  require_same_device(o, "out", q);
  const std::array<std::int64_t, 4> expected{p.batch, p.heads_q, p.seqlen_q, p.dim_v()};
  require(o.shape == expected, "out: shape ", python::shape_string(o.shape), ", expected ",
          python::shape_string(expected), " ([B, Hq, Nq, Dv])");
}

// ---- results -> Python ----

template <class T>
py::array_t<T> to_numpy(const std::vector<T>& values, std::vector<py::ssize_t> shape) {
  py::array_t<T> a(shape);
  if (!values.empty()) std::memcpy(a.mutable_data(), values.data(), values.size() * sizeof(T));
  return a;
}

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

py::dict attend_py(py::handle q_obj, py::handle k_obj, py::handle v_obj, const TileMask& mask, py::handle out_obj,
                   bool causal, std::optional<float> scale, const std::string& backend, const Call& call) {
  const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call),
                     v = import_array(v_obj, "v", call), o = import_array(out_obj, "out", call);
  const Problem p = problem_of(q, k, &v, causal, scale);
  check_out(o, q, p);
  AttendOptions options;
  options.backend = backend;
  AttendStats stats;
  {
    py::gil_scoped_release unlocked;
    stats = attend(p, q.view, k.view, v.view, mask, o.view, options);
  }
  return stats_dict(stats);
}

py::tuple estimate_py(const std::string& method, py::handle q_obj, py::handle k_obj, bool causal,
                      std::optional<float> scale, const std::string& backend, const Call& call, const py::dict& config) {
  const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call);
  const Problem p = problem_of(q, k, nullptr, causal, scale);
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

py::tuple sparse_attention_py(const std::string& method, py::handle q_obj, py::handle k_obj, py::handle v_obj,
                              py::handle out_obj, bool causal, std::optional<float> scale, const std::string& backend,
                              const Call& call, const py::dict& config) {
  const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call),
                     v = import_array(v_obj, "v", call), o = import_array(out_obj, "out", call);
  const Problem p = problem_of(q, k, &v, causal, scale);
  check_out(o, q, p);
  const MethodConfig mc = python::method_config_from_kwargs(method, config, p.heads_q);
  AttendOptions options;
  options.backend = backend;
  SparseAttentionResult r;
  {
    py::gil_scoped_release unlocked;
    r = sparse_attention(mc, p, q.view, k.view, v.view, o.view, options);
  }
  py::dict info = estimate_dict(r.estimate);
  info["attend"] = stats_dict(r.attend);
  return py::make_tuple(std::move(r.estimate.mask), info);
}

/// Writes the calibrated per-head parameters to `path` (the JSON of `spattn calibrate`, which params= reads).
void calibrate_py(const std::string& method, const py::list& samples, bool causal, std::optional<float> scale,
                  const std::string& path, float l1, float l2, int theta_steps, float sale_theta,
                  const std::string& backend, const Call& call, const py::dict& config) {
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
    DlpackTensor q = import_array(qkv[0], qn.c_str(), call), k = import_array(qkv[1], kn.c_str(), call),
                 v = import_array(qkv[2], vn.c_str(), call);
    Sample s{problem_of(q, k, &v, causal, scale), q.view, k.view, v.view};
    inputs.push_back(s);
    arrays.push_back(std::move(q));
    arrays.push_back(std::move(k));
    arrays.push_back(std::move(v));
  }
  const MethodConfig base = python::method_config_from_kwargs(method, config, inputs[0].problem.heads_q);
  CalibrationTargets targets;
  targets.l1 = l1;
  targets.l2 = l2;
  targets.theta_steps = theta_steps;
  targets.sale_theta = sale_theta;
  targets.backend = backend;
  Calibration c;
  {
    py::gil_scoped_release unlocked;
    c = calibrate(base, inputs, targets);
  }
  std::visit([&](const auto& params) { save_params_json(params, path); }, c);
}

#if defined(SPATTN_HAVE_CUDA)
/// spattn::cuda::Plan for Python: one method and problem shape on the GPU, estimate -> attend on the caller's
/// stream with no allocation or synchronisation (CUDA-graph capturable).
class PyPlan {
 public:
  PyPlan(const std::string& method, py::handle q_obj, py::handle k_obj, py::handle v_obj, bool causal,
         std::optional<float> scale, const std::string& layout, const py::dict& config)
      : call_{layout, -1} {  // DLPack stream -1: no synchronisation; only the shapes are read here
    const DlpackTensor q = import_array(q_obj, "q", call_), k = import_array(k_obj, "k", call_),
                       v = import_array(v_obj, "v", call_);
    problem_ = problem_of(q, k, &v, causal, scale);
    shapes_ = {q.shape, k.shape, v.shape};
    plan_ = std::make_unique<cuda::Plan>(python::method_config_from_kwargs(method, config, problem_.heads_q),
                                         problem_);
  }

  /// Enqueues on `stream`; `dlpack_stream` is what the arrays' producer is told (-1: no synchronisation, for arrays
  /// whose pending work is already on `stream`, the producer's current stream).
  void run(py::handle q_obj, py::handle k_obj, py::handle v_obj, py::handle out_obj, std::int64_t stream,
           std::int64_t dlpack_stream) {
    const Call call{call_.layout, dlpack_stream};
    const DlpackTensor q = import_array(q_obj, "q", call), k = import_array(k_obj, "k", call),
                       v = import_array(v_obj, "v", call), o = import_array(out_obj, "out", call);
    const std::array<const DlpackTensor*, 3> given{&q, &k, &v};
    const char* names[] = {"q", "k", "v"};
    for (std::size_t i = 0; i < 3; ++i) {
      require(given[i]->shape == shapes_[i] && given[i]->view.dtype == problem_.dtype, names[i], ": shape ",
              python::shape_string(given[i]->shape), " ", to_string(given[i]->view.dtype), " differs from the plan's ",
              python::shape_string(shapes_[i]), " ", to_string(problem_.dtype));
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
    return plan_->mask().download(reinterpret_cast<CUstream_st*>(stream));
  }
  std::size_t workspace_bytes() const { return plan_->workspace_bytes(); }

 private:
  Call call_;
  Problem problem_;
  std::array<std::array<std::int64_t, 4>, 3> shapes_{};
  std::unique_ptr<cuda::Plan> plan_;
};
#endif

// ---- TileMask ----

MaskShape mask_shape(std::int32_t tile_q, std::int32_t tile_k, std::int64_t batch, std::int64_t mask_heads,
                     std::int64_t seqlen_q, std::int64_t seqlen_kv, bool causal) {
  MaskShape s;
  s.tile_q = tile_q;
  s.tile_k = tile_k;
  s.batch = batch;
  s.mask_heads = mask_heads;
  s.seqlen_q = seqlen_q;
  s.seqlen_kv = seqlen_kv;
  s.causal = causal;
  s.validate();
  return s;
}

py::dict mask_stats(const TileMask& m) {
  const TileMask::Stats s = m.stats();
  py::dict d;
  d["density"] = s.density;
  d["pair_density"] = s.pair_density;
  d["kept_tiles"] = s.kept_tiles;
  d["reachable_tiles"] = s.reachable_tiles;
  d["min_per_row"] = s.min_per_row;
  d["max_per_row"] = s.max_per_row;
  d["mean_per_row"] = s.mean_per_row;
  d["empty_rows"] = s.empty_rows;
  d["bytes"] = s.bytes;
  return d;
}

std::vector<py::ssize_t> rows_shape(const MaskShape& s) { return {s.batch, s.mask_heads, s.num_q_tiles()}; }
std::vector<py::ssize_t> rows_by_tiles(const MaskShape& s) {
  return {s.batch, s.mask_heads, s.num_q_tiles(), s.num_k_tiles()};
}

void bind_tile_mask(py::module_& m) {
  py::class_<TileMask>(m, "TileMask", R"(Which key tiles each (batch, mask head, query tile) attends to
(DESIGN.md section 3). Causality is not in the mask: the executor applies it inside every tile.)")
      .def_static(
          "dense",
          [](std::int32_t tile_q, std::int32_t tile_k, std::int64_t batch, std::int64_t mask_heads,
             std::int64_t seqlen_q, std::int64_t seqlen_kv, bool causal) {
            return TileMask::dense(mask_shape(tile_q, tile_k, batch, mask_heads, seqlen_q, seqlen_kv, causal));
          },
          py::kw_only(), py::arg("tile_q"), py::arg("tile_k"), py::arg("batch"), py::arg("mask_heads"),
          py::arg("seqlen_q"), py::arg("seqlen_kv"), py::arg("causal"), "Every reachable tile kept.")
      .def_static(
          "from_bitmap",
          [](py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast> bitmap, std::int32_t tile_q,
             std::int32_t tile_k, std::int64_t seqlen_q, std::int64_t seqlen_kv, bool causal) {
            require(bitmap.ndim() == 4, "bitmap: expected [B, Hm, Tq, Tk], got ", bitmap.ndim(), " dimensions");
            const MaskShape s =
                mask_shape(tile_q, tile_k, bitmap.shape(0), bitmap.shape(1), seqlen_q, seqlen_kv, causal);
            require(bitmap.shape(2) == s.num_q_tiles() && bitmap.shape(3) == s.num_k_tiles(), "bitmap: ",
                    bitmap.shape(2), " x ", bitmap.shape(3), " tiles, the lengths and tiles give ", s.num_q_tiles(),
                    " x ", s.num_k_tiles());
            return TileMask::from_bitmap(s, std::vector<std::uint8_t>(bitmap.data(), bitmap.data() + bitmap.size()));
          },
          py::arg("bitmap"), py::kw_only(), py::arg("tile_q"), py::arg("tile_k"), py::arg("seqlen_q"),
          py::arg("seqlen_kv"), py::arg("causal"),
          "From a [B, Hm, Tq, Tk] array (nonzero = kept); tiles the causal rule or the lengths exclude are dropped.")
      .def_static("load", &load_mask_npz, py::arg("path"), "Reads a mask .npz (spattn run --mask-out).")
      .def("save", [](const TileMask& mask, const std::string& path) { save_mask_npz(mask, path); }, py::arg("path"),
           "Writes the mask as .npz (the format of spattn run --mask-out).")
      .def_property_readonly("tile_q", [](const TileMask& t) { return t.shape.tile_q; })
      .def_property_readonly("tile_k", [](const TileMask& t) { return t.shape.tile_k; })
      .def_property_readonly("batch", [](const TileMask& t) { return t.shape.batch; })
      .def_property_readonly("mask_heads", [](const TileMask& t) { return t.shape.mask_heads; })
      .def_property_readonly("seqlen_q", [](const TileMask& t) { return t.shape.seqlen_q; })
      .def_property_readonly("seqlen_kv", [](const TileMask& t) { return t.shape.seqlen_kv; })
      .def_property_readonly("causal", [](const TileMask& t) { return t.shape.causal; })
      .def_property_readonly("seqlens_q", [](const TileMask& t) { return t.shape.seqlens_q; },
                             "per-sequence query lengths of a variable-length mask, else []")
      .def_property_readonly("seqlens_kv", [](const TileMask& t) { return t.shape.seqlens_kv; },
                             "per-sequence key lengths of a variable-length mask, else []")
      .def_property_readonly("num_q_tiles", [](const TileMask& t) { return t.shape.num_q_tiles(); })
      .def_property_readonly("num_k_tiles", [](const TileMask& t) { return t.shape.num_k_tiles(); })
      .def_property_readonly("row_ptr", [](const TileMask& t) { return to_numpy(t.row_ptr, {py::ssize_t(t.row_ptr.size())}); },
                             "CSR offsets, int64 [B·Hm·Tq + 1] (a copy)")
      .def_property_readonly("tiles", [](const TileMask& t) { return to_numpy(t.tiles, {py::ssize_t(t.tiles.size())}); },
                             "kept key-tile ids, int32, ascending within a row (a copy)")
      .def_property_readonly("density", [](const TileMask& t) { return t.stats().density; },
                             "kept tiles / reachable tiles")
      .def("stats", &mask_stats, "density, pair_density, kept/reachable tiles, per-row counts, empty rows, bytes")
      .def(
          "row", [](const TileMask& t, std::int64_t b, std::int64_t h, std::int64_t q_tile) {
            require(b >= 0 && b < t.shape.batch && h >= 0 && h < t.shape.mask_heads && q_tile >= 0 &&
                        q_tile < t.shape.num_q_tiles(),
                    "row: (", b, ", ", h, ", ", q_tile, ") is outside the mask's [", t.shape.batch, ", ",
                    t.shape.mask_heads, ", ", t.shape.num_q_tiles(), "]");
            const auto r = t.row(b, h, q_tile);
            return std::vector<std::int32_t>(r.begin(), r.end());
          },
          py::arg("b"), py::arg("h"), py::arg("q_tile"), "Kept key tiles of one row.")
      .def("to_bitmap", [](const TileMask& t) { return to_numpy(t.to_bitmap(), rows_by_tiles(t.shape)); },
           "uint8 [B, Hm, Tq, Tk], 1 = kept")
      .def(
          "flex_block_mask_lists",
          [](const TileMask& t) {
            const TileMask::FlexBlockMask f = t.to_flex_block_mask();
            py::dict d;
            d["kv_num_blocks"] = to_numpy(f.kv_num_blocks, rows_shape(t.shape));
            d["kv_indices"] = to_numpy(f.kv_indices, rows_by_tiles(t.shape));
            d["full_kv_num_blocks"] = to_numpy(f.full_kv_num_blocks, rows_shape(t.shape));
            d["full_kv_indices"] = to_numpy(f.full_kv_indices, rows_by_tiles(t.shape));
            return d;
          },
          "FlexAttention BlockMask lists as int32 NumPy arrays: partial (need the mask_mod) and full tiles")
      .def(
          "bsr",
          [](const TileMask& t) {
            const TileMask::Bsr b = t.to_bsr();
            py::dict d;
            d["indptr"] = to_numpy(b.indptr, {py::ssize_t(b.indptr.size())});
            d["indices"] = to_numpy(b.indices, {py::ssize_t(b.indices.size())});
            return d;
          },
          "FlashInfer block-sparse rows over all (b, h, q tile) rows: int32 indptr and indices")
      .def("__eq__", [](const TileMask& a, const TileMask& b) {
        return a.shape == b.shape && a.row_ptr == b.row_ptr && a.tiles == b.tiles;
      })
      .def("__repr__", [](const TileMask& t) {
        const MaskShape& s = t.shape;
        return "TileMask(tile " + std::to_string(s.tile_q) + "x" + std::to_string(s.tile_k) + ", batch " +
               std::to_string(s.batch) + ", mask_heads " + std::to_string(s.mask_heads) + ", seqlen " +
               std::to_string(s.seqlen_q) + "x" + std::to_string(s.seqlen_kv) + (s.causal ? ", causal" : "") +
               ", density " + std::to_string(t.stats().density) + ")";
      });
}

}  // namespace

PYBIND11_MODULE(_spattn, m) {
  m.doc() = "spattn's C++ library (see the spattn package for the documented API)";
  py::register_exception<Error>(m, "Error", PyExc_ValueError);
  bind_tile_mask(m);

  py::class_<Call>(m, "Call")
      .def(py::init<>())
      .def_readwrite("layout", &Call::layout)
      .def_readwrite("stream", &Call::stream);

  m.def("attend", &attend_py, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("mask"), py::arg("out"),
        py::arg("causal"), py::arg("scale"), py::arg("backend"), py::arg("call"));
  m.def("estimate", &estimate_py, py::arg("method"), py::arg("q"), py::arg("k"), py::arg("causal"), py::arg("scale"),
        py::arg("backend"), py::arg("call"), py::arg("config"));
  m.def("sparse_attention", &sparse_attention_py, py::arg("method"), py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("out"), py::arg("causal"), py::arg("scale"), py::arg("backend"), py::arg("call"), py::arg("config"));
  m.def("calibrate", &calibrate_py, py::arg("method"), py::arg("samples"), py::arg("causal"), py::arg("scale"),
        py::arg("path"), py::arg("l1"), py::arg("l2"), py::arg("theta_steps"), py::arg("sale_theta"),
        py::arg("backend"), py::arg("call"), py::arg("config"));
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
#if defined(SPATTN_HAVE_CUDA)
  m.attr("has_cuda") = true;
  py::class_<PyPlan>(m, "Plan")
      .def(py::init<const std::string&, py::handle, py::handle, py::handle, bool, std::optional<float>,
                    const std::string&, const py::dict&>(),
           py::arg("method"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("scale"),
           py::arg("layout"), py::arg("config"))
      .def("run", &PyPlan::run, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"), py::arg("stream"),
           py::arg("dlpack_stream"))
      .def("mask", &PyPlan::mask, py::arg("stream"))
      .def_property_readonly("workspace_bytes", &PyPlan::workspace_bytes);
#else
  m.attr("has_cuda") = false;
#endif
}
