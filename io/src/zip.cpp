// The ZIP container of .npz files (zip.hpp).
#include "zip.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>

#include "spattn/error.hpp"

namespace spattn::detail {
namespace {

std::string hex32(std::uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(value));
  return buf;
}

constexpr std::uint32_t kLocalHeaderSig = 0x04034b50u;
constexpr std::uint32_t kCentralHeaderSig = 0x02014b50u;
constexpr std::uint32_t kEndRecordSig = 0x06054b50u;
constexpr std::size_t kLocalHeaderSize = 30, kCentralHeaderSize = 46, kEndRecordSize = 22;
// 0xFFFFFFFF (and 0xFFFF for counts) in a 32-bit field means "the real value is in a ZIP64 record".
constexpr std::uint64_t kZip32Limit = 0xFFFFFFFFu;
// A fixed timestamp (1980-01-01 00:00) keeps the output reproducible.
constexpr std::uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;

void write_bytes(std::ostream& out, const std::vector<std::uint8_t>& bytes) {
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// Little-endian field reads that check their own bounds: no offset from a file reads outside it.
class ZipReader {
 public:
  ZipReader(const std::vector<std::uint8_t>& bytes, const std::string& what)
      : b_(bytes), what_(what) {}
  std::uint32_t u16(std::size_t at) const {
    check(at, 2);
    return static_cast<std::uint32_t>(b_[at] | (b_[at + 1] << 8));
  }
  std::uint32_t u32(std::size_t at) const {
    check(at, 4);
    return u16(at) | (u16(at + 2) << 16);
  }
  void check(std::size_t at, std::size_t len) const {
    require(at <= b_.size() && len <= b_.size() - at, what_,
            ": truncated or corrupt ZIP structure at offset ", at);
  }

 private:
  const std::vector<std::uint8_t>& b_;
  const std::string& what_;
};

std::uint32_t crc32_of(const std::uint8_t* data, std::size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {  // zlib takes 32-bit lengths
    const auto n = static_cast<uInt>(std::min<std::size_t>(size, std::size_t{1} << 30));
    crc = crc32(crc, data, n);
    data += n;
    size -= n;
  }
  return static_cast<std::uint32_t>(crc);
}

std::vector<std::uint8_t> inflate_raw(const std::uint8_t* in, std::size_t in_size,
                                      std::size_t out_size, const std::string& what) {
  // Deflate expands at most ~1032:1; a larger recorded size is a forged header, not worth
  // allocating for.
  require(out_size / 1100 <= in_size + 64, what, ": recorded size ", out_size,
          " is impossible for ", in_size, " compressed bytes");
  std::vector<std::uint8_t> out(out_size);
  std::uint8_t dummy = 0;  // zlib wants valid pointers even for empty buffers
  z_stream s{};
  require(inflateInit2(&s, -MAX_WBITS) == Z_OK, what, ": zlib inflateInit2 failed");
  s.next_in = in_size > 0 ? const_cast<Bytef*>(in) : &dummy;
  s.avail_in = static_cast<uInt>(in_size);
  s.next_out = out.empty() ? &dummy : out.data();
  s.avail_out = static_cast<uInt>(out_size);
  const int rc = inflate(&s, Z_FINISH);
  const std::size_t produced = s.total_out;
  const bool out_full = s.avail_out == 0;
  const std::string zmsg = s.msg != nullptr ? s.msg : "";
  inflateEnd(&s);
  if (rc == Z_STREAM_END) {
    require(produced == out_size, what, ": inflates to ", produced,
            " bytes, the directory records ", out_size);
    return out;
  }
  if (rc == Z_BUF_ERROR && out_full)
    fail(what, ": inflates to more than the ", out_size, " bytes the directory records");
  if (rc == Z_BUF_ERROR) fail(what, ": deflate stream is truncated");
  fail(what, ": corrupt deflate stream", zmsg.empty() ? "" : " (zlib: " + zmsg + ")");
}

}  // namespace

void ZipWriter::add(const std::string& member, const std::vector<std::uint8_t>& body) {
  require(body.size() < kZip32Limit && offset_ < kZip32Limit, too_big_);
  const std::uint32_t crc = crc32_of(body.data(), body.size());
  // Local and central headers share the fields from "version needed" to "extra length".
  auto common = [&](std::vector<std::uint8_t>& h) {
    put16(h, 20);  // version needed: 2.0
    put16(h, 0);   // flags
    put16(h, 0);   // method: stored
    put16(h, 0);   // time
    put16(h, kDosDate1980);
    put32(h, crc);
    put32(h, body.size());  // compressed size
    put32(h, body.size());  // size
    put16(h, member.size());
    put16(h, 0);  // extra length
  };
  std::vector<std::uint8_t> local;
  put32(local, kLocalHeaderSig);
  common(local);
  local.insert(local.end(), member.begin(), member.end());

  put32(central_, kCentralHeaderSig);
  put16(central_, 20);  // version made by: MS-DOS, 2.0
  common(central_);
  put16(central_, 0);  // comment length
  put16(central_, 0);  // disk
  put16(central_, 0);  // internal attributes
  put32(central_, 0);  // external attributes
  put32(central_, offset_);
  central_.insert(central_.end(), member.begin(), member.end());

  write_bytes(out_, local);
  write_bytes(out_, body);
  offset_ += local.size() + body.size();
  ++entries_;
}

void ZipWriter::finish() {
  require(offset_ < kZip32Limit && central_.size() < kZip32Limit, too_big_);
  std::vector<std::uint8_t> end;
  put32(end, kEndRecordSig);
  put16(end, 0);  // this disk
  put16(end, 0);  // disk with the central directory
  put16(end, entries_);
  put16(end, entries_);
  put32(end, central_.size());
  put32(end, offset_);
  put16(end, 0);  // comment length
  write_bytes(out_, central_);
  write_bytes(out_, end);
}

void for_each_zip_member(
    const std::vector<std::uint8_t>& bytes, const std::string& what,
    const std::function<void(const std::string& name, const std::vector<std::uint8_t>& body, const std::string& member)>&
        visit) {
  const ZipReader z(bytes, what);
  const std::size_t n = bytes.size();
  require(n >= kEndRecordSize, what, ": not a ZIP archive (", n, " bytes)");
  // The end record sits last, possibly followed by an archive comment of up to 64 KiB.
  std::size_t eocd = n;
  const std::size_t lowest = n - kEndRecordSize > 0xFFFF ? n - kEndRecordSize - 0xFFFF : 0;
  for (std::size_t p = n - kEndRecordSize + 1; p-- > lowest;) {
    if (z.u32(p) == kEndRecordSig) {
      eocd = p;
      break;
    }
  }
  require(eocd != n, what, ": not a ZIP archive (no end-of-central-directory record)");
  const std::uint32_t disk = z.u16(eocd + 4), cd_disk = z.u16(eocd + 6);
  const std::uint32_t entries_here = z.u16(eocd + 8), entries = z.u16(eocd + 10);
  const std::size_t cd_size = z.u32(eocd + 12), cd_offset = z.u32(eocd + 16);
  if (entries == 0xFFFF || cd_size == kZip32Limit || cd_offset == kZip32Limit)
    fail(what, ": ZIP64 archives (over 4 GiB or 65535 members) are not supported");
  require(disk == 0 && cd_disk == 0 && entries_here == entries, what,
          ": multi-volume ZIP archives are not supported");
  require(cd_offset <= eocd && cd_size <= eocd - cd_offset, what,
          ": corrupt central directory (offset ", cd_offset, ", size ", cd_size, ", end record at ",
          eocd, ")");

  std::size_t at = cd_offset;
  const std::size_t cd_end = cd_offset + cd_size;
  for (std::uint32_t e = 0; e < entries; ++e) {
    require(cd_end - at >= kCentralHeaderSize && z.u32(at) == kCentralHeaderSig, what,
            ": corrupt central directory (entry ", e, " of ", entries, ")");
    const std::uint32_t flags = z.u16(at + 8), method = z.u16(at + 10), crc = z.u32(at + 16);
    const std::size_t csize = z.u32(at + 20), usize = z.u32(at + 24);
    const std::size_t name_len = z.u16(at + 28), extra_len = z.u16(at + 30),
                      comment_len = z.u16(at + 32);
    const std::size_t local = z.u32(at + 42);
    require(cd_end - at - kCentralHeaderSize >= name_len + extra_len + comment_len, what,
            ": corrupt central directory (entry ", e, " overruns it)");
    std::string name(reinterpret_cast<const char*>(bytes.data() + at + kCentralHeaderSize),
                     name_len);
    at += kCentralHeaderSize + name_len + extra_len + comment_len;
    const std::string member = what + " member '" + printable(name) + "'";

    if (csize == kZip32Limit || usize == kZip32Limit || local == kZip32Limit)
      fail(member, ": ZIP64 members (over 4 GiB) are not supported");
    require((flags & 1u) == 0, member, ": encrypted members are not supported");
    // Sizes come from the central directory only: the local header may hold ZIP64 placeholders
    // (Python's zipfile, as np.savez uses it) or zeros (streamed writers with a data descriptor).
    require(z.u32(local) == kLocalHeaderSig, member, ": bad local header at offset ", local);
    const std::size_t data_at = local + kLocalHeaderSize + z.u16(local + 26) + z.u16(local + 28);
    require(data_at <= n && csize <= n - data_at, member, ": data truncated (", csize,
            " bytes at offset ", data_at, " in a ", n, "-byte file)");
    const std::uint8_t* data = bytes.data() + data_at;

    std::vector<std::uint8_t> body;
    if (method == 0) {
      require(csize == usize, member, ": stored member with compressed size ", csize, " != size ",
              usize);
      body.assign(data, data + csize);
    } else if (method == 8) {
      body = inflate_raw(data, csize, usize, member);
    } else {
      fail(member, ": compression method ", method, " is not supported (only stored and deflate)");
    }
    const std::uint32_t actual = crc32_of(body.data(), body.size());
    require(actual == crc, member, ": CRC-32 mismatch (recorded ", hex32(crc), ", data has ",
            hex32(actual), "): corrupt archive");

    visit(name, body, member);
  }
}


}  // namespace spattn::detail
