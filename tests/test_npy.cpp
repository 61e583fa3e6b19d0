// .npy/.npz: byte-exact headers, round trips, NumPy-written forms (hand-built bytes), deflated members,
// and rejection of every truncation and corruption without a crash.
#include <doctest/doctest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/npy.hpp"

namespace spattn::test {
namespace {

std::filesystem::path temp_dir() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("spattn_npy_" + std::to_string(test_seed()) + "_" +
                                                       std::to_string(std::random_device{}()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}


TEST_CASE("npy header bytes match NumPy's format 1.0 exactly") {
  const NpyArray a = NpyArray::from_vector(std::vector<float>{1.5f, -2.0f}, {2});
  const auto bytes = serialize_npy(a);
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  REQUIRE(bytes.size() == 128 + 8);
  CHECK(std::memcmp(bytes.data(), "\x93NUMPY\x01\x00\x76\x00", 10) == 0);
  CHECK(std::string(bytes.begin() + 10, bytes.begin() + 10 + static_cast<long>(header.size())) == header);
  CHECK(bytes[127] == '\n');
  float x;
  std::memcpy(&x, &bytes[128], 4);
  CHECK(x == 1.5f);
}

TEST_CASE("npy parses hand-written NumPy headers (spacing, 0-d, 3-d, version 2)") {
  auto make = [](const std::string& header, int version, const std::vector<std::uint8_t>& data) {
    std::vector<std::uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(version), 0};
    const std::size_t len = header.size();
    b.push_back(static_cast<std::uint8_t>(len & 0xff));
    b.push_back(static_cast<std::uint8_t>(len >> 8));
    if (version == 2) b.push_back(0), b.push_back(0);
    b.insert(b.end(), header.begin(), header.end());
    b.insert(b.end(), data.begin(), data.end());
    return b;
  };
  const std::vector<std::uint8_t> two_i32 = {7, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff};
  auto a = make("{\"shape\":(1,2,1),\"fortran_order\":False,\"descr\":\"<i4\"}\n", 1, two_i32);
  NpyArray p = parse_npy(a.data(), a.size(), "t");
  CHECK(p.shape == std::vector<std::int64_t>{1, 2, 1});
  CHECK(p.to_vector<std::int32_t>() == std::vector<std::int32_t>{7, -2});
  auto s = make("{'descr': '<i8', 'fortran_order': False, 'shape': (), }\n", 2, {42, 0, 0, 0, 0, 0, 0, 0});
  NpyArray scalar = parse_npy(s.data(), s.size(), "t");
  CHECK(scalar.shape.empty());
  CHECK(scalar.to_int64_scalar() == 42);
  auto f = make("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n", 1, two_i32);
  CHECK_THROWS_WITH_AS(parse_npy(f.data(), f.size(), "t"), doctest::Contains("Fortran"), Error);
  auto be = make("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n", 1, two_i32);
  CHECK_THROWS_WITH_AS(parse_npy(be.data(), be.size(), "t"), doctest::Contains("little-endian"), Error);
  auto mismatch = make("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", 1, two_i32);
  CHECK_THROWS_WITH_AS(parse_npy(mismatch.data(), mismatch.size(), "t"), doctest::Contains("truncated"), Error);
  auto obj = make("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }\n", 1, two_i32);
  CHECK_THROWS_AS(parse_npy(obj.data(), obj.size(), "t"), Error);
}

TEST_CASE("npy round trips every dtype through files; every truncation is rejected") {
  const auto dir = temp_dir();
  std::vector<float> f(60);
  for (auto& x : f) x = static_cast<float>(uniform(-1e3, 1e3));
  const std::vector<NpyArray> arrays = {
      NpyArray::from_vector(f, {3, 4, 5}),
      NpyArray::from_vector(std::vector<double>{1.0, 2.5}, {2}),
      NpyArray::from_vector(std::vector<std::int64_t>{-1, 1LL << 40}, {1, 2}),
      NpyArray::from_vector(std::vector<std::uint16_t>{0x3f80, 0xffff, 0}, {3}),
      NpyArray::from_vector(std::vector<std::uint8_t>{1, 2, 3, 4}, {2, 2}),
      NpyArray::scalar<std::int32_t>(-5),
  };
  for (const NpyArray& a : arrays) {
    const std::string path = (dir / "a.npy").string();
    write_npy(path, a);
    const NpyArray b = read_npy(path);
    CHECK(b.descr == a.descr);
    CHECK(b.shape == a.shape);
    CHECK(b.data == a.data);
  }
  CHECK(read_npy((dir / "a.npy").string()).to_int64_scalar() == -5);
  CHECK_THROWS_WITH_AS(arrays[0].to_vector<double>(), doctest::Contains("<f4"), Error);
  const auto full = serialize_npy(arrays[0]);
  for (std::size_t n = 0; n < full.size(); ++n) CHECK_THROWS_AS(parse_npy(full.data(), n, "t"), Error);
  CHECK_THROWS_WITH_AS(read_npy((dir / "missing.npy").string()), doctest::Contains("cannot open"), Error);
}

TEST_CASE("npz round trip, deflated members, CRC and truncation checks") {
  const auto dir = temp_dir();
  const std::string path = (dir / "a.npz").string();
  std::map<std::string, NpyArray> arrays = {
      {"x", NpyArray::from_vector(std::vector<float>{1, 2, 3}, {3})},
      {"n", NpyArray::scalar<std::int64_t>(7)},
  };
  write_npz(path, arrays);
  auto back = read_npz(path);
  REQUIRE(back.size() == 2);
  CHECK(back["x"].to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(back["n"].to_int64_scalar() == 7);

  // Flip one byte of the stored data: the CRC must catch it.
  std::ifstream in(path, std::ios::binary);
  std::vector<std::uint8_t> zip((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::vector<std::uint8_t> corrupt = zip;
  const std::size_t data_at = 30 + std::strlen("n.npy") + 128;  // first member: n.npy's value
  corrupt[data_at] ^= 0x5a;
  const std::string bad = (dir / "bad.npz").string();
  std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(corrupt.data()), static_cast<std::streamsize>(corrupt.size()));
  CHECK_THROWS_WITH_AS(read_npz(bad), doctest::Contains("CRC"), Error);
  for (std::size_t n = 0; n < zip.size(); n += 7) {
    std::ofstream(bad, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(zip.data()), static_cast<std::streamsize>(n));
    CHECK_THROWS_AS(read_npz(bad), Error);
  }

  // A deflated member, as np.savez_compressed writes: raw deflate, method 8.
  const auto npy = serialize_npy(NpyArray::from_vector(std::vector<std::int32_t>(100, 3), {10, 10}));
  std::vector<std::uint8_t> packed(npy.size() + 64);
  z_stream s{};
  REQUIRE(deflateInit2(&s, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  s.next_in = const_cast<Bytef*>(npy.data());
  s.avail_in = static_cast<uInt>(npy.size());
  s.next_out = packed.data();
  s.avail_out = static_cast<uInt>(packed.size());
  REQUIRE(deflate(&s, Z_FINISH) == Z_STREAM_END);
  packed.resize(s.total_out);
  deflateEnd(&s);
  const auto crc = static_cast<std::uint32_t>(crc32(0L, npy.data(), static_cast<uInt>(npy.size())));
  std::vector<std::uint8_t> z;
  auto put16 = [&](std::uint32_t v) { z.push_back(v & 0xff), z.push_back((v >> 8) & 0xff); };
  auto put32 = [&](std::uint32_t v) { put16(v & 0xffff), put16(v >> 16); };
  const std::string name = "m.npy";
  put32(0x04034b50); put16(20); put16(0); put16(8); put16(0); put16(0); put32(crc);
  put32(static_cast<std::uint32_t>(packed.size())); put32(static_cast<std::uint32_t>(npy.size()));
  put16(static_cast<std::uint32_t>(name.size())); put16(0);
  z.insert(z.end(), name.begin(), name.end());
  z.insert(z.end(), packed.begin(), packed.end());
  const auto cd = static_cast<std::uint32_t>(z.size());
  put32(0x02014b50); put16(20); put16(20); put16(0); put16(8); put16(0); put16(0); put32(crc);
  put32(static_cast<std::uint32_t>(packed.size())); put32(static_cast<std::uint32_t>(npy.size()));
  put16(static_cast<std::uint32_t>(name.size())); put16(0); put16(0); put16(0); put16(0); put32(0); put32(0);
  z.insert(z.end(), name.begin(), name.end());
  const auto cd_size = static_cast<std::uint32_t>(z.size()) - cd;
  put32(0x06054b50); put16(0); put16(0); put16(1); put16(1); put32(cd_size); put32(cd); put16(0);
  const std::string zpath = (dir / "deflated.npz").string();
  std::ofstream(zpath, std::ios::binary).write(reinterpret_cast<const char*>(z.data()), static_cast<std::streamsize>(z.size()));
  const auto m = read_npz(zpath);
  REQUIRE(m.count("m") == 1);
  CHECK(m.at("m").shape == std::vector<std::int64_t>{10, 10});
  CHECK(m.at("m").to_vector<std::int32_t>() == std::vector<std::int32_t>(100, 3));
}

}  // namespace
}  // namespace spattn::test
