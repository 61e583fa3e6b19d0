// .npy/.npz: round trips of every dtype and rank through bytes and files, hand-written NumPy bytes,
// ZIP archives built here by hand (stored, deflated, Python-zipfile style ZIP64 local headers), and
// rejection of truncated, corrupt and unsupported files with spattn::Error rather than a crash.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/npy.hpp"

namespace spattn::test {
namespace {

using Bytes = std::vector<std::uint8_t>;
using Shape = std::vector<std::int64_t>;


Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

void write_file(const std::string& path, const Bytes& bytes, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(size));
  REQUIRE(out.good());
}
void write_file(const std::string& path, const Bytes& bytes) {
  write_file(path, bytes, bytes.size());
}

Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// A .npy image from header text given verbatim (no padding added), as other writers may produce.
Bytes npy_image(const std::string& header, int major, const Bytes& data) {
  const std::size_t len = header.size();
  std::string b = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) b += static_cast<char>((len >> (8 * i)) & 0xff);
  // Built as a string: GCC 12 -O3 warns (-Wstringop-overflow, falsely) on vector::insert here.
  b += header;
  b.append(data.begin(), data.end());
  return bytes_of(b);
}

std::int64_t product(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  return n;
}

template <class T>
std::vector<T> sample_values(std::int64_t n) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      v[i] = static_cast<T>(uniform(-1e6, 1e6));
    } else {
      // Extremes first: they catch sign and width mistakes.
      const T special[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T{0},
                           T{1}};
      v[i] = i < 4 ? special[i]
                   : static_cast<T>(std::uniform_int_distribution<long long>(
                         static_cast<long long>(std::numeric_limits<T>::min() / 2),
                         static_cast<long long>(std::numeric_limits<T>::max() / 2))(rng()));
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    if (n >= 3) {
      v[0] = -T{0};  // differs from +0 only in its bytes
      v[1] = std::numeric_limits<T>::infinity();
      v[2] = std::numeric_limits<T>::denorm_min();
    }
  }
  return v;
}

std::size_t header_length(const Bytes& npy) {
  return npy[6] == 1 ? std::size_t{npy[8]} | (std::size_t{npy[9]} << 8)
                     : std::size_t{npy[8]} | (std::size_t{npy[9]} << 8) |
                           (std::size_t{npy[10]} << 16) | (std::size_t{npy[11]} << 24);
}

template <class T>
void check_round_trips(const TempDir& dir, const char* expected_descr) {
  CAPTURE(expected_descr);
  CHECK(npy_descr<T>() == expected_descr);
  for (const Shape& shape : {Shape{}, Shape{7}, Shape{2, 3, 4}, Shape{0}, Shape{3, 0, 2}}) {
    CAPTURE(shape.size());
    const std::vector<T> values = sample_values<T>(product(shape));
    const NpyArray a = NpyArray::from_vector(values, shape);
    CHECK(a.descr == expected_descr);
    CHECK(a.item_size() == sizeof(T));
    CHECK(a.numel() == product(shape));
    REQUIRE(a.data.size() == values.size() * sizeof(T));

    const Bytes image = serialize_npy(a);
    CHECK(image[6] == 1);
    CHECK((10 + header_length(image)) % 64 == 0);  // data 64-byte aligned, as NumPy writes it
    CHECK(image.size() == 10 + header_length(image) + a.data.size());
    const NpyArray from_bytes = parse_npy(image.data(), image.size(), "bytes");
    CHECK(from_bytes.descr == expected_descr);
    CHECK(from_bytes.shape == shape);
    CHECK(from_bytes.data == a.data);
    CHECK(from_bytes.to_vector<T>() == values);

    const std::string path = dir.file("round_trip.npy");
    write_npy(path, a);
    CHECK(read_file(path) == image);
    const NpyArray from_file = read_npy(path);
    CHECK(from_file.descr == expected_descr);
    CHECK(from_file.shape == shape);
    CHECK(from_file.data == a.data);
    CHECK(from_file.to_vector<T>() == values);
  }
}

