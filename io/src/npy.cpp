// .npy (read 1.0/2.0/3.0, write 1.0/2.0) and .npz (ZIP: write stored; read stored or deflated — the ZIP
// container itself is zip.cpp's).
//
// Every byte read is untrusted: each length and offset taken from a file is checked against the
// bytes actually present before it is used, so a malformed file ends in one spattn::Error, never in
// a crash.
#include "spattn/npy.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <type_traits>

#include "spattn/error.hpp"
#include "zip.hpp"

namespace spattn {

// Element bytes are copied between files and memory as they are.
static_assert(std::endian::native == std::endian::little,
              "spattn's .npy I/O assumes a little-endian host");

namespace {

using detail::printable;
using detail::put16;
using detail::put32;

// Strings in a header are dict keys and dtype names; anything longer is not a .npy header.
constexpr std::size_t kMaxHeaderString = 256;

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";  // Python's 1-tuple
  return out + ")";
}

/// The canonical spelling of a supported dtype: '=' (native) is '<' on our little-endian hosts, and
/// one-byte types have no byte order ('|'). Returns "" for anything unsupported.
std::string canonical_descr(const std::string& descr) {
  static constexpr std::string_view kSupported[] = {"<f2", "<f4", "<f8", "|i1", "<i2", "<i4",
                                                    "<i8", "|u1", "<u2", "<u4", "<u8", "|b1"};
  if (descr.size() != 3) return "";
  std::string c = descr;
  if (c[0] == '=') c[0] = '<';
  if (c[2] == '1' && c[0] == '<') c[0] = '|';
  for (std::string_view s : kSupported)
    if (c == s) return c;
  return "";
}

/// Item size of a dtype string; fails with a message that says why NumPy's form is not accepted.
std::size_t checked_item_size(const std::string& descr, const std::string& what) {
  if (!descr.empty() && descr[0] == '>')
    fail(what, ": dtype '", printable(descr),
         "' is big-endian; only little-endian data is supported ",
         "(convert with a.astype(a.dtype.newbyteorder('<')))");
  const std::string c = canonical_descr(descr);
  if (c.empty())
    fail(what, ": unsupported dtype '", printable(descr),
         "' (supported: float16/32/64, int8-64, uint8-64, bool; little-endian)");
  return static_cast<std::size_t>(c[2] - '0');
}

/// a * b for non-negative sizes; fails instead of overflowing.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const std::string& what) {
  if (b != 0 && a > std::numeric_limits<std::int64_t>::max() / b)
    fail(what, ": shape is too large");
  return a * b;
}

std::int64_t checked_numel(const std::vector<std::int64_t>& shape, const std::string& what) {
  std::int64_t n = 1;
  for (std::int64_t e : shape) {
    require(e >= 0, what, ": negative dimension in shape ", shape_text(shape));
    n = checked_mul(n, e, what);
  }
  return n;
}

/// Bytes the data of `shape` x `item` needs; fails past what any file or vector could hold.
std::size_t data_bytes(const std::vector<std::int64_t>& shape, std::size_t item,
                       const std::string& what) {
  const std::int64_t n =
      checked_mul(checked_numel(shape, what), static_cast<std::int64_t>(item), what);
  return static_cast<std::size_t>(n);
}

