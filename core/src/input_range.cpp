#include "spattn/input_range.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "spattn/error.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn {
namespace {

/// The largest |x| of a tensor and where it is (first in (batch, head, row, dim) order).
struct Largest {
  double abs = 0.0;
  std::int64_t b = 0, h = 0, n = 0, d = 0;
};

std::string where(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t d) {
  return "batch " + std::to_string(b) + ", head " + std::to_string(h) + ", row " + std::to_string(n) + ", dim " +
         std::to_string(d);
}

/// Scans every element a call reads; throws at the first non-finite one.
Largest scan(const Problem& p, const TensorView& t, const char* name, bool is_q, std::int64_t heads, std::int64_t dim) {
  Largest m;
  std::vector<float> row(static_cast<std::size_t>(dim));
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t rows = is_q ? p.seqlen_q_of(b) : p.seqlen_kv_of(b);
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t n = 0; n < rows; ++n) {
        load_row(t, row_offset(t, p, is_q, b, h, n), dim, row.data());
        for (std::int64_t d = 0; d < dim; ++d) {
          const float x = row[static_cast<std::size_t>(d)];
          if (!std::isfinite(x)) fail(name, ": not finite (", x, ") at ", where(b, h, n, d));
          if (std::fabs(x) > m.abs) m = {std::fabs(x), b, h, n, d};
        }
      }
  }
  return m;
}

std::string at(const char* name, const Largest& m) {
  std::ostringstream s;
  s << "max|" << name << "| = " << m.abs << " at " << where(m.b, m.h, m.n, m.d);
  return s.str();
}

}  // namespace

void check_input_range(const Problem& p, const TensorView& q, const TensorView& k, const TensorView* v) {
  const double limit = std::ldexp(1.0, kInputRangeLog2);
  const auto sums = [&](const char* name, const Largest& m, std::int64_t seqlen, const char* seqlen_name) {
    const double sum = static_cast<double>(seqlen) * m.abs;
    if (!(sum <= limit))
      fail(name, ": sums over the sequence overflow fp32: ", seqlen_name, " · max|", name, "| = ", sum, " exceeds 2^",
           kInputRangeLog2, " (", at(name, m), "); scale the inputs down");
  };
  const Largest mq = scan(p, q, "q", true, p.heads_q, p.head_dim);
  const Largest mk = scan(p, k, "k", false, p.heads_kv, p.head_dim);
  // Before the scale too: backends form q·k first (a scale of 0 does not make a huge q·k finite).
  const double scores = static_cast<double>(p.head_dim) * mq.abs * mk.abs * std::max(1.0, double{p.softmax_scale()});
  if (!(scores <= limit))
    fail("scores overflow fp32: head_dim · max|q| · max|k| · max(scale, 1) = ", scores, " exceeds 2^", kInputRangeLog2,
         " (", at("q", mq), "; ", at("k", mk), "); scale the inputs down");
  sums("q", mq, p.seqlen_q, "seqlen_q");
  sums("k", mk, p.seqlen_kv, "seqlen_kv");
  if (v != nullptr) sums("v", scan(p, *v, "v", false, p.heads_kv, p.dim_v()), p.seqlen_kv, "seqlen_kv");
}

}  // namespace spattn