TEST_CASE(
    "npy: every dtype round trips as 0-d, 1-d, 3-d and empty arrays through bytes and files") {
  const TempDir dir("spattn_test_npy_");
  check_round_trips<float>(dir, "<f4");
  check_round_trips<double>(dir, "<f8");
  check_round_trips<std::int32_t>(dir, "<i4");
  check_round_trips<std::int64_t>(dir, "<i8");
  check_round_trips<std::uint16_t>(dir, "<u2");
  check_round_trips<std::uint8_t>(dir, "|u1");
  CHECK(NpyArray::scalar(2.5).to_vector<double>() == std::vector<double>{2.5});
  CHECK(NpyArray::scalar<std::int64_t>(-9).shape.empty());
}

TEST_CASE("npy: the header is byte-for-byte what NumPy writes") {
  const NpyArray a = NpyArray::from_vector(std::vector<float>{1.5f, -2.0f}, {2});
  const Bytes image = serialize_npy(a);
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  REQUIRE(image.size() == 128 + 8);
  CHECK(std::memcmp(image.data(), "\x93NUMPY\x01\x00\x76\x00", 10) == 0);  // 0x76 = 118 = 128 - 10
  CHECK(std::string(image.begin() + 10, image.begin() + 10 + static_cast<long>(dict.size())) ==
        dict);
  for (std::size_t i = 10 + dict.size(); i < 127; ++i) CHECK(image[i] == ' ');
  CHECK(image[127] == '\n');
  CHECK(std::memcmp(&image[128], "\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8) == 0);  // 1.5f, -2.0f

  const Bytes three = serialize_npy(NpyArray::from_vector(std::vector<std::uint8_t>(6), {1, 2, 3}));
  const std::string dict3 = "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2, 3), }";
  CHECK(std::string(three.begin() + 10, three.begin() + 10 + static_cast<long>(dict3.size())) ==
        dict3);
  const Bytes zero_d = serialize_npy(NpyArray::scalar<std::int64_t>(1));
  CHECK(std::string(zero_d.begin() + 10, zero_d.end() - 8)
            .rfind("{'descr': '<i8', 'fortran_order': False, 'shape': (), }   ", 0) == 0);
}

TEST_CASE("npy: a hand-written file parses to exact values") {
  // int16 [2, 2] = {{1, -1}, {-32768, 258}}, header as NumPy 1.x wrote it (58 spaces of padding).
  const std::string dict = "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 2), }";
  REQUIRE(dict.size() == 59);
  const std::string file = std::string("\x93NUMPY\x01\x00", 8) + std::string("\x76\x00", 2) + dict +
                           std::string(58, ' ') + "\n" +
                           std::string("\x01\x00\xff\xff\x00\x80\x02\x01", 8);
  REQUIRE(file.size() == 128 + 8);
  const Bytes bytes = bytes_of(file);
  const NpyArray a = parse_npy(bytes.data(), bytes.size(), "hand-written");
  CHECK(a.descr == "<i2");
  CHECK(a.shape == Shape{2, 2});
  CHECK(a.numel() == 4);
  CHECK(a.item_size() == 2);
  REQUIRE(a.data.size() == 8);
  CHECK(a.data == Bytes{0x01, 0x00, 0xff, 0xff, 0x00, 0x80, 0x02, 0x01});
  CHECK_THROWS_WITH_AS(a.to_vector<std::int32_t>(), doctest::Contains("'<i2'"), Error);

  // float64 scalar 0.1 and an int64 1-d array, format 2.0, double quotes, odd spacing and key
  // order.
  const Bytes scalar =
      npy_image("{\"shape\" :( ) ,\"descr\":\"<f8\",  \"fortran_order\":False}  \n", 2,
                {0x9a, 0x99, 0x99, 0x99, 0x99, 0x99, 0xb9, 0x3f});
  const NpyArray s = parse_npy(scalar.data(), scalar.size(), "scalar");
  CHECK(s.shape.empty());
  CHECK(s.to_vector<double>() == std::vector<double>{0.1});
  const Bytes vec =
      npy_image("{'descr':'<i8','fortran_order':False,'shape':(2 ,)}\n", 1,
                {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 5, 0, 0, 0, 0, 0, 0, 0});
  CHECK(parse_npy(vec.data(), vec.size(), "vec").to_vector<std::int64_t>() ==
        std::vector<std::int64_t>{-2, 5});
  // Python 2 NumPy wrote longs ("3L"); format 3.0 differs from 2.0 only in the header's encoding.
  const Bytes old =
      npy_image("{'descr': '|u1', 'fortran_order': False, 'shape': (3L,), }\n", 3, {4, 5, 6});
  CHECK(parse_npy(old.data(), old.size(), "old").to_vector<std::uint8_t>() == Bytes{4, 5, 6});
  // '=' (native) and '<' on one-byte types are normalized to the spelling to_vector expects.
  const Bytes lt_u1 =
      npy_image("{'descr': '<u1', 'fortran_order': False, 'shape': (1,), }\n", 1, {9});
  CHECK(parse_npy(lt_u1.data(), lt_u1.size(), "<u1").descr == "|u1");
  const Bytes eq_b1 =
      npy_image("{'descr': '=b1', 'fortran_order': False, 'shape': (), }\n", 1, {1});
  CHECK(parse_npy(eq_b1.data(), eq_b1.size(), "=b1").descr == "|b1");
  const Bytes native =
      npy_image("{'descr': '=u2', 'fortran_order': False, 'shape': (1,), }\n", 1, {1, 2});
  CHECK(parse_npy(native.data(), native.size(), "native").to_vector<std::uint16_t>() ==
        std::vector<std::uint16_t>{0x0201});
}

TEST_CASE(
    "npy: unsupported layouts, dtypes and malformed headers are rejected with one-line errors") {
  const Bytes eight = {1, 2, 3, 4, 5, 6, 7, 8};
  auto parse = [](const Bytes& b) { return parse_npy(b.data(), b.size(), "'x.npy'"); };
  const Bytes fortran =
      npy_image("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n", 1, eight);
  CHECK_THROWS_WITH_AS(parse(fortran), doctest::Contains("Fortran"), Error);
  const Bytes big =
      npy_image("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", 1, eight);
  CHECK_THROWS_WITH_AS(parse(big), doctest::Contains("big-endian"), Error);
  const Bytes big_i8 =
      npy_image("{'descr': '>i8', 'fortran_order': False, 'shape': (), }\n", 1, eight);
  CHECK_THROWS_WITH_AS(parse(big_i8), doctest::Contains("'x.npy'"), Error);
  const Bytes too_many =
      npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 1, eight);
  CHECK_THROWS_WITH_AS(parse(too_many), doctest::Contains("4 bytes after the data"), Error);
  const Bytes too_few =
      npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", 1, eight);
  CHECK_THROWS_WITH_AS(parse(too_few), doctest::Contains("truncated data"), Error);

  const char* bad_headers[] = {
      "",
      "{",
      "}",
      "'descr': '<f4', 'fortran_order': False, 'shape': (2,)",
      "{'descr': '<f4', 'fortran_order': False}",                             // no shape
      "{'fortran_order': False, 'shape': (2,)}",                              // no descr
      "{'descr': '<f4', 'shape': (2,)}",                                      // no fortran_order
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",  // NumPy refuses too
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} trailing",
      "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
      "{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}",
      "{descr: '<f4', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '|O', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}",
      "{'descr': '<U1', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '|f4', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f16', 'fortran_order': False, 'shape': (1,)}",
      "{'descr': '', 'fortran_order': False, 'shape': (2,)}",
      "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}",
  };
  for (const char* header : bad_headers) {
    CAPTURE(header);
    const Bytes image = npy_image(std::string(header) + "\n", 1, eight);
    try {
      parse(image);
      FAIL("accepted");
    } catch (const Error& e) {
      const std::string message = e.what();
      CHECK(message.rfind("'x.npy': ", 0) == 0);  // names the file first
      CHECK(message.find('\n') == std::string::npos);
    }
  }

  Bytes version =
      npy_image("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 1, eight);
  version[6] = 4;
  CHECK_THROWS_WITH_AS(parse(version), doctest::Contains("version 4.0"), Error);
  version[6] = 1;
  version[7] = 1;
  CHECK_THROWS_WITH_AS(parse(version), doctest::Contains("version 1.1"), Error);
  const Bytes not_npy = bytes_of("PK\x03\x04 not a numpy file at all");
  CHECK_THROWS_WITH_AS(parse(not_npy), doctest::Contains("not a .npy file"), Error);
  CHECK_THROWS_AS(parse_npy(nullptr, 0, "empty"), Error);
  CHECK_THROWS_AS(parse_npy(nullptr, 5, "null"), Error);
}

TEST_CASE("npy: every truncation and every single-byte corruption of a small file is handled") {
  const TempDir dir("spattn_test_npy_");
  const NpyArray a =
      NpyArray::from_vector(std::vector<std::int32_t>{1, -2, 3, -4, 5, -6}, {1, 2, 3});
  const Bytes image = serialize_npy(a);
  const std::string path = dir.file("t.npy");
  for (std::size_t n = 0; n < image.size(); ++n) {
    CAPTURE(n);
    CHECK_THROWS_AS(parse_npy(image.data(), n, "prefix"), Error);
    write_file(path, image, n);
    CHECK_THROWS_AS(read_npy(path), Error);
  }
  // Flipping a byte either breaks the file (Error) or changes padding/data; never a crash
  // (ASan/UBSan).
  for (std::size_t i = 0; i < image.size(); ++i) {
    for (std::uint8_t flip : {std::uint8_t{0x01}, std::uint8_t{0x80}, std::uint8_t{0xff}}) {
      Bytes b = image;
      b[i] ^= flip;
      try {
        const NpyArray p = parse_npy(b.data(), b.size(), "flipped");
        CHECK(p.data.size() == static_cast<std::size_t>(p.numel()) * p.item_size());
      } catch (const Error&) {
      }
    }
  }
  CHECK_THROWS_WITH_AS(read_npy(dir.file("missing.npy")),
                       contains("cannot open '" + dir.file("missing.npy") + "' for reading"),
                       Error);
  CHECK_THROWS_WITH_AS(write_npy(dir.file("no/such/dir/x.npy"), a),
                       doctest::Contains("for writing"), Error);
}

TEST_CASE("npy: conversions check the dtype and size") {
  const NpyArray i4 = NpyArray::from_vector(std::vector<std::int32_t>{1, 2}, {2});
  CHECK_THROWS_WITH_AS(i4.to_vector<std::int64_t>(), doctest::Contains("'<i4'"), Error);
  CHECK_THROWS_WITH_AS(i4.to_vector<std::int64_t>(), doctest::Contains("'<i8'"), Error);
  CHECK_THROWS_AS(i4.to_vector<float>(), Error);
  CHECK_THROWS_AS(NpyArray::from_vector(std::vector<float>(3), {2, 2}), Error);
  CHECK_THROWS_AS(NpyArray::from_vector(std::vector<float>(3), {-1, -3}), Error);

  NpyArray bools;
  bools.descr = "|b1";
  bools.shape = {3};
  bools.data = {1, 0, 1};
  CHECK(bools.to_vector<std::uint8_t>() == Bytes{1, 0, 1});
  CHECK_THROWS_AS(bools.to_int64_scalar(), Error);  // three elements
  bools.shape = {3, 1};
  bools.data.pop_back();  // inconsistent with its shape
  CHECK_THROWS_AS(bools.to_vector<std::uint8_t>(), Error);
  CHECK_THROWS_AS(serialize_npy(bools), Error);

  auto scalar = [](const std::string& descr, Bytes data, Shape shape = {}) {
    NpyArray a;
    a.descr = descr;
    a.shape = std::move(shape);
    a.data = std::move(data);
    return a.to_int64_scalar();
  };
  CHECK(scalar("|i1", {0xfe}) == -2);
  CHECK(scalar("|u1", {0xfe}) == 254);
  CHECK(scalar("|b1", {1}) == 1);
  CHECK(scalar("<i2", {0x00, 0x80}) == -32768);
  CHECK(scalar("<u2", {0x00, 0x80}) == 32768);
  CHECK(scalar("<i4", {0xff, 0xff, 0xff, 0xff}, {1}) == -1);
  CHECK(scalar("<u4", {0xff, 0xff, 0xff, 0xff}, {1, 1}) == 4294967295LL);
  CHECK(scalar("<i8", {0, 0, 0, 0, 0, 0, 0, 0x80}) == std::numeric_limits<std::int64_t>::min());
  CHECK(scalar("<u8", {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}) ==
        std::numeric_limits<std::int64_t>::max());
  CHECK_THROWS_AS(scalar("<u8", {0, 0, 0, 0, 0, 0, 0, 0x80}), Error);  // does not fit int64
  CHECK_THROWS_AS(scalar("<f4", {0, 0, 0x80, 0x3f}), Error);
  CHECK_THROWS_AS(scalar("<i4", {1, 0, 0}), Error);  // short data
  CHECK_THROWS_AS(scalar("<i4", {}, {0}), Error);
  CHECK(NpyArray::scalar<std::int32_t>(-7).to_int64_scalar() == -7);
  CHECK(NpyArray::from_vector(std::vector<std::int64_t>{42}, {1, 1, 1}).to_int64_scalar() == 42);
}

// ---- .npz ----

std::uint32_t crc_of(const Bytes& b) {
  return static_cast<std::uint32_t>(crc32(0L, b.data(), static_cast<uInt>(b.size())));
}

Bytes raw_deflate(const Bytes& in) {
  Bytes out(compressBound(static_cast<uLong>(in.size())) + 64);
  z_stream s{};
  REQUIRE(deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  s.next_in = const_cast<Bytef*>(in.data());
  s.avail_in = static_cast<uInt>(in.size());
  s.next_out = out.data();
  s.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&s, Z_FINISH) == Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

/// One member of a ZIP archive built by the tests, independently of the library's writer.
struct ZipMember {
  std::string name;
  std::uint16_t method = 0;
  Bytes payload;  // as stored in the archive (compressed for method 8)
  std::uint32_t crc = 0;
  std::uint32_t size = 0;           // uncompressed
  bool python_zip64_local = false;  // local header as Python's zipfile writes it for np.savez
};

ZipMember member(const std::string& name, const Bytes& npy, bool deflated) {
  ZipMember m;
  m.name = name;
  m.method = deflated ? 8 : 0;
  m.payload = deflated ? raw_deflate(npy) : npy;
  m.crc = crc_of(npy);
  m.size = static_cast<std::uint32_t>(npy.size());
  return m;
}

Bytes build_zip(const std::vector<ZipMember>& members) {
  Bytes z, central;
  auto put16 = [](Bytes& o, std::uint64_t v) {
    o.push_back(static_cast<std::uint8_t>(v));
    o.push_back(static_cast<std::uint8_t>(v >> 8));
  };
  auto put32 = [&](Bytes& o, std::uint64_t v) {
    put16(o, v & 0xffff);
    put16(o, v >> 16);
  };
  auto put64 = [&](Bytes& o, std::uint64_t v) {
    put32(o, v & 0xffffffff);
    put32(o, v >> 32);
  };
  for (const ZipMember& m : members) {
    const std::size_t offset = z.size();
    const auto csize = static_cast<std::uint32_t>(m.payload.size());
    put32(z, 0x04034b50);
    put16(z, m.python_zip64_local ? 45 : 20);
    put16(z, 0);
    put16(z, m.method);
    put16(z, 0);
    put16(z, 0x21);
    put32(z, m.crc);
    put32(z, m.python_zip64_local ? 0xffffffff : csize);
    put32(z, m.python_zip64_local ? 0xffffffff : m.size);
    put16(z, m.name.size());
    put16(z, m.python_zip64_local ? 20 : 0);
    z.insert(z.end(), m.name.begin(), m.name.end());
    if (m.python_zip64_local) {  // ZIP64 extended information: tag 1, 16 bytes, size and csize
      put16(z, 1);
      put16(z, 16);
      put64(z, m.size);
      put64(z, csize);
    }
    z.insert(z.end(), m.payload.begin(), m.payload.end());

    put32(central, 0x02014b50);
    put16(central, 0x0314);  // made by: Unix, 2.0
    put16(central, 20);
    put16(central, 0);
    put16(central, m.method);
    put16(central, 0);
    put16(central, 0x21);
    put32(central, m.crc);
    put32(central, csize);
    put32(central, m.size);
    put16(central, m.name.size());
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put32(central, 0);
    put32(central, offset);
    central.insert(central.end(), m.name.begin(), m.name.end());
  }
  const std::size_t cd_offset = z.size();
  z.insert(z.end(), central.begin(), central.end());
  put32(z, 0x06054b50);
  put16(z, 0);
  put16(z, 0);
  put16(z, members.size());
  put16(z, members.size());
  put32(z, central.size());
  put32(z, cd_offset);
  put16(z, 0);
  return z;
}

std::uint32_t le32(const Bytes& b, std::size_t at) {
  return std::uint32_t{b[at]} | (std::uint32_t{b[at + 1]} << 8) | (std::uint32_t{b[at + 2]} << 16) |
         (std::uint32_t{b[at + 3]} << 24);
}

TEST_CASE("npz: every dtype round trips; the archive is a plain stored ZIP with correct CRCs") {
  const TempDir dir("spattn_test_npy_");
  std::vector<float> f(24);
  for (float& x : f) x = static_cast<float>(uniform(-10, 10));
  const std::map<std::string, NpyArray> arrays = {
      {"f32", NpyArray::from_vector(f, {2, 3, 4})},
      {"f64", NpyArray::scalar(-0.25)},
      {"i32", NpyArray::from_vector(std::vector<std::int32_t>{-1, 7, 1 << 30}, {3})},
      {"i64", NpyArray::from_vector(std::vector<std::int64_t>{std::int64_t{1} << 40}, {1})},
      {"u16", NpyArray::from_vector(std::vector<std::uint16_t>{0x3f80, 0xffff}, {1, 2})},
      {"u8", NpyArray::from_vector(Bytes{}, {0, 5})},
      {"with space.and.dot", NpyArray::scalar<std::uint8_t>(200)},
  };
  const std::string path = dir.file("a.npz");
  write_npz(path, arrays);
  const auto back = read_npz(path);
  REQUIRE(back.size() == arrays.size());
  for (const auto& [member_name, a] : arrays) {
    const std::string& name =
        member_name;  // structured bindings cannot be captured before clang 16
    CAPTURE(name);
    REQUIRE(back.count(name) == 1);
    CHECK(back.at(name).descr == a.descr);
    CHECK(back.at(name).shape == a.shape);
    CHECK(back.at(name).data == a.data);
  }
  CHECK(back.at("f32").to_vector<float>() == f);
  CHECK(back.at("i64").to_int64_scalar() == std::int64_t{1} << 40);

  // Walk the archive independently: members in name order, stored, CRC over the .npy image.
  const Bytes zip = read_file(path);
  std::size_t at = 0;
  for (const auto& [member_name, a] : arrays) {
    const std::string& name =
        member_name;  // structured bindings cannot be captured before clang 16
    CAPTURE(name);
    const Bytes npy = serialize_npy(a);
    REQUIRE(zip.size() >= at + 30);
    CHECK(le32(zip, at) == 0x04034b50);
    CHECK((zip[at + 8] | (zip[at + 9] << 8)) == 0);  // method: stored
    CHECK(le32(zip, at + 14) == crc_of(npy));
    CHECK(le32(zip, at + 18) == npy.size());
    CHECK(le32(zip, at + 22) == npy.size());
    const std::size_t name_len = zip[at + 26] | (zip[at + 27] << 8);
    CHECK(std::string(zip.begin() + static_cast<long>(at) + 30,
                      zip.begin() + static_cast<long>(at + 30 + name_len)) == name + ".npy");
    CHECK(Bytes(zip.begin() + static_cast<long>(at + 30 + name_len),
                zip.begin() + static_cast<long>(at + 30 + name_len + npy.size())) == npy);
    at += 30 + name_len + npy.size();
  }
  const std::size_t eocd = zip.size() - 22;
  CHECK(le32(zip, eocd) == 0x06054b50);
  CHECK((zip[eocd + 10] | (zip[eocd + 11] << 8)) == arrays.size());
  CHECK(le32(zip, eocd + 16) == at);  // central directory follows the last member
  CHECK(le32(zip, eocd + 12) == eocd - at);

  write_npz(dir.file("empty.npz"), {});
  CHECK(read_npz(dir.file("empty.npz")).empty());
  CHECK_THROWS_WITH_AS(read_npz(dir.file("none.npz")), doctest::Contains("cannot open"), Error);
}

TEST_CASE(
    "npz: deflated members (np.savez_compressed) and Python-zipfile local headers read correctly") {
  const TempDir dir("spattn_test_npy_");
  std::vector<std::int32_t> values(300);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::int32_t>(i % 7) - 3;
  const Bytes npy = serialize_npy(NpyArray::from_vector(values, {10, 30}));
  const Bytes scalar = serialize_npy(NpyArray::scalar<std::int64_t>(-12345));
  ZipMember deflated = member("m.npy", npy, true);
  REQUIRE(deflated.payload.size() < npy.size() / 2);  // really compressed
  ZipMember stored = member("s.npy", scalar, false);
  stored.python_zip64_local = true;
  ZipMember plain_name = member("notes", scalar, true);  // no .npy suffix: the name stays
  plain_name.python_zip64_local = true;
  const std::string path = dir.file("deflated.npz");
  write_file(path, build_zip({deflated, stored, plain_name}));
  const auto arrays = read_npz(path);
  REQUIRE(arrays.size() == 3);
  REQUIRE(arrays.count("m") == 1);
  CHECK(arrays.at("m").shape == Shape{10, 30});
  CHECK(arrays.at("m").to_vector<std::int32_t>() == values);
  CHECK(arrays.at("s").to_int64_scalar() == -12345);
  CHECK(arrays.at("notes").to_int64_scalar() == -12345);

  // Corrupt compressed data, a wrong recorded size, a cut stream: all errors naming the member.
  ZipMember bad = deflated;
  bad.payload[bad.payload.size() / 2] ^= 0x55;
  write_file(path, build_zip({bad}));
  CHECK_THROWS_WITH_AS(read_npz(path), doctest::Contains("member 'm.npy'"), Error);
  bad = deflated;
  bad.size -= 1;
  write_file(path, build_zip({bad}));
  CHECK_THROWS_WITH_AS(read_npz(path), doctest::Contains("more than"), Error);
  bad = deflated;
  bad.size += 1;
  write_file(path, build_zip({bad}));
  CHECK_THROWS_AS(read_npz(path), Error);
  bad = deflated;
  bad.payload.resize(bad.payload.size() / 2);
  write_file(path, build_zip({bad}));
  CHECK_THROWS_WITH_AS(read_npz(path), doctest::Contains("truncated"), Error);
  bad = deflated;
  bad.size = 0xfffffff0u;  // a forged size must not become a 4 GiB allocation
  write_file(path, build_zip({bad}));
  CHECK_THROWS_WITH_AS(read_npz(path), doctest::Contains("impossible"), Error);
  bad = deflated;
  bad.crc ^= 1;
  write_file(path, build_zip({bad}));
  CHECK_THROWS_WITH_AS(read_npz(path), doctest::Contains("CRC"), Error);
  bad = deflated;
  bad.method = 12;  // bzip2
  write_file(path, build_zip({bad}));
  CHECK_THROWS_WITH_AS(read_npz(path), doctest::Contains("method 12"), Error);
  write_file(path, build_zip({deflated, deflated}));
  CHECK_THROWS_WITH_AS(read_npz(path), doctest::Contains("duplicate"), Error);
}

TEST_CASE(
    "npz: CRC corruption, every truncation and every byte flip are rejected without a crash") {
  const TempDir dir("spattn_test_npy_");
  const std::map<std::string, NpyArray> arrays = {
      {"a", NpyArray::from_vector(std::vector<std::uint16_t>{1, 2, 3, 4}, {2, 2})},
      {"n", NpyArray::scalar<std::int64_t>(7)},
  };
  const std::string path = dir.file("a.npz");
  write_npz(path, arrays);
  const Bytes zip = read_file(path);

  // Flip a bit of the first member's array data: only the CRC can notice.
  Bytes corrupt = zip;
  const std::size_t data_at = 30 + std::strlen("a.npy") + 128;
  REQUIRE(corrupt[data_at] == 1);
  corrupt[data_at] ^= 0x10;
  const std::string bad = dir.file("bad.npz");
  write_file(bad, corrupt);
  CHECK_THROWS_WITH_AS(read_npz(bad), doctest::Contains("CRC-32 mismatch"), Error);
  CHECK_THROWS_WITH_AS(read_npz(bad), contains("npz '" + bad + "'"), Error);

  for (std::size_t n = 0; n < zip.size(); ++n) {
    CAPTURE(n);
    write_file(bad, zip, n);
    CHECK_THROWS_AS(read_npz(bad), Error);
  }
  for (std::size_t i = 0; i < zip.size(); ++i) {
    Bytes b = zip;
    b[i] ^= 0xff;
    write_file(bad, b);
    try {
      const auto got = read_npz(bad);  // a flip in an unused field (a timestamp) is harmless
      CHECK(got.size() <= arrays.size());
    } catch (const Error&) {
    }
  }
  write_file(bad, bytes_of("PK\x05\x06 this is no archive"));
  CHECK_THROWS_AS(read_npz(bad), Error);
}

TEST_CASE(
    "npz: Python's zipfile reads our archives and writes ones we read (skipped without python3)") {
  if (std::system("python3 -c 'import zipfile' > /dev/null 2>&1") != 0) {
    MESSAGE("python3 not available: cross-check skipped");
    return;
  }
  const TempDir dir("spattn_test_npy_");
  const std::vector<double> values = {0.5, -1.25, 3.0};
  write_npz(dir.file("ours.npz"),
            {{"x", NpyArray::from_vector(values, {3})}, {"k", NpyArray::scalar<std::int64_t>(11)}});
  // testzip() checks every CRC; the listing checks names and that members are stored.
  const std::string check =
      "python3 -c \"import zipfile,sys; z=zipfile.ZipFile(sys.argv[1]); "
      "assert z.testzip() is None; "
      "assert [(i.filename, i.compress_type) for i in z.infolist()] == "
      "[('k.npy', 0), ('x.npy', 0)]\" '" +
      dir.file("ours.npz") + "'";
  CHECK(std::system(check.c_str()) == 0);

  // np.savez_compressed writes through zipfile with force_zip64=True and ZIP_DEFLATED.
  write_npy(dir.file("x.npy"), NpyArray::from_vector(values, {3}));
  const std::string make =
      "python3 -c \"import zipfile,sys; d=open(sys.argv[1],'rb').read(); "
      "z=zipfile.ZipFile(sys.argv[2],'w',compression=zipfile.ZIP_DEFLATED); "
      "f=z.open('x.npy','w',force_zip64=True); f.write(d); f.close(); "
      "z.writestr('y.npy', d); z.close()\" '" +
      dir.file("x.npy") + "' '" + dir.file("theirs.npz") + "'";
  REQUIRE(std::system(make.c_str()) == 0);
  const auto theirs = read_npz(dir.file("theirs.npz"));
  REQUIRE(theirs.size() == 2);
  CHECK(theirs.at("x").to_vector<double>() == values);
  CHECK(theirs.at("y").to_vector<double>() == values);

  if (std::system("python3 -c 'import numpy' > /dev/null 2>&1") == 0) {
    const std::string np =
        "python3 -c \"import numpy as np,sys; z=np.load(sys.argv[1]); "
        "assert z['x'].tolist() == [0.5, -1.25, 3.0] and int(z['k']) == 11; "
        "np.savez_compressed(sys.argv[2], a=np.arange(6, dtype='<i4').reshape(2, 3))\" '" +
        dir.file("ours.npz") + "' '" + dir.file("np.npz") + "'";
    REQUIRE(std::system(np.c_str()) == 0);
    const auto a = read_npz(dir.file("np.npz")).at("a");
    CHECK(a.shape == Shape{2, 3});
    CHECK(a.to_vector<std::int32_t>() == std::vector<std::int32_t>{0, 1, 2, 3, 4, 5});
  } else {
    MESSAGE("numpy not available: np.load/np.savez_compressed cross-check skipped");
  }
}

}  // namespace
}  // namespace spattn::test
