#include "spattn/input_range.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "spattn/error.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn {
namespace {

std::string where(const std::int64_t (&at)[4]) {
  return "batch " + std::to_string(at[0]) + ", head " + std::to_string(at[1]) + ", row " + std::to_string(at[2]) +
         ", dim " + std::to_string(at[3]);
}

std::string at(const char* name, const TensorRange& m) {
  std::ostringstream s;
  s << "max|" << name << "| = " << m.max_abs << " at " << where(m.max_at);
  return s.str();
}

void require_finite(const char* name, const TensorRange& m) {
  if (!m.finite) fail(name, ": not finite (", m.bad, ") at ", where(m.bad_at));
}

}  // namespace

TensorRange scan_range(const Problem& p, const TensorView& t, bool is_q, std::int64_t heads, std::int64_t dim) {
  TensorRange m;
  std::vector<float> row(static_cast<std::size_t>(dim));
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t rows = is_q ? p.seqlen_q_of(b) : p.seqlen_kv_of(b);
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t n = 0; n < rows; ++n) {
        load_row(t, row_offset(t, p, is_q, b, h, n), dim, row.data());
        for (std::int64_t d = 0; d < dim; ++d) {
          const float x = row[static_cast<std::size_t>(d)];
          if (!std::isfinite(x)) {  // the first one is all the rule reports
            m.finite = false;
            m.bad = x;
            m.bad_at[0] = b, m.bad_at[1] = h, m.bad_at[2] = n, m.bad_at[3] = d;
            return m;
          }
          if (std::fabs(x) > m.max_abs) {
            m.max_abs = std::fabs(x);
            m.max_at[0] = b, m.max_at[1] = h, m.max_at[2] = n, m.max_at[3] = d;
          }
        }
      }
  }
  return m;
}

void check_input_range(const Problem& p, const TensorRange& mq, const TensorRange& mk, const TensorRange* mv) {
  const double limit = std::ldexp(1.0, kInputRangeLog2);
  const auto sums = [&](const char* name, const TensorRange& m, std::int64_t seqlen, const char* seqlen_name) {
    const double sum = static_cast<double>(seqlen) * m.max_abs;
    if (!(sum <= limit))
      fail(name, ": sums over the sequence overflow fp32: ", seqlen_name, " · max|", name, "| = ", sum, " exceeds 2^",
           kInputRangeLog2, " (", at(name, m), "); scale the inputs down");
  };
  require_finite("q", mq);
  require_finite("k", mk);
  // Before the scale too: backends form q·k first (a scale of 0 does not make a huge q·k finite).
  const double scores = static_cast<double>(p.head_dim) * mq.max_abs * mk.max_abs * std::max(1.0, double{p.softmax_scale()});
  if (!(scores <= limit))
    fail("scores overflow fp32: head_dim · max|q| · max|k| · max(scale, 1) = ", scores, " exceeds 2^", kInputRangeLog2,
         " (", at("q", mq), "; ", at("k", mk), "); scale the inputs down");
  sums("q", mq, p.seqlen_q, "seqlen_q");
  sums("k", mk, p.seqlen_kv, "seqlen_kv");
  if (mv != nullptr) {
    require_finite("v", *mv);
    sums("v", *mv, p.seqlen_kv, "seqlen_kv");
  }
}

void check_input_range(const Problem& p, const TensorView& q, const TensorView& k, const TensorView* v) {
  const TensorRange mq = scan_range(p, q, true, p.heads_q, p.head_dim);
  require_finite("q", mq);  // before reading k: the first failure, as the rule's order
  const TensorRange mk = scan_range(p, k, false, p.heads_kv, p.head_dim);
  if (v == nullptr) return check_input_range(p, mq, mk, nullptr);
  require_finite("k", mk);
  const TensorRange mv = scan_range(p, *v, false, p.heads_kv, p.dim_v());
  check_input_range(p, mq, mk, &mv);
}

}  // namespace spattn
