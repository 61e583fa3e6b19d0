#include "spattn/checked.hpp"

#include <sstream>

#include "spattn/error.hpp"

namespace spattn {
namespace {

std::string joined(std::initializer_list<std::int64_t> values, const char* op) {
  std::ostringstream s;
  for (const std::int64_t* v = values.begin(); v != values.end(); ++v) s << (v == values.begin() ? "" : op) << *v;
  return s.str();
}

}  // namespace

std::int64_t checked_product(std::string_view what, std::initializer_list<std::int64_t> extents) {
  std::int64_t p = 1;
  for (std::int64_t e : extents) {
    if (e < 0) fail(what, ": negative extent in ", joined(extents, " × "));  // strings only on failure
    if (__builtin_mul_overflow(p, e, &p)) fail(what, ": ", joined(extents, " × "), " does not fit in 64 bits");
  }
  return p;
}

std::int64_t checked_sum(std::string_view what, std::initializer_list<std::int64_t> terms) {
  std::int64_t s = 0;
  for (std::int64_t t : terms) {
    if (t < 0) fail(what, ": negative term in ", joined(terms, " + "));
    if (__builtin_add_overflow(s, t, &s)) fail(what, ": ", joined(terms, " + "), " does not fit in 64 bits");
  }
  return s;
}

std::int64_t checked_bytes(std::string_view what, std::initializer_list<std::int64_t> extents,
                           std::int64_t element_bytes) {
  const std::int64_t n = checked_product(what, extents);
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(n, element_bytes, &bytes) || bytes > kMaxAllocationBytes)
    fail(what, ": ", joined(extents, " × "), " elements of ", element_bytes, " bytes exceed the limit of one array, ",
         kMaxAllocationBytes, " bytes (2^40, spattn::kMaxAllocationBytes)");
  return bytes;
}

}  // namespace spattn
