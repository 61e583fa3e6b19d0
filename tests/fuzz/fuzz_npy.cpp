// libFuzzer harness: the .npy parser on arbitrary bytes. Any outcome but an array or one spattn::Error is a bug.
#include <cstdint>

#include "spattn/error.hpp"
#include "spattn/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const spattn::NpyArray a = spattn::parse_npy(data, size, "input");
    // What a parsed array promises: its data is exactly its shape times its item size.
    if (static_cast<std::size_t>(a.numel()) * a.item_size() != a.data.size()) __builtin_trap();
    (void)spattn::serialize_npy(a);
    if (a.shape.size() <= 1 && a.numel() == 1) (void)a.to_int64_scalar();
  } catch (const spattn::Error&) {
  }
  return 0;
}
