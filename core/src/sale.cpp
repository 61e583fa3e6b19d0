#include "spattn/methods/sale.hpp"

#include <cmath>

#include "spattn/error.hpp"

namespace spattn::sale {

void Config::validate(std::int64_t heads_q) const {
  require(bits == 4 || bits == 8, "sale bits: must be 4 or 8, got ", bits);
  validate_options(kOptionTable, this, heads_q);
}

std::vector<std::uint8_t> pack_int4(const std::vector<std::int8_t>& codes) {
  require(codes.size() % 2 == 0, "pack_int4: an even number of codes is needed, got ", codes.size());
  std::vector<std::uint8_t> out(codes.size() / 2);
  for (std::size_t c = 0; c < out.size(); ++c)
    out[c] = static_cast<std::uint8_t>((codes[2 * c] & 0x0f) | ((codes[2 * c + 1] & 0x0f) << 4));
  return out;
}

std::vector<std::int8_t> unpack_int4(const std::vector<std::uint8_t>& bytes) {
  std::vector<std::int8_t> out(bytes.size() * 2);
  auto sext = [](int nibble) { return static_cast<std::int8_t>(nibble >= 8 ? nibble - 16 : nibble); };
  for (std::size_t c = 0; c < bytes.size(); ++c) {
    out[2 * c] = sext(bytes[c] & 0x0f);
    out[2 * c + 1] = sext(bytes[c] >> 4);
  }
  return out;
}

Config Params::config() const {
  Config c;
  c.bits = bits;
  c.groups = groups;
  c.local_window = local_window;
  c.tau = tau;
  return c;
}

}  // namespace spattn::sale
