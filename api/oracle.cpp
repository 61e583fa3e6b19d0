// The oracle mask's public entry points: validation, then the reference (the only backend that computes it).
#include "spattn/error.hpp"
#include "spattn/input_range.hpp"
#include "spattn/reference/oracle.hpp"
#include "spattn/spattn.hpp"

namespace spattn {
namespace {

void check_shape(const MaskShape& s, const Problem& p) {
  s.validate();
  require(s.batch == p.batch, "oracle shape batch: ", s.batch, " differs from the problem's ", p.batch);
  require(s.seqlen_q == p.seqlen_q && s.seqlen_kv == p.seqlen_kv, "oracle shape lengths: ", s.seqlen_q, "×",
          s.seqlen_kv, " differ from the problem's ", p.seqlen_q, "×", p.seqlen_kv);
  require(s.causal == p.causal, "oracle shape causal: ", s.causal, " differs from the problem's ", p.causal);
  require(s.mask_heads == p.heads_q || s.mask_heads == p.heads_kv, "oracle shape mask_heads: ", s.mask_heads,
          " is neither heads_q (", p.heads_q, ") nor heads_kv (", p.heads_kv, ")");
  for (std::int64_t b = 0; b < p.batch; ++b)
    require(s.seqlen_q_of(b) == p.seqlen_q_of(b) && s.seqlen_kv_of(b) == p.seqlen_kv_of(b),
            "oracle shape lengths of sequence ", b, ": ", s.seqlen_q_of(b), "×", s.seqlen_kv_of(b),
            " differ from the problem's ", p.seqlen_q_of(b), "×", p.seqlen_kv_of(b));
}

}  // namespace

OracleMass oracle_tile_mass(const Problem& problem, const TensorView& q, const TensorView& k, const MaskShape& shape) {
  problem.validate(q, k);
  check_shape(shape, problem);
  require(q.memory == Memory::host && k.memory == Memory::host,
          "oracle: q and k must be in host memory (the oracle runs on the reference backend only)");
  check_input_range(problem, q, k, nullptr);
  return reference::oracle_tile_mass(problem, q, k, shape);
}

TileMask oracle_mask(const OracleMass& mass, const OracleBudget& budget) {
  budget.validate();
  mass.shape.validate();
  require(static_cast<std::int64_t>(mass.offset.size()) == mass.shape.num_rows() + 1 && mass.offset.front() == 0 &&
              mass.offset.back() == static_cast<std::int64_t>(mass.mass.size()),
          "oracle mass: offsets do not match its shape (", mass.offset.size(), " offsets, ", mass.mass.size(),
          " masses)");
  const std::int64_t tq = mass.shape.num_q_tiles();
  for (std::int64_t r = 0; r < mass.shape.num_rows(); ++r)
    require(mass.offset[static_cast<std::size_t>(r + 1)] - mass.offset[static_cast<std::size_t>(r)] ==
                mass.shape.reachable_k_tiles(r / (mass.shape.mask_heads * tq), r % tq),
            "oracle mass: row ", r, " does not hold one mass per reachable key tile");
  require(mass.heads_per_row >= 1, "oracle mass heads_per_row: must be >= 1, got ", mass.heads_per_row);
  for (float m : mass.mass) require(m == m, "oracle mass: NaN mass");
  TileMask mask = reference::oracle_select(mass, budget);
  mask.validate();
  return mask;
}

TileMask oracle_mask(const Problem& problem, const TensorView& q, const TensorView& k, const MaskShape& shape,
                     const OracleBudget& budget) {
  budget.validate();
  return oracle_mask(oracle_tile_mass(problem, q, k, shape), budget);
}

}  // namespace spattn
