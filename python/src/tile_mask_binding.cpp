// spattn.TileMask: the library's TileMask (spattn/mask.hpp) with its conversions and exports, and
// its .npz files (spattn/mask_file.hpp). Arrays go out as NumPy copies.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "spattn/error.hpp"
#include "spattn/mask.hpp"
#include "spattn/mask_file.hpp"

namespace py = pybind11;

namespace spattn::python {
namespace {

template <class T>
py::array_t<T> to_numpy(const std::vector<T>& values, std::vector<py::ssize_t> shape) {
  py::array_t<T> a(shape);
  if (!values.empty()) std::memcpy(a.mutable_data(), values.data(), values.size() * sizeof(T));
  return a;
}

MaskShape mask_shape(std::int32_t tile_q, std::int32_t tile_k, std::int64_t batch,
                     std::int64_t mask_heads, std::int64_t seqlen_q, std::int64_t seqlen_kv,
                     bool causal) {
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

std::vector<py::ssize_t> rows_shape(const MaskShape& s) {
  return {s.batch, s.mask_heads, s.num_q_tiles()};
}
std::vector<py::ssize_t> rows_by_tiles(const MaskShape& s) {
  return {s.batch, s.mask_heads, s.num_q_tiles(), s.num_k_tiles()};
}

}  // namespace

void bind_tile_mask(py::module_& m) {
  py::class_<TileMask>(m, "TileMask",
                       R"(Which key tiles each (batch, mask head, query tile) attends to
(DESIGN.md section 3). Causality is not in the mask: the executor applies it inside every tile.)")
      .def_static(
          "dense",
          [](std::int32_t tile_q, std::int32_t tile_k, std::int64_t batch, std::int64_t mask_heads,
             std::int64_t seqlen_q, std::int64_t seqlen_kv, bool causal) {
            return TileMask::dense(
                mask_shape(tile_q, tile_k, batch, mask_heads, seqlen_q, seqlen_kv, causal));
          },
          py::kw_only(), py::arg("tile_q"), py::arg("tile_k"), py::arg("batch"),
          py::arg("mask_heads"), py::arg("seqlen_q"), py::arg("seqlen_kv"), py::arg("causal"),
          "Every reachable tile kept.")
      .def_static(
          "from_bitmap",
          [](py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast> bitmap,
             std::int32_t tile_q, std::int32_t tile_k, std::int64_t seqlen_q,
             std::int64_t seqlen_kv, bool causal) {
            require(bitmap.ndim() == 4, "bitmap: expected [B, Hm, Tq, Tk], got ", bitmap.ndim(),
                    " dimensions");
            const MaskShape s = mask_shape(tile_q, tile_k, bitmap.shape(0), bitmap.shape(1),
                                           seqlen_q, seqlen_kv, causal);
            require(bitmap.shape(2) == s.num_q_tiles() && bitmap.shape(3) == s.num_k_tiles(),
                    "bitmap: ", bitmap.shape(2), " x ", bitmap.shape(3),
                    " tiles, the lengths and tiles give ", s.num_q_tiles(), " x ", s.num_k_tiles());
            return TileMask::from_bitmap(
                s, std::vector<std::uint8_t>(bitmap.data(), bitmap.data() + bitmap.size()));
          },
          py::arg("bitmap"), py::kw_only(), py::arg("tile_q"), py::arg("tile_k"),
          py::arg("seqlen_q"), py::arg("seqlen_kv"), py::arg("causal"),
          "From a [B, Hm, Tq, Tk] array (nonzero = kept); tiles the causal rule or the lengths "
          "exclude are dropped.")
      .def_static("load", &load_mask_npz, py::arg("path"),
                  "Reads a mask .npz (spattn run --mask-out).")
      .def(
          "save", [](const TileMask& mask, const std::string& path) { save_mask_npz(mask, path); },
          py::arg("path"), "Writes the mask as .npz (the format of spattn run --mask-out).")
      .def_property_readonly("tile_q", [](const TileMask& t) { return t.shape.tile_q; })
      .def_property_readonly("tile_k", [](const TileMask& t) { return t.shape.tile_k; })
      .def_property_readonly("batch", [](const TileMask& t) { return t.shape.batch; })
      .def_property_readonly("mask_heads", [](const TileMask& t) { return t.shape.mask_heads; })
      .def_property_readonly("seqlen_q", [](const TileMask& t) { return t.shape.seqlen_q; })
      .def_property_readonly("seqlen_kv", [](const TileMask& t) { return t.shape.seqlen_kv; })
      .def_property_readonly("causal", [](const TileMask& t) { return t.shape.causal; })
      .def_property_readonly(
          "seqlens_q", [](const TileMask& t) { return t.shape.seqlens_q; },
          "per-sequence query lengths of a variable-length mask, else []")
      .def_property_readonly(
          "seqlens_kv", [](const TileMask& t) { return t.shape.seqlens_kv; },
          "per-sequence key lengths of a variable-length mask, else []")
      .def_property_readonly("num_q_tiles", [](const TileMask& t) { return t.shape.num_q_tiles(); })
      .def_property_readonly("num_k_tiles", [](const TileMask& t) { return t.shape.num_k_tiles(); })
      .def_property_readonly(
          "row_ptr",
          [](const TileMask& t) { return to_numpy(t.row_ptr, {py::ssize_t(t.row_ptr.size())}); },
          "CSR offsets, int64 [B·Hm·Tq + 1] (a copy)")
      .def_property_readonly(
          "tiles",
          [](const TileMask& t) { return to_numpy(t.tiles, {py::ssize_t(t.tiles.size())}); },
          "kept key-tile ids, int32, ascending within a row (a copy)")
      .def_property_readonly(
          "density", [](const TileMask& t) { return t.stats().density; },
          "kept tiles / reachable tiles")
      .def("stats", &mask_stats,
           "density, pair_density, kept/reachable tiles, per-row counts, empty rows, bytes")
      .def(
          "row",
          [](const TileMask& t, std::int64_t b, std::int64_t h, std::int64_t q_tile) {
            require(b >= 0 && b < t.shape.batch && h >= 0 && h < t.shape.mask_heads &&
                        q_tile >= 0 && q_tile < t.shape.num_q_tiles(),
                    "row: (", b, ", ", h, ", ", q_tile, ") is outside the mask's [", t.shape.batch,
                    ", ", t.shape.mask_heads, ", ", t.shape.num_q_tiles(), "]");
            const auto r = t.row(b, h, q_tile);
            return std::vector<std::int32_t>(r.begin(), r.end());
          },
          py::arg("b"), py::arg("h"), py::arg("q_tile"), "Kept key tiles of one row.")
      .def(
          "to_bitmap",
          [](const TileMask& t) { return to_numpy(t.to_bitmap(), rows_by_tiles(t.shape)); },
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
          "FlexAttention BlockMask lists as int32 NumPy arrays: partial (need the mask_mod) and "
          "full tiles")
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
      .def("__eq__",
           [](const TileMask& a, const TileMask& b) {
             return a.shape == b.shape && a.row_ptr == b.row_ptr && a.tiles == b.tiles;
           })
      .def("__repr__", [](const TileMask& t) {
        const MaskShape& s = t.shape;
        return "TileMask(tile " + std::to_string(s.tile_q) + "x" + std::to_string(s.tile_k) +
               ", batch " + std::to_string(s.batch) + ", mask_heads " +
               std::to_string(s.mask_heads) + ", seqlen " + std::to_string(s.seqlen_q) + "x" +
               std::to_string(s.seqlen_kv) + (s.causal ? ", causal" : "") + ", density " +
               std::to_string(t.stats().density) + ")";
      });
}

}  // namespace spattn::python
