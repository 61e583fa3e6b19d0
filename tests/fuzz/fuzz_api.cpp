// libFuzzer harness: the public entry points — estimate(), attend(), sparse_attention() — with fuzzed shapes,
// method parameters, executor options, masks and input values (wild values: any int64 / float, NaN, ±inf, huge).
// A call may fail only with spattn::Error; a call that succeeds must leave every output finite. Shapes that
// validate are run only when small (the harness caps the work, not the library).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "small_problem.hpp"
#include "spattn/error.hpp"

namespace {

using namespace spattn;

/// Mostly `value`; now and then any value of T (a caller's garbage).
template <class T>
T or_wild(FuzzedDataProvider& in, T value) {
  return in.ConsumeIntegralInRange(0, 15) == 0 ? in.ConsumeIntegral<T>() : value;
}
/// Mostly values from [lo, hi]; now and then any value of T.
template <class T>
T integer(FuzzedDataProvider& in, T lo, T hi) {
  return or_wild(in, in.ConsumeIntegralInRange<T>(lo, hi));
}

/// Mostly values from [lo, hi]; now and then a special one.
float real(FuzzedDataProvider& in, float lo, float hi) {
  static constexpr float kSpecial[] = {NAN, INFINITY, -INFINITY, -1.0f, 0.0f, 1.0f, 2.0f, 1e30f, -1e-30f,
                                       std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()};
  if (in.ConsumeIntegralInRange(0, 7) == 0) return kSpecial[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kSpecial) - 1)];
  return lo + (hi - lo) * in.ConsumeProbability<float>();
}

Problem problem(FuzzedDataProvider& in) {
  Problem p;
  p.batch = integer<std::int64_t>(in, 1, 2);
  p.heads_kv = integer<std::int64_t>(in, 1, 2);
  if (__builtin_mul_overflow(p.heads_kv, integer<std::int64_t>(in, 1, 3), &p.heads_q)) p.heads_q = -1;
  p.seqlen_kv = integer<std::int64_t>(in, 1, 160);
  p.seqlen_q = in.ConsumeBool() ? p.seqlen_kv : integer<std::int64_t>(in, 1, 160);
  p.head_dim = 8 * in.ConsumeIntegralInRange<std::int64_t>(3, 33);
  if (in.ConsumeBool()) p.head_dim_v = integer<std::int64_t>(in, 32, 256);
  p.causal = in.ConsumeBool();
  if (in.ConsumeIntegralInRange(0, 3) == 0) p.scale = real(in, 0.0f, 1.0f);
  p.dtype = static_cast<DType>(in.ConsumeIntegralInRange(0, 2));
  if (in.ConsumeIntegralInRange(0, 3) == 0) {  // variable-length batch
    p.cu_seqlens_q = {0};
    p.cu_seqlens_kv = {0};
    std::int64_t longest_q = 0, longest_kv = 0;
    for (std::int64_t b = 0; b < std::min<std::int64_t>(p.batch, 4); ++b) {
      // Lengths of -1 too (decreasing offsets); not wild, so that the sums stay in range.
      const std::int64_t nq = in.ConsumeIntegralInRange<std::int64_t>(-1, std::clamp<std::int64_t>(p.seqlen_q, -1, 1 << 20));
      const std::int64_t nkv = in.ConsumeIntegralInRange<std::int64_t>(-1, std::clamp<std::int64_t>(p.seqlen_kv, -1, 1 << 20));
      p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + nq);
      p.cu_seqlens_kv.push_back(p.cu_seqlens_kv.back() + nkv);
      longest_q = std::max(longest_q, nq);
      longest_kv = std::max(longest_kv, nkv);
    }
    if (in.ConsumeBool()) p.seqlen_q = longest_q, p.seqlen_kv = longest_kv;  // consistent maxima, mostly
  }
  return p;
}

