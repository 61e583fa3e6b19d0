// .npy (format 1.0/2.0/3.0 read, 1.0/2.0 write) and .npz (ZIP; stored write, stored/deflate read) files.
#include "spattn/npy.hpp"

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "spattn/error.hpp"

namespace spattn {
namespace {

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "cannot open '", path, "' for reading");
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  require(!in.bad(), "error reading '", path, "'");
  return bytes;
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  require(out.good(), "cannot open '", path, "' for writing");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  require(out.good(), "error writing '", path, "'");
}

std::size_t descr_item_size(const std::string& descr, const std::string& what) {
  require(descr.size() >= 3, what, ": unsupported dtype '", descr, "'");
  require(descr[0] == '<' || descr[0] == '|' || descr[0] == '=', what, ": dtype '", descr,
          "' is not little-endian");
  const char kind = descr[1];
  require(kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b' || kind == 'V', what, ": unsupported dtype '",
          descr, "'");
  std::size_t size = 0;
  for (std::size_t i = 2; i < descr.size(); ++i) {
    require(descr[i] >= '0' && descr[i] <= '9' && size < 1000, what, ": unsupported dtype '", descr, "'");
    size = size * 10 + static_cast<std::size_t>(descr[i] - '0');
  }
  require(size == 1 || size == 2 || size == 4 || size == 8, what, ": unsupported dtype '", descr, "'");
  return size;
}

/// Value of key `key` in a Python-literal dict header, as raw text up to the next top-level ',' or '}'.
std::string header_value(const std::string& header, const std::string& key, const std::string& what) {
  std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) at = header.find("\"" + key + "\"");
  require(at != std::string::npos, what, ": header lacks '", key, "'");
  at = header.find(':', at);
  require(at != std::string::npos, what, ": malformed header near '", key, "'");
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  std::size_t end = at;
  int depth = 0;
  while (end < header.size()) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    ++end;
  }
  require(end < header.size() && depth == 0, what, ": malformed header near '", key, "'");
  return header.substr(at, end - at);
}

}  // namespace

std::int64_t NpyArray::numel() const {
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  return n;
}

std::size_t NpyArray::item_size() const { return descr_item_size(descr, "npy"); }

template <class T>
std::string npy_descr() {
  if constexpr (std::is_same_v<T, float>) return "<f4";
  else if constexpr (std::is_same_v<T, double>) return "<f8";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "<i4";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "<i8";
  else if constexpr (std::is_same_v<T, std::uint16_t>) return "<u2";
  else return "|u1";
}

template <class T>
NpyArray NpyArray::from_vector(const std::vector<T>& values, std::vector<std::int64_t> shape) {
  NpyArray a;
  a.descr = npy_descr<T>();
  a.shape = std::move(shape);
  require(a.numel() == static_cast<std::int64_t>(values.size()), "npy: ", values.size(),
          " values do not fill shape of ", a.numel(), " elements");
  a.data.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
  return a;
}

template <class T>
std::vector<T> NpyArray::to_vector() const {
  const bool ok = descr == npy_descr<T>() || (std::is_same_v<T, std::uint8_t> && descr == "|b1");
  require(ok, "npy: array of dtype ", descr, " where ", npy_descr<T>(), " was expected");
  std::vector<T> out(data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
  return out;
}

std::int64_t NpyArray::to_int64_scalar() const {
  require(numel() == 1, "npy: expected a scalar, got ", numel(), " elements");
  const std::size_t size = item_size();
  require(descr[1] == 'i' || descr[1] == 'u' || descr[1] == 'b', "npy: expected an integer scalar, got ", descr);
  require(data.size() >= size, "npy: scalar data truncated");
  if (descr[1] == 'i') {
    if (size == 8) { std::int64_t v; std::memcpy(&v, data.data(), 8); return v; }
    if (size == 4) { std::int32_t v; std::memcpy(&v, data.data(), 4); return v; }
    if (size == 2) { std::int16_t v; std::memcpy(&v, data.data(), 2); return v; }
    return static_cast<std::int8_t>(data[0]);
  }
  std::uint64_t v = 0;
  std::memcpy(&v, data.data(), size);  // little-endian
  require(v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), "npy: scalar too large");
  return static_cast<std::int64_t>(v);
}