// ---- .npy header: a Python dict literal, {'descr': '<f4', 'fortran_order': False, 'shape': (2,),
// }

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : text_(text), what_(what) {}

  struct Result {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
  };

  Result parse() {
    Result r;
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_space();
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (have_descr) malformed("duplicate key 'descr'");
        if (peek() == '[' || peek() == '(')
          fail(what_, ": structured (record) dtypes are not supported");
        r.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_fortran) malformed("duplicate key 'fortran_order'");
        r.fortran_order = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        if (have_shape) malformed("duplicate key 'shape'");
        r.shape = int_tuple();
        have_shape = true;
      } else {
        malformed("unexpected key '" + printable(key) + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') malformed("expected ',' or '}'");
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) malformed("text after the closing '}'");
    if (!have_descr) malformed("no 'descr'");
    if (!have_fortran) malformed("no 'fortran_order'");
    if (!have_shape) malformed("no 'shape'");
    return r;
  }

 private:
  [[noreturn]] void malformed(const std::string& why) const {
    fail(what_, ": malformed .npy header (", why, " at offset ", pos_, "): ", printable(text_));
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  void expect(char c) {
    if (peek() != c) malformed(std::string("expected '") + c + "'");
    ++pos_;
  }

  std::string string_literal() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') malformed("expected a quoted string");
    const std::size_t start = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      // Escapes never occur in the keys and dtypes we accept; refusing them keeps the parser
      // simple.
      if (text_[pos_] == '\\' || text_[pos_] == '\n')
        malformed("unsupported character in a string");
      if (pos_ - start > kMaxHeaderString) malformed("string too long");
      ++pos_;
    }
    if (pos_ >= text_.size()) malformed("unterminated string");
    return std::string(text_.substr(start, pos_++ - start));
  }

  bool boolean() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    malformed("'fortran_order' must be True or False");
  }

  std::vector<std::int64_t> int_tuple() {
    std::vector<std::int64_t> shape;
    expect('(');
    skip_space();
    while (peek() != ')') {
      if (peek() < '0' || peek() > '9') malformed("expected a non-negative integer in 'shape'");
      std::int64_t e = 0;
      while (peek() >= '0' && peek() <= '9') {
        const int digit = peek() - '0';
        if (e > (std::numeric_limits<std::int64_t>::max() - digit) / 10)
          malformed("dimension too large");
        e = e * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long, as old NumPy wrote it
      shape.push_back(e);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != ')') {
        malformed("expected ',' or ')' in 'shape'");
      }
    }
    ++pos_;  // ')'
    return shape;
  }

  std::string_view text_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

// ---- files ----

std::ofstream open_for_writing(const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  require(out.is_open(), "cannot open '", path, "' for writing");
  return out;
}

void write_bytes(std::ofstream& out, const std::vector<std::uint8_t>& bytes) {
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void finish_writing(std::ofstream& out, const std::string& path) {
  out.close();
  require(!out.fail(), "error writing '", path, "'");
}

}  // namespace

// ---- reading files ----

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail("cannot open '", path, "' for reading (a directory)");
  std::ifstream in(path, std::ios::binary);
  require(in.is_open(), "cannot open '", path, "' for reading");
  std::vector<std::uint8_t> bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size >= 0 && in.good()) {
    bytes.resize(static_cast<std::size_t>(size));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    require(in.gcount() == static_cast<std::streamsize>(bytes.size()), "error reading '", path,
            "'");
  } else {  // not seekable (a pipe): read in chunks
    in.clear();
    char chunk[1 << 16];
    while (in.read(chunk, sizeof chunk) || in.gcount() > 0)
      bytes.insert(bytes.end(), chunk, chunk + in.gcount());
    require(!in.bad(), "error reading '", path, "'");
  }
  return bytes;
}

// ---- NpyArray ----

std::int64_t NpyArray::numel() const { return checked_numel(shape, "npy array"); }

std::size_t NpyArray::item_size() const { return checked_item_size(descr, "npy array"); }

template <class T>
std::string npy_descr() {
  if constexpr (std::is_same_v<T, float>)
    return "<f4";
  else if constexpr (std::is_same_v<T, double>)
    return "<f8";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "<i4";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "<i8";
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return "<u2";
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return "|u1";
  else
    static_assert(sizeof(T) == 0, "no NumPy dtype for this type");
}

template <class T>
NpyArray NpyArray::from_vector(const std::vector<T>& values, std::vector<std::int64_t> shape) {
  NpyArray a;
  a.descr = npy_descr<T>();
  a.shape = std::move(shape);
  const std::int64_t n = a.numel();
  require(n == static_cast<std::int64_t>(values.size()), "npy array: ", values.size(),
          " values for shape ", shape_text(a.shape), " (", n, " elements)");
  a.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

template <class T>
std::vector<T> NpyArray::to_vector() const {
  const std::string want = npy_descr<T>();
  const bool ok = descr == want || (std::is_same_v<T, std::uint8_t> && descr == "|b1");
  require(ok, "npy array: dtype '", printable(descr), "' where '", want, "' was expected");
  const std::size_t bytes = data_bytes(shape, sizeof(T), "npy array");
  require(data.size() == bytes, "npy array: ", data.size(), " data bytes for shape ",
          shape_text(shape), " of dtype '", want, "', which needs ", bytes);
  std::vector<T> out(bytes / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), data.data(), bytes);
  return out;
}

