// NumPy .npy and .npz files: read and write, no Python needed. Used for --q/--k/--v inputs, --out outputs
// and TileMask files. .npz archives are written uncompressed (ZIP "stored"); reading accepts stored and
// deflated members (np.savez and np.savez_compressed). Little-endian, C order; Fortran-order arrays are
// rejected with a clear error. bf16 has no NumPy dtype: it travels as uint16 bit patterns ('<u2').
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace spattn {

struct NpyArray {
  std::string descr;                ///< NumPy dtype string: "<f4", "<f2", "<u2", "<i4", "<i8", "|u1", "|b1", ...
  std::vector<std::int64_t> shape;  ///< empty for a 0-d scalar
  std::vector<std::uint8_t> data;   ///< raw little-endian element bytes, C order

  std::int64_t numel() const;
  std::size_t item_size() const;  ///< from descr

  template <class T>
  static NpyArray from_vector(const std::vector<T>& values, std::vector<std::int64_t> shape);
  template <class T>
  static NpyArray scalar(T value) {
    return from_vector(std::vector<T>{value}, {});
  }
  /// Elements converted to T (descr must be T's own dtype); throws spattn::Error otherwise.
  template <class T>
  std::vector<T> to_vector() const;
  /// A 0-d or 1-element array as an integer (any integer or bool dtype).
  std::int64_t to_int64_scalar() const;
};

/// NumPy descr of T: float "<f4", double "<f8", int32 "<i4", int64 "<i8", uint16 "<u2", uint8 "|u1".
template <class T>
std::string npy_descr();

std::vector<std::uint8_t> serialize_npy(const NpyArray& array);
/// Parses one .npy image; `what` names the source in error messages.
NpyArray parse_npy(const std::uint8_t* bytes, std::size_t size, const std::string& what);

/// The bytes of a file (a pipe too); throws spattn::Error naming it.
std::vector<std::uint8_t> read_file(const std::string& path);

NpyArray read_npy(const std::string& path);
void write_npy(const std::string& path, const NpyArray& array);
std::map<std::string, NpyArray> read_npz(const std::string& path);
/// Parses one .npz image (the arrays by name, ".npy" dropped); `what` names the source in error messages.
std::map<std::string, NpyArray> parse_npz(const std::vector<std::uint8_t>& bytes, const std::string& what);
void write_npz(const std::string& path, const std::map<std::string, NpyArray>& arrays);

}  // namespace spattn
