// The ZIP container of .npz files (npy.cpp), private to spattn::io: a writer of stored (uncompressed) members and a
// reader of stored or deflated members. No ZIP64, no multi-volume archives, no encryption. Every offset and length
// read from a file is checked against the bytes present before it is used: a malformed archive ends in one
// spattn::Error naming `what` (and the member), never in a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spattn::detail {

/// A piece of untrusted text safe to put in a one-line message (member names here, .npy header text in npy.cpp).
inline std::string printable(std::string_view text, std::size_t max = 80) {
  std::string out;
  for (char c : text.substr(0, max)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > max) out += "...";
  return out;
}

/// Little-endian field writes (ZIP headers here, the .npy header length in npy.cpp).
inline void put16(std::vector<std::uint8_t>& out, std::uint64_t v) {
  out.push_back(static_cast<std::uint8_t>(v & 0xff));
  out.push_back(static_cast<std::uint8_t>((v >> 8) & 0xff));
}

inline void put32(std::vector<std::uint8_t>& out, std::uint64_t v) {
  put16(out, v & 0xffff);
  put16(out, (v >> 16) & 0xffff);
}

/// Writes a ZIP archive of stored members to `out`, one member at a time: add() writes its local header and body,
/// finish() the central directory and the end record. Fixed timestamps: the same members give the same bytes.
class ZipWriter {
 public:
  /// `too_big`: the message when the archive would need ZIP64 (a member or the archive over 4 GiB).
  ZipWriter(std::ostream& out, std::string too_big) : out_(out), too_big_(std::move(too_big)) {}
  /// `member`: its file name in the archive (under 64 KiB).
  void add(const std::string& member, const std::vector<std::uint8_t>& body);
  void finish();

 private:
  std::ostream& out_;
  std::string too_big_;
  std::vector<std::uint8_t> central_;
  std::uint64_t offset_ = 0;
  std::uint64_t entries_ = 0;
};

/// Calls visit(name, body, member) for each member of the archive `bytes`, in central-directory order, with its
/// body inflated and CRC-checked; `member` is the label of the member in messages ("<what> member '<name>'").
void for_each_zip_member(
    const std::vector<std::uint8_t>& bytes, const std::string& what,
    const std::function<void(const std::string& name, const std::vector<std::uint8_t>& body, const std::string& member)>&
        visit);

}  // namespace spattn::detail