#define SPATTN_NPY_INSTANTIATE(T)                                                              \
  template std::string npy_descr<T>();                                                         \
  template NpyArray NpyArray::from_vector<T>(const std::vector<T>&, std::vector<std::int64_t>); \
  template std::vector<T> NpyArray::to_vector<T>() const;
SPATTN_NPY_INSTANTIATE(float)
SPATTN_NPY_INSTANTIATE(double)
SPATTN_NPY_INSTANTIATE(std::int32_t)
SPATTN_NPY_INSTANTIATE(std::int64_t)
SPATTN_NPY_INSTANTIATE(std::uint16_t)
SPATTN_NPY_INSTANTIATE(std::uint8_t)
#undef SPATTN_NPY_INSTANTIATE

std::vector<std::uint8_t> serialize_npy(const NpyArray& a) {
  require(static_cast<std::int64_t>(a.data.size()) == a.numel() * static_cast<std::int64_t>(a.item_size()),
          "npy: data size does not match the shape");
  std::ostringstream h;
  h << "{'descr': '" << a.descr << "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < a.shape.size(); ++i) h << a.shape[i] << (a.shape.size() == 1 || i + 1 < a.shape.size() ? "," : "") << (i + 1 < a.shape.size() ? " " : "");
  h << "), }";
  std::string header = h.str();
  const bool v2 = header.size() + 11 > 65535;
  const std::size_t prefix = v2 ? 12 : 10;
  const std::size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');
  std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(v2 ? 2 : 1), 0};
  const std::size_t len = header.size();
  out.push_back(static_cast<std::uint8_t>(len & 0xff));
  out.push_back(static_cast<std::uint8_t>((len >> 8) & 0xff));
  if (v2) {
    out.push_back(static_cast<std::uint8_t>((len >> 16) & 0xff));
    out.push_back(static_cast<std::uint8_t>((len >> 24) & 0xff));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), a.data.begin(), a.data.end());
  return out;
}

NpyArray parse_npy(const std::uint8_t* bytes, std::size_t size, const std::string& what) {
  require(size >= 10 && std::memcmp(bytes, "\x93NUMPY", 6) == 0, what, ": not a .npy file (bad magic)");
  const std::uint8_t major = bytes[6];
  require(major >= 1 && major <= 3, what, ": unsupported .npy version ", int(major));
  std::size_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = bytes[8] | (std::size_t{bytes[9]} << 8);
    prefix = 10;
  } else {
    require(size >= 12, what, ": truncated .npy header");
    header_len = bytes[8] | (std::size_t{bytes[9]} << 8) | (std::size_t{bytes[10]} << 16) | (std::size_t{bytes[11]} << 24);
    prefix = 12;
  }
  require(header_len <= size - prefix, what, ": truncated .npy header");
  const std::string header(reinterpret_cast<const char*>(bytes + prefix), header_len);
  NpyArray a;
  std::string descr = header_value(header, "descr", what);
  require(descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"') && descr.back() == descr.front(), what,
          ": malformed descr ", descr);
  a.descr = descr.substr(1, descr.size() - 2);
  if (a.descr.size() >= 2 && a.descr[0] == '=') a.descr[0] = '<';
  if (a.descr.size() >= 2 && a.descr[0] == '|' && a.descr != "|u1" && a.descr != "|b1" && a.descr != "|i1")
    fail(what, ": unsupported dtype '", a.descr, "'");
  const std::size_t item = descr_item_size(a.descr, what);
  const std::string fortran = header_value(header, "fortran_order", what);
  require(fortran == "False", what, ": Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  std::string shape = header_value(header, "shape", what);
  require(shape.size() >= 2 && shape.front() == '(' && shape.back() == ')', what, ": malformed shape ", shape);
  shape = shape.substr(1, shape.size() - 2);
  std::int64_t numel = 1;
  std::size_t i = 0;
  while (i < shape.size()) {
    while (i < shape.size() && (shape[i] == ' ' || shape[i] == ',')) ++i;
    if (i >= shape.size()) break;
    std::int64_t e = 0;
    bool digits = false;
    while (i < shape.size() && shape[i] >= '0' && shape[i] <= '9') {
      require(e < (std::int64_t{1} << 40), what, ": shape too large");
      e = e * 10 + (shape[i] - '0');
      ++i;
      digits = true;
    }
    require(digits, what, ": malformed shape (", shape, ")");
    a.shape.push_back(e);
    require(e == 0 || numel <= (std::int64_t{1} << 40) / e, what, ": shape too large");
    numel *= e;
  }
  const std::size_t data_bytes = static_cast<std::size_t>(numel) * item;
  require(size - prefix - header_len == data_bytes, what, ": data holds ", size - prefix - header_len,
          " bytes, the shape needs ", data_bytes, " (truncated or corrupt file)");
  a.data.assign(bytes + prefix + header_len, bytes + size);
  return a;
}