MethodConfig config(FuzzedDataProvider& in, std::int64_t heads_q) {
  auto per_head = [&](float lo, float hi) {
    std::vector<float> v(in.ConsumeBool() ? 1 : static_cast<std::size_t>(std::max<std::int64_t>(heads_q, 0) % 9));
    for (float& x : v) x = real(in, lo, hi);
    return v;
  };
  switch (in.ConsumeIntegralInRange(0, 5)) {
    case 0: {
      DenseConfig c;
      c.tile_q = integer<std::int32_t>(in, 16, 256);
      c.tile_k = integer<std::int32_t>(in, 1, 128);
      return c;
    }
    case 1: {
      sparge::Config c;
      c.block_q = integer<std::int32_t>(in, 16, 256);
      c.block_k = integer<std::int32_t>(in, 1, 128);
      c.theta = per_head(-1.0f, 1.0f);
      c.tau = per_head(0.0f, 1.0f);
      c.topk = in.ConsumeBool() ? 0.0f : real(in, 0.0f, 1.0f);
      c.attention_sink = in.ConsumeBool();
      if (in.ConsumeBool()) c.pv_threshold = per_head(0.0f, 20.0f);
      return c;
    }
    case 2: {
      sale::Config c;
      c.bits = in.ConsumeBool() ? 4 : integer<int>(in, 3, 9);
      c.local_window = or_wild(in, 32 * in.ConsumeIntegralInRange<std::int64_t>(0, 8));
      c.tau = per_head(0.0f, 0.05f);
      return c;
    }
    case 3: {
      anchor_attn::Config c;
      c.block = integer<std::int32_t>(in, 1, 64);
      c.step = integer<std::int32_t>(in, 1, 16);
      c.theta = real(in, 0.0f, 16.0f);
      c.n_sink = integer<std::int64_t>(in, 0, 64);
      c.local_lead = integer<std::int64_t>(in, 0, 64);
      return c;
    }
    case 4: {
      fg_attn::Config c;
      c.tile_q = or_wild(in, 16 * in.ConsumeIntegralInRange<std::int32_t>(1, 8));
      c.tile_k = integer<std::int32_t>(in, 1, 128);
      c.top_p = real(in, 0.0f, 1.0f);
      c.size_weighted_tail = in.ConsumeBool();
      c.merge = static_cast<fg_attn::Merge>(in.ConsumeIntegralInRange(0, 2));
      c.semantics = static_cast<fg_attn::Semantics>(in.ConsumeIntegralInRange(0, 1));
      c.work_rows = or_wild(in, 16 * in.ConsumeIntegralInRange<std::int32_t>(1, 64));
      return c;
    }
    default: {
      bfla::Config c;
      c.block = 16 << in.ConsumeIntegralInRange(0, 5);
      c.group = integer<std::int32_t>(in, 1, c.block);
      c.tile = integer<std::int32_t>(in, 1, 128);
      c.gamma = real(in, 0.0f, 1.0f);
      c.n_local = integer<std::int32_t>(in, 0, 16);
      c.eta = integer<std::int64_t>(in, 0, 64);
      c.rho = real(in, 0.0f, 1.0f);
      c.seed = integer<std::int64_t>(in, 0, 1 << 20);
      c.rescue_grid = in.ConsumeBool() ? bfla::RescueGrid::coarse : bfla::RescueGrid::tile;
      c.prob_threshold = real(in, 0.0f, 2.0f);
      c.keep_ratio = real(in, 0.0f, 1.0f);
      c.min_keep_blocks = integer<std::int32_t>(in, 0, 8);
      return c;
    }
  }
}

AttendOptions options(FuzzedDataProvider& in, std::int64_t heads_q) {
  AttendOptions o;
  if (in.ConsumeBool()) o.pv_threshold = real(in, 0.0f, 20.0f);
  if (in.ConsumeIntegralInRange(0, 3) == 0)
    o.pv_threshold_per_head.assign(static_cast<std::size_t>(std::max<std::int64_t>(heads_q, 0) % 9), real(in, 0.0f, 20.0f));
  o.pv_vote_rows = in.ConsumeBool() ? 16 * (1 << in.ConsumeIntegralInRange(0, 3)) : integer<int>(in, 0, 200);
  o.pv_exempt_last = integer<int>(in, 0, 3);
  o.qk_int8 = in.ConsumeBool();
  o.quant_block_q = integer<int>(in, 1, 256);
  o.quant_block_k = integer<int>(in, 1, 256);
  if (in.ConsumeIntegralInRange(0, 7) == 0) o.backend = in.ConsumeBool() ? "cuda" : "nowhere";
  return o;
}

