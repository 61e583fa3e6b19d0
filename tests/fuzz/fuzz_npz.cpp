// libFuzzer harness: the .npz (ZIP: stored and deflated members) parser on arbitrary bytes.
#include <cstdint>
#include <vector>

#include "spattn/error.hpp"
#include "spattn/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto arrays = spattn::parse_npz(std::vector<std::uint8_t>(data, data + size), "input");
    for (const auto& [name, a] : arrays)
      if (static_cast<std::size_t>(a.numel()) * a.item_size() != a.data.size()) __builtin_trap();
  } catch (const spattn::Error&) {
  }
  return 0;
}