NpyArray read_npy(const std::string& path) {
  const auto bytes = read_file(path);
  return parse_npy(bytes.data(), bytes.size(), "'" + path + "'");
}

void write_npy(const std::string& path, const NpyArray& array) { write_file(path, serialize_npy(array)); }

namespace {

void put16(std::vector<std::uint8_t>& o, std::uint32_t v) {
  o.push_back(static_cast<std::uint8_t>(v & 0xff));
  o.push_back(static_cast<std::uint8_t>((v >> 8) & 0xff));
}
void put32(std::vector<std::uint8_t>& o, std::uint32_t v) {
  put16(o, v & 0xffff);
  put16(o, v >> 16);
}
std::uint32_t get16(const std::uint8_t* p) { return p[0] | (std::uint32_t{p[1]} << 8); }
std::uint32_t get32(const std::uint8_t* p) { return get16(p) | (get16(p + 2) << 16); }

}  // namespace

void write_npz(const std::string& path, const std::map<std::string, NpyArray>& arrays) {
  std::vector<std::uint8_t> out, central;
  std::uint16_t count = 0;
  for (const auto& [name, array] : arrays) {
    const std::vector<std::uint8_t> body = serialize_npy(array);
    const std::string member = name + ".npy";
    require(body.size() < 0xffffffffu && out.size() < 0xffffffffu, "npz '", path, "': archives over 4 GiB are not supported");
    const auto crc = static_cast<std::uint32_t>(crc32(0L, body.data(), static_cast<uInt>(body.size())));
    const auto offset = static_cast<std::uint32_t>(out.size());
    for (auto* o : {&out, &central}) {
      put32(*o, o == &out ? 0x04034b50u : 0x02014b50u);
      if (o == &central) put16(*o, 20);  // version made by
      put16(*o, 20);                       // version needed
      put16(*o, 0);                        // flags
      put16(*o, 0);                        // method: stored
      put16(*o, 0);                        // time
      put16(*o, 0x21);                     // date (1980-01-01)
      put32(*o, crc);
      put32(*o, static_cast<std::uint32_t>(body.size()));
      put32(*o, static_cast<std::uint32_t>(body.size()));
      put16(*o, static_cast<std::uint32_t>(member.size()));
      put16(*o, 0);  // extra
      if (o == &central) {
        put16(*o, 0);  // comment
        put16(*o, 0);  // disk
        put16(*o, 0);  // internal attributes
        put32(*o, 0);  // external attributes
        put32(*o, offset);
      }
      o->insert(o->end(), member.begin(), member.end());
    }
    out.insert(out.end(), body.begin(), body.end());
    ++count;
  }
  const auto central_offset = static_cast<std::uint32_t>(out.size());
  out.insert(out.end(), central.begin(), central.end());
  put32(out, 0x06054b50u);
  put16(out, 0);
  put16(out, 0);
  put16(out, count);
  put16(out, count);
  put32(out, static_cast<std::uint32_t>(central.size()));
  put32(out, central_offset);
  put16(out, 0);
  write_file(path, out);
}