/// Q, K or V of `p` as a packed (variable-length) or dense view; values from the input, some wild.
HostTensor tensor(FuzzedDataProvider& in, const Problem& p, std::int64_t heads, bool is_q, std::int64_t dim) {
  const std::int64_t rows = p.varlen() ? (is_q ? p.cu_seqlens_q.back() : p.cu_seqlens_kv.back())
                                       : (is_q ? p.seqlen_q : p.seqlen_kv);
  HostTensor t(p.dtype, p.varlen() ? 1 : p.batch, heads, rows, dim, p.varlen() ? Layout::bnhd : Layout::bhnd);
  const float spread = in.ConsumeIntegralInRange(0, 7) == 0 ? real(in, 0.0f, 1e20f) : 3.0f;
  for (std::int64_t b = 0; b < t.batch(); ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t n = 0; n < rows; ++n)
        for (std::int64_t d = 0; d < dim; ++d)
          t.set(b, h, n, d, spread * (static_cast<float>(in.ConsumeIntegral<std::uint8_t>()) / 128.0f - 1.0f));
  return t;
}

/// A mask from the input: tiles from it, kept tiles from its bits (one mask per query or per KV head).
TileMask mask(FuzzedDataProvider& in, const Problem& p) {
  const MaskShape s = MaskShape::of(p, integer<std::int32_t>(in, 16, 256), integer<std::int32_t>(in, 1, 128), in.ConsumeBool());
  std::vector<std::uint8_t> bits(static_cast<std::size_t>(s.num_rows() * s.num_k_tiles()));
  for (auto& b : bits) b = in.ConsumeBool();
  return TileMask::from_bitmap(s, bits);
}

void run(FuzzedDataProvider& in) {
  const Problem p = problem(in);
  try {
    p.validate();
  } catch (const Error&) {
    return;
  }
  // Work cap of the harness: B·Hq·Nq·Nkv·D.
  const double work = static_cast<double>(p.batch) * static_cast<double>(p.heads_q) * static_cast<double>(p.seqlen_q) *
                      static_cast<double>(p.seqlen_kv) * static_cast<double>(std::max(p.head_dim, p.dim_v()));
  if (work > (1 << 23)) return;
  const HostTensor q = tensor(in, p, p.heads_q, true, p.head_dim), k = tensor(in, p, p.heads_kv, false, p.head_dim),
                   v = tensor(in, p, p.heads_kv, false, p.dim_v());
  HostTensor o(DType::f32, p.varlen() ? 1 : p.batch, p.heads_q, q.seqlen(), p.dim_v(), q.layout());
  const MethodConfig c = config(in, p.heads_q);
  const AttendOptions opt = options(in, p.heads_q);
  try {
    switch (in.ConsumeIntegralInRange(0, 2)) {
      case 0: {
        const Estimate e = estimate(c, p, q.view(), k.view());
        e.mask.validate_for(p);
        break;
      }
      case 1:
        o.poison();
        sparse_attention(c, p, q.view(), k.view(), v.view(), o.view(), opt);
        fuzz::require_finite(o);
        break;
      default: {
        const TileMask m = mask(in, p);
        o.poison();
        std::vector<float> lse(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q));
        AttendOptions with_lse = opt;
        with_lse.lse = lse.data();
        attend(p, q.view(), k.view(), v.view(), m, o.view(), with_lse);
        fuzz::require_finite(o);
      }
    }
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::single_thread();
  FuzzedDataProvider in(data, size);
  run(in);
  return 0;
}
