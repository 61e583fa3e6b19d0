// libFuzzer harness: TileMask files (load_mask_npz on bytes). A mask that loads must survive everything the
// library does with one: statistics, exports, conversions, FG-Attn planning and — when small — attention.
#include <cstdint>
#include <vector>

#include "small_problem.hpp"
#include "spattn/error.hpp"
#include "spattn/mask_file.hpp"
#include "spattn/methods/fg_attn.hpp"

namespace {

using namespace spattn;

/// Sizes below which the harness runs the heavier uses (dense exports, attention) of a loaded mask.
constexpr std::int64_t kSmallCells = 1 << 16;

void use(const TileMask& m) {
  const MaskShape& s = m.shape;
  (void)m.stats();
  (void)m.to_bsr();
  if (s.num_rows() * s.num_k_tiles() > kSmallCells) return;
  (void)m.to_bitmap();
  (void)m.to_flex_block_mask();
  if (s.tile_q * 2 <= MaskShape::kMaxTileQ && s.tile_k * 3 <= MaskShape::kMaxTileK) (void)m.coarsen(2, 3);
  if (s.tile_q % 2 == 0 && s.tile_q >= 32) (void)m.expand(2, 1);
  if (s.mask_heads % 2 == 0) (void)m.union_over_group(s.mask_heads, s.mask_heads / 2);
  if (s.tile_q % 16 == 0 && s.tile_q <= 128) {
    fg_attn::Config c;
    c.tile_q = s.tile_q;
    c.tile_k = s.tile_k;
    (void)fg_attn::effective_mask(m, fg_attn::merge_plan(m, c), fg_attn::Semantics::union_keys);
  }

  // Attention over the mask on a problem of its shape.
  Problem p;
  p.batch = s.batch;
  p.heads_q = p.heads_kv = s.mask_heads;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_kv = s.seqlen_kv;
  p.head_dim = 32;
  p.causal = s.causal;
  if (!s.seqlens_q.empty() || !s.seqlens_kv.empty()) {
    p.cu_seqlens_q = {0};
    p.cu_seqlens_kv = {0};
    for (std::int64_t b = 0; b < s.batch; ++b) {
      p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + s.seqlen_q_of(b));
      p.cu_seqlens_kv.push_back(p.cu_seqlens_kv.back() + s.seqlen_kv_of(b));
    }
  }
  if (p.batch * p.heads_q * p.seqlen_q * p.seqlen_kv > kSmallCells * 4) return;
  const std::int64_t rows_q = p.varlen() ? p.cu_seqlens_q.back() : p.seqlen_q;
  const std::int64_t rows_kv = p.varlen() ? p.cu_seqlens_kv.back() : p.seqlen_kv;
  const std::int64_t b = p.varlen() ? 1 : p.batch;
  HostTensor q(DType::f32, b, p.heads_q, rows_q, 32, Layout::bnhd), k(DType::f32, b, p.heads_kv, rows_kv, 32, Layout::bnhd),
      v = k, o = q;
  for (HostTensor* t : {&q, &k, &v})
    for (std::int64_t h = 0; h < t->heads(); ++h)
      for (std::int64_t n = 0; n < t->seqlen(); ++n) t->set(0, h, n, (n + h) % 32, 1.0f + static_cast<float>(n % 7));
  o.poison();
  try {
    p.validate();  // a mask may be valid for no problem (a varlen batch whose longest sequence is shorter)
  } catch (const Error&) {
    return;
  }
  attend(p, q.view(), k.view(), v.view(), m, o.view());
  fuzz::require_finite(o);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::single_thread();
  TileMask mask;
  try {
    mask = parse_mask_npz(std::vector<std::uint8_t>(data, data + size), "input");
  } catch (const Error&) {
    return 0;
  }
  use(mask);  // no Error is expected here: the mask loaded, and each use above is within its contract
  return 0;
}
