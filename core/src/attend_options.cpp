#include "spattn/attend_options.hpp"

#include "spattn/error.hpp"

namespace spattn {

void AttendOptions::validate(std::int64_t heads_q) const {
  const Interval<float> threshold{0.0f, INFINITY};
  require_in("pv_threshold", pv_threshold, threshold, " (inf = off)");
  require(pv_threshold_per_head.empty() || static_cast<std::int64_t>(pv_threshold_per_head.size()) == heads_q,
          "pv_threshold_per_head: give one threshold per query head (", heads_q, "), got ",
          pv_threshold_per_head.size());
  for (float t : pv_threshold_per_head) require_in("pv_threshold_per_head", t, threshold, " (inf = off)");
  require(pv_vote_rows == 0 || pv_vote_rows == 16 || pv_vote_rows == 32 || pv_vote_rows == 64 || pv_vote_rows == 128,
          "pv_vote_rows: must be 0 (the whole row block), 16, 32, 64 or 128, got ", pv_vote_rows);
  require_in("pv_exempt_last", pv_exempt_last, Interval<int>{0, 1 << 20});
  require_in("quant_block_q", quant_block_q, Interval<int>{1, 1 << 20});
  require_in("quant_block_k", quant_block_k, Interval<int>{1, 1 << 20});
}

}  // namespace spattn
