// Sizes computed from user input — products of extents, byte counts, offsets, tile counts — that cannot
// overflow: a size that does not fit in 64 bits, or exceeds the one-allocation limit, is a spattn::Error naming
// the argument, raised before anything is allocated.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace spattn {

/// The most bytes one array may take: a tensor a Problem describes (counted in fp32), a mask held densely,
/// any scratch the library allocates. 2^40 bytes = 1 TiB. Larger sizes are refused with an Error naming the
/// argument, never attempted (no std::bad_alloc, no wrapped size).
inline constexpr std::int64_t kMaxAllocationBytes = std::int64_t{1} << 40;

/// ⌈n / d⌉ for n ≥ 0 and d ≥ 1, without the overflow of (n + d − 1) / d.
constexpr std::int64_t ceil_div(std::int64_t n, std::int64_t d) { return n / d + (n % d != 0 ? 1 : 0); }

/// The product of non-negative extents; throws "<what>: a × b × … does not fit in 64 bits".
std::int64_t checked_product(std::string_view what, std::initializer_list<std::int64_t> extents);

/// The sum of non-negative terms; throws "<what>: a + b + … does not fit in 64 bits".
std::int64_t checked_sum(std::string_view what, std::initializer_list<std::int64_t> terms);

/// The bytes of an array of (product of `extents`) elements of `element_bytes` each; throws naming `what` when
/// that overflows or exceeds kMaxAllocationBytes.
std::int64_t checked_bytes(std::string_view what, std::initializer_list<std::int64_t> extents,
                           std::int64_t element_bytes);

}  // namespace spattn