std::map<std::string, NpyArray> read_npz(const std::string& path) {
  const auto bytes = read_file(path);
  const std::string what = "npz '" + path + "'";
  const std::size_t n = bytes.size();
  require(n >= 22, what, ": not a ZIP archive (too short)");
  std::size_t eocd = n - 22;
  while (true) {  // the end record may be followed by a comment of up to 64 KiB
    if (get32(&bytes[eocd]) == 0x06054b50u) break;
    require(eocd > 0 && n - eocd < 22 + 65536, what, ": not a ZIP archive (no end record)");
    --eocd;
  }
  const std::uint32_t entries = get16(&bytes[eocd + 10]);
  std::size_t at = get32(&bytes[eocd + 16]);
  std::map<std::string, NpyArray> out;
  for (std::uint32_t e = 0; e < entries; ++e) {
    require(at + 46 <= eocd && get32(&bytes[at]) == 0x02014b50u, what, ": corrupt central directory");
    const std::uint32_t method = get16(&bytes[at + 10]);
    const std::uint32_t crc = get32(&bytes[at + 16]);
    const std::size_t csize = get32(&bytes[at + 20]), usize = get32(&bytes[at + 24]);
    const std::size_t name_len = get16(&bytes[at + 28]), extra_len = get16(&bytes[at + 30]),
                      comment_len = get16(&bytes[at + 32]);
    const std::size_t local = get32(&bytes[at + 42]);
    require(at + 46 + name_len <= eocd, what, ": corrupt central directory");
    std::string name(reinterpret_cast<const char*>(&bytes[at + 46]), name_len);
    at += 46 + name_len + extra_len + comment_len;
    require(local + 30 <= n && get32(&bytes[local]) == 0x04034b50u, what, ": corrupt entry '", name, "'");
    const std::size_t data_at = local + 30 + get16(&bytes[local + 26]) + get16(&bytes[local + 28]);
    require(data_at <= n && csize <= n - data_at, what, ": entry '", name, "' is truncated");
    std::vector<std::uint8_t> body;
    if (method == 0) {
      require(csize == usize, what, ": entry '", name, "' has inconsistent sizes");
      body.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_at),
                  bytes.begin() + static_cast<std::ptrdiff_t>(data_at + csize));
    } else if (method == 8) {
      body.resize(usize);
      z_stream s{};
      require(inflateInit2(&s, -MAX_WBITS) == Z_OK, what, ": zlib init failed");
      s.next_in = const_cast<Bytef*>(&bytes[data_at]);
      s.avail_in = static_cast<uInt>(csize);
      s.next_out = body.data();
      s.avail_out = static_cast<uInt>(usize);
      const int rc = inflate(&s, Z_FINISH);
      const std::size_t produced = s.total_out;
      inflateEnd(&s);
      require(rc == Z_STREAM_END && produced == usize, what, ": entry '", name, "' does not inflate");
    } else {
      fail(what, ": entry '", name, "' uses unsupported compression method ", method);
    }
    require(static_cast<std::uint32_t>(crc32(0L, body.data(), static_cast<uInt>(body.size()))) == crc, what,
            ": CRC mismatch in entry '", name, "'");
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    out[name] = parse_npy(body.data(), body.size(), what + " entry '" + name + "'");
  }
  return out;
}

}  // namespace spattn