std::int64_t NpyArray::to_int64_scalar() const {
  const std::int64_t n = numel();
  require(n == 1, "npy array: expected a single integer, got shape ", shape_text(shape), " (", n,
          " elements)");
  const std::string c = canonical_descr(descr);
  require(!c.empty() && (c[1] == 'i' || c[1] == 'u' || c[1] == 'b'),
          "npy array: expected an integer, got dtype '", printable(descr), "'");
  const std::size_t size = static_cast<std::size_t>(c[2] - '0');
  require(data.size() == size, "npy array: ", data.size(), " data bytes for one '", c, "' element");
  std::uint64_t bits = 0;
  for (std::size_t i = 0; i < size; ++i) bits |= std::uint64_t{data[i]} << (8 * i);
  if (c[1] == 'i') {
    const unsigned shift =
        static_cast<unsigned>(64 - 8 * size);  // sign-extend from the item's width
    return static_cast<std::int64_t>(bits << shift) >> shift;
  }
  require(bits <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
          "npy array: value ", bits, " does not fit int64");
  return static_cast<std::int64_t>(bits);
}

#define SPATTN_NPY_INSTANTIATE(T)                                                               \
  template std::string npy_descr<T>();                                                          \
  template NpyArray NpyArray::from_vector<T>(const std::vector<T>&, std::vector<std::int64_t>); \
  template std::vector<T> NpyArray::to_vector<T>() const;
SPATTN_NPY_INSTANTIATE(float)
SPATTN_NPY_INSTANTIATE(double)
SPATTN_NPY_INSTANTIATE(std::int32_t)
SPATTN_NPY_INSTANTIATE(std::int64_t)
SPATTN_NPY_INSTANTIATE(std::uint16_t)
SPATTN_NPY_INSTANTIATE(std::uint8_t)
#undef SPATTN_NPY_INSTANTIATE

// ---- .npy ----

std::vector<std::uint8_t> serialize_npy(const NpyArray& array) {
  const std::string what = "npy array";
  const std::size_t item = checked_item_size(array.descr, what);
  const std::size_t bytes = data_bytes(array.shape, item, what);
  require(array.data.size() == bytes, what, ": ", array.data.size(), " data bytes for shape ",
          shape_text(array.shape), " of dtype '", array.descr, "', which needs ", bytes);
  std::string header = "{'descr': '" + canonical_descr(array.descr) +
                       "', 'fortran_order': False, 'shape': " + shape_text(array.shape) + ", }";
  // NumPy pads the header with spaces and a final '\n' so the data starts 64-byte aligned;
  // version 1.0 stores the header length in 16 bits, 2.0 in 32.
  auto padded = [&](std::size_t prefix) {
    return (prefix + header.size() + 1 + 63) / 64 * 64 - prefix;
  };
  const bool v1 = padded(10) <= 0xFFFF;
  const std::size_t prefix = v1 ? 10 : 12;
  const std::size_t header_len = padded(prefix);
  require(header_len <= 0xFFFFFFFFu, what, ": shape ", shape_text(array.shape),
          " is too long for a header");
  header.append(header_len - header.size() - 1, ' ');
  header.push_back('\n');

  std::vector<std::uint8_t> out = {
      0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(v1 ? 1 : 2), 0};
  out.reserve(prefix + header_len + bytes);
  if (v1) {
    put16(out, header_len);
  } else {
    put32(out, header_len);
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), array.data.begin(), array.data.end());
  return out;
}

NpyArray parse_npy(const std::uint8_t* bytes, std::size_t size, const std::string& what) {
  require(bytes != nullptr || size == 0, what, ": no data");
  static constexpr std::uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  require(
      std::memcmp(bytes == nullptr ? kMagic : bytes, kMagic, std::min<std::size_t>(size, 6)) == 0,
      what, ": not a .npy file (no \\x93NUMPY magic)");
  require(size >= 10, what, ": truncated .npy file (", size, " bytes, shorter than the preamble)");
  const unsigned major = bytes[6], minor = bytes[7];
  require(major >= 1 && major <= 3 && minor == 0, what, ": unsupported .npy format version ", major,
          ".", minor);
  const std::size_t prefix = major == 1 ? 10 : 12;
  require(size >= prefix, what, ": truncated .npy file (", size,
          " bytes, shorter than the preamble)");
  std::size_t header_len = bytes[8] | (std::size_t{bytes[9]} << 8);
  if (major >= 2) header_len |= (std::size_t{bytes[10]} << 16) | (std::size_t{bytes[11]} << 24);
  require(header_len <= size - prefix, what, ": truncated .npy header (", header_len,
          " bytes announced, ", size - prefix, " present)");

  const std::string_view text(reinterpret_cast<const char*>(bytes + prefix), header_len);
  HeaderParser::Result h = HeaderParser(text, what).parse();
  const std::size_t item = checked_item_size(h.descr, what);
  require(!h.fortran_order, what,
          ": Fortran-order (column-major) arrays are not supported; save np.ascontiguousarray(a)");

  NpyArray a;
  a.descr = canonical_descr(h.descr);
  a.shape = std::move(h.shape);
  const std::size_t needed = data_bytes(a.shape, item, what);
  const std::size_t present = size - prefix - header_len;
  require(present >= needed, what, ": truncated data (shape ", shape_text(a.shape), " of dtype '",
          a.descr, "' needs ", needed, " bytes, the file holds ", present, ")");
  require(present == needed, what, ": ", present - needed, " bytes after the data of shape ",
          shape_text(a.shape), " of dtype '", a.descr, "' (corrupt file or wrong shape)");
  a.data.assign(bytes + prefix + header_len, bytes + size);
  return a;
}

NpyArray read_npy(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file(path);
  return parse_npy(bytes.data(), bytes.size(), "'" + path + "'");
}

void write_npy(const std::string& path, const NpyArray& array) {
  std::vector<std::uint8_t> bytes;
  try {
    bytes = serialize_npy(array);
  } catch (const Error& e) {
    fail("'", path, "': ", e.what());
  }
  std::ofstream out = open_for_writing(path);
  write_bytes(out, bytes);
  finish_writing(out, path);
}

// ---- .npz ----

void write_npz(const std::string& path, const std::map<std::string, NpyArray>& arrays) {
  const std::string what = "npz '" + path + "'";
  require(arrays.size() < 0xFFFF, what, ": ", arrays.size(), " arrays are more than a ZIP archive ",
          "without ZIP64 holds");
  // Check every member before creating the file, so a bad array leaves no half-written archive.
  for (const auto& [name, array] : arrays) {
    require(name.size() + 4 <= 0xFFFF, what, ": array name of ", name.size(),
            " characters is too long");
    try {
      const std::size_t bytes = data_bytes(array.shape, array.item_size(), "npy array");
      require(array.data.size() == bytes, "npy array: ", array.data.size(),
              " data bytes for shape ", shape_text(array.shape), " of dtype '", array.descr,
              "', which needs ", bytes);
    } catch (const Error& e) {
      fail(what, ": array '", printable(name), "': ", e.what());
    }
  }
  std::ofstream out = open_for_writing(path);
  detail::ZipWriter zip(out, what + ": archive over 4 GiB (ZIP64 is not supported)");
  for (const auto& [name, array] : arrays) zip.add(name + ".npy", serialize_npy(array));
  zip.finish();
  finish_writing(out, path);
}

std::map<std::string, NpyArray> parse_npz(const std::vector<std::uint8_t>& bytes,
                                          const std::string& what) {
  std::map<std::string, NpyArray> arrays;
  detail::for_each_zip_member(bytes, what, [&](const std::string& name, const std::vector<std::uint8_t>& body,
                                               const std::string& member) {
    std::string key = name;
    if (key.size() >= 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
    require(arrays.count(key) == 0, member, ": duplicate array name '", printable(key), "'");
    arrays.emplace(key, parse_npy(body.data(), body.size(), member));
  });
  return arrays;
}

std::map<std::string, NpyArray> read_npz(const std::string& path) {
  return parse_npz(read_file(path), "npz '" + path + "'");
}

}  // namespace spattn
