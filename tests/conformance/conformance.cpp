#include "conformance.hpp"

#include <tbb/global_control.h>

#include <cmath>
#include <cstring>

#include "../common.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/reference/executor.hpp"

namespace spattn::conformance {
namespace {

class HostMemory final : public MemoryAdapter {
 public:
  Memory memory() const override { return Memory::host; }
  TensorView upload(const HostTensor& t) override {
    tensors_.push_back(std::make_unique<HostTensor>(t));
    return tensors_.back()->view();
  }
  TensorView poisoned_like(const HostTensor& t) override {
    tensors_.push_back(std::make_unique<HostTensor>(t));
    std::memset(tensors_.back()->data(), 0xff, tensors_.back()->size_bytes());
    return tensors_.back()->view();
  }
  float* poisoned_floats(std::size_t n) override {
    floats_.push_back(std::make_unique<std::vector<float>>(n));
    std::memset(floats_.back()->data(), 0xff, n * sizeof(float));
    return floats_.back()->data();
  }
  void download(const TensorView& from, HostTensor& to) override { std::memcpy(to.data(), from.data, to.size_bytes()); }
  void download(const float* from, std::vector<float>& to) override { std::memcpy(to.data(), from, to.size() * sizeof(float)); }

 private:
  std::vector<std::unique_ptr<HostTensor>> tensors_;
  std::vector<std::unique_ptr<std::vector<float>>> floats_;
};

/// cu_seqlens from per-sequence lengths.
std::vector<std::int64_t> offsets(const std::vector<std::int64_t>& lens) {
  std::vector<std::int64_t> cu = {0};
  for (std::int64_t n : lens) cu.push_back(cu.back() + n);
  return cu;
}


}  // namespace

/// A problem of the given shape; variable-length when lens_q is not empty (cu_seqlens from the lengths, the maxima
/// in seqlen_q / seqlen_kv).
Problem problem_of(std::int64_t batch, std::int64_t hq, std::int64_t hkv, std::int64_t nq, std::int64_t nkv,
                   std::int64_t d, std::int64_t dv, bool causal, DType dtype, const std::vector<std::int64_t>& lens_q,
                   const std::vector<std::int64_t>& lens_kv) {
  Problem p;
  p.batch = batch;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.seqlen_q = nq;
  p.seqlen_kv = nkv;
  p.head_dim = d;
  if (dv != 0) p.head_dim_v = dv;
  p.causal = causal;
  p.dtype = dtype;
  if (!lens_q.empty()) {
    p.cu_seqlens_q = offsets(lens_q);
    p.cu_seqlens_kv = offsets(lens_kv);
  }
  return p;
}

std::unique_ptr<MemoryAdapter> host_adapter() { return std::make_unique<HostMemory>(); }

const std::vector<ExecutorCase>& executor_cases() {
  static const std::vector<ExecutorCase> cases = {
      // name, B, Hq, Hkv, Nq, Nkv, D, Dv, causal, dtype, layout, tile_q, tile_k, density[, out, lens_q, lens_kv]
      {"N=1", 1, 1, 1, 1, 1, 64, 0, true, DType::bf16, Layout::bhnd, 128, 128, 1.0},
      {"N=1 tile 64", 1, 1, 1, 1, 1, 64, 0, true, DType::bf16, Layout::bhnd, 64, 64, 1.0},
      {"N=17 fp16", 1, 2, 2, 17, 17, 64, 0, true, DType::f16, Layout::bhnd, 16, 16, 1.0},
      {"N=1000 dense", 1, 2, 2, 1000, 1000, 128, 0, true, DType::bf16, Layout::bhnd, 128, 128, 1.0},
      {"N=1000 bf16 tile_k 64", 1, 1, 1, 1000, 1000, 128, 0, true, DType::bf16, Layout::bhnd, 128, 64, 1.0},
      {"N=2049 fp16 D=64 dense", 1, 2, 1, 2049, 2049, 64, 0, true, DType::f16, Layout::bhnd, 128, 128, 1.0},
      {"N=4099 fp16 sparse", 1, 1, 1, 4099, 4099, 64, 0, true, DType::f16, Layout::bhnd, 128, 64, 0.3},
      {"N=4099 f32", 1, 1, 1, 4099, 4099, 64, 0, true, DType::f32, Layout::bhnd, 128, 128, 0.3},
      {"GQA 8:1 tile 64x32", 2, 8, 1, 333, 333, 128, 0, true, DType::bf16, Layout::bhnd, 64, 32, 0.5},
      {"GQA 8:1 tile 128x32", 2, 8, 1, 777, 777, 128, 0, true, DType::bf16, Layout::bhnd, 128, 32, 0.5},
      {"GQA 8:1 f32", 2, 8, 1, 131, 131, 64, 0, true, DType::f32, Layout::bhnd, 64, 32, 0.6},
      {"Nq < Nkv chunked D=96", 1, 4, 2, 100, 333, 96, 0, true, DType::f16, Layout::bhnd, 32, 64, 0.5},
      {"Nq < Nkv", 1, 4, 2, 100, 777, 128, 0, true, DType::bf16, Layout::bhnd, 128, 128, 0.7},
      {"non-causal Nq != Nkv", 1, 2, 1, 257, 300, 64, 0, false, DType::f16, Layout::bhnd, 128, 16, 0.6},
      {"non-causal tile 64x16", 1, 2, 1, 257, 300, 64, 0, false, DType::f16, Layout::bhnd, 64, 16, 0.6},
      {"non-causal Nq > Nkv", 1, 2, 1, 200, 50, 32, 0, false, DType::f32, Layout::bhnd, 48, 7, 0.5},
      {"D=256 non-causal", 1, 1, 1, 65, 130, 256, 0, false, DType::f32, Layout::bhnd, 64, 128, 1.0},
      {"D=256 bf16", 1, 2, 1, 300, 300, 256, 0, true, DType::bf16, Layout::bhnd, 128, 64, 0.5},
      {"D=256 f16 merged 16x16 GQA", 1, 4, 2, 200, 260, 256, 0, true, DType::f16, Layout::bnhd, 16, 16, 0.4},
      {"D=256 stripes 256x1", 1, 2, 2, 300, 300, 256, 0, false, DType::bf16, Layout::bhnd, 256, 1, 0.2},
      {"D=96 bf16 128x128 causal", 1, 4, 1, 400, 400, 96, 0, true, DType::bf16, Layout::bhnd, 128, 128, 0.6},
      {"D=96 f16 64x16 non-causal", 2, 2, 2, 190, 150, 96, 0, false, DType::f16, Layout::bnhd, 64, 16, 0.5,
       DType::f16},
      {"D=96 varlen", 2, 2, 1, 150, 150, 96, 0, true, DType::bf16, Layout::bnhd, 64, 32, 0.7, DType::f32, {150, 33},
       {150, 40}},
      {"D=256 bf16 128x128 causal GQA", 1, 4, 2, 1000, 1000, 256, 0, true, DType::bf16, Layout::bhnd, 128, 128, 0.6},
      {"D=256 f16 128x32 non-causal Nq < Nkv", 1, 2, 1, 700, 900, 256, 0, false, DType::f16, Layout::bnhd, 128, 32, 0.5},
      {"D=96 stripes 128x1 GQA", 1, 4, 2, 700, 700, 96, 0, true, DType::bf16, Layout::bhnd, 128, 1, 0.3},
      {"D=96 f16 merged 32x32", 1, 2, 1, 600, 600, 96, 0, false, DType::f16, Layout::bhnd, 32, 32, 0.4},
      {"Dv != D", 1, 2, 2, 50, 70, 64, 128, false, DType::f16, Layout::bnhd, 32, 16, 0.7},
      {"BNHD 16x8", 2, 4, 4, 77, 77, 128, 0, true, DType::bf16, Layout::bnhd, 16, 8, 0.4},
      {"BNHD 64x32", 2, 4, 2, 200, 200, 128, 0, false, DType::bf16, Layout::bnhd, 64, 32, 0.4},
      {"BNHD 128x16", 2, 4, 2, 500, 500, 128, 0, false, DType::bf16, Layout::bnhd, 128, 16, 0.25},
      {"tile_k=16 fp16", 1, 2, 2, 500, 500, 128, 0, true, DType::f16, Layout::bhnd, 64, 16, 0.25},
      {"stripes 2048x1", 1, 2, 1, 300, 300, 64, 0, true, DType::f32, Layout::bhnd, 2048, 1, 0.2},
      {"stripes 256x1", 1, 2, 1, 600, 600, 64, 0, true, DType::bf16, Layout::bhnd, 256, 1, 0.2},
      {"stripes 256x1 short", 1, 2, 1, 300, 300, 64, 0, true, DType::bf16, Layout::bhnd, 256, 1, 0.2},
      {"fine 16x1 sparse", 1, 1, 1, 97, 97, 64, 0, false, DType::f32, Layout::bhnd, 16, 1, 0.1},
      {"merged 16x16", 1, 2, 1, 1000, 1000, 128, 0, false, DType::bf16, Layout::bhnd, 16, 16, 0.3},
      {"merged 32x32 causal", 2, 4, 2, 333, 333, 64, 0, true, DType::f16, Layout::bhnd, 32, 32, 0.4},
      {"merged 16x1 stripes", 1, 2, 2, 150, 200, 128, 0, true, DType::bf16, Layout::bnhd, 16, 1, 0.1},
      {"empty rows 16", 1, 1, 1, 256, 256, 64, 0, true, DType::f32, Layout::bhnd, 16, 16, 0.05},
      {"empty rows 64", 1, 1, 1, 512, 512, 64, 0, true, DType::bf16, Layout::bhnd, 64, 64, 0.05},
      {"empty rows 128", 1, 1, 1, 1024, 1024, 64, 0, true, DType::bf16, Layout::bhnd, 128, 64, 0.05},
      {"bf16 output 64", 1, 2, 2, 130, 130, 128, 0, true, DType::bf16, Layout::bhnd, 64, 128, 0.5, DType::bf16},
      {"bf16 output 128", 1, 2, 2, 390, 390, 128, 0, true, DType::bf16, Layout::bhnd, 128, 128, 0.5, DType::bf16},
      {"fp16 output tile_k 8", 1, 2, 2, 130, 130, 64, 0, false, DType::f16, Layout::bhnd, 64, 8, 0.5, DType::f16},
      {"fp16 output 128x8", 1, 2, 2, 130, 130, 64, 0, false, DType::f16, Layout::bhnd, 128, 8, 0.5, DType::f16},
      {"varlen causal", 3, 2, 1, 130, 200, 64, 0, true, DType::bf16, Layout::bnhd, 32, 32, 0.6, DType::f32, {5, 130, 64},
       {5, 200, 64}},
      {"varlen causal 128", 3, 4, 2, 300, 400, 128, 0, true, DType::bf16, Layout::bnhd, 128, 64, 0.6, DType::f32,
       {300, 1, 129}, {400, 1, 300}},
      {"varlen non-causal", 2, 2, 2, 90, 40, 64, 0, false, DType::f32, Layout::bnhd, 16, 4, 1.0, DType::f32, {90, 1},
       {3, 40}},
      {"long N=8192", 1, 2, 2, 8192, 8192, 128, 0, true, DType::bf16, Layout::bhnd, 256, 128, 0.3},
  };
  return cases;
}

ExecutorInputs make_inputs(const ExecutorCase& c) {
  ExecutorInputs in;
  in.problem = problem_of(c.batch, c.hq, c.hkv, c.nq, c.nkv, c.d, c.dv, c.causal, c.dtype, c.lens_q, c.lens_kv);
  const Problem& p = in.problem;
  std::int64_t total_q = c.nq, total_kv = c.nkv, tensor_batch = c.batch;
  Layout layout = c.layout;
  if (p.varlen()) {
    total_q = p.cu_seqlens_q.back();
    total_kv = p.cu_seqlens_kv.back();
    tensor_batch = 1;
    layout = Layout::bnhd;
  }
  in.q = HostTensor(c.dtype, tensor_batch, c.hq, total_q, c.d, layout);
  in.k = HostTensor(c.dtype, tensor_batch, c.hkv, total_kv, c.d, layout);
  in.v = HostTensor(c.dtype, tensor_batch, c.hkv, total_kv, p.dim_v(), layout);
  test::fill_random(in.q, 1.5);
  test::fill_random(in.k, 1.5);
  test::fill_random(in.v);
  const MaskShape shape = MaskShape::of(p, c.tile_q, c.tile_k);
  in.mask = c.density >= 1.0 ? TileMask::dense(shape) : test::random_mask(shape, c.density);
  return in;
}

namespace {

/// The mask's kept tiles split at random between two masks of its shape (each tile in exactly one).
std::pair<TileMask, TileMask> split_mask(const TileMask& mask) {
  const MaskShape& s = mask.shape;
  std::vector<std::vector<std::int32_t>> first(static_cast<std::size_t>(s.num_rows())), rest(first.size());
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = 0; h < s.mask_heads; ++h)
      for (std::int64_t t = 0; t < s.num_q_tiles(); ++t) {
        const auto r = static_cast<std::size_t>((b * s.mask_heads + h) * s.num_q_tiles() + t);
        const double share = test::uniform(0.0, 1.0);  // some rows all first, some all rest
        for (std::int32_t tile : mask.row(b, h, t)) (test::uniform(0.0, 1.0) < share ? first : rest)[r].push_back(tile);
      }
  return {TileMask::from_rows(s, std::move(first)), TileMask::from_rows(s, std::move(rest))};
}

}  // namespace

ExecutorOutcome check_executor(const ExecutorCase& c, const std::string& backend, MemoryAdapter& memory, bool resumed) {
  const ExecutorInputs in = make_inputs(c);
  const Problem& p = in.problem;
  HostTensor want(c.out, in.q.batch(), c.hq, in.q.seqlen(), p.dim_v(), in.q.layout()), got = want;
  std::vector<float> lse_want(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q)), lse_got(lse_want.size());
  AttendOptions ref_options;
  ref_options.lse = lse_want.data();
  const AttendStats ref = reference::attend(p, in.q.view(), in.k.view(), in.v.view(), in.mask, want.view(), ref_options);

  ExecutorOutcome out;
  out.reference_empty_rows = ref.empty_rows;
  out.reference_visited_tiles = resumed ? 0 : ref.visited_tiles;
  const TensorView q = memory.upload(in.q), k = memory.upload(in.k), v = memory.upload(in.v);
  const TensorView o = memory.poisoned_like(got);
  AttendOptions options;
  options.backend = backend;
  options.lse = memory.poisoned_floats(lse_got.size());
  const std::size_t rows = lse_got.size();
  SoftmaxState* state = resumed ? reinterpret_cast<SoftmaxState*>(memory.poisoned_floats(2 * rows)) : nullptr;
  AttendOptions first = options;
  first.lse = nullptr;
  first.state_out = state;
  options.resume = state;
  options.state_out = resumed ? reinterpret_cast<SoftmaxState*>(memory.poisoned_floats(2 * rows)) : nullptr;
  const auto [mask_first, mask_rest] = resumed ? split_mask(in.mask) : std::pair<TileMask, TileMask>{};
  const TileMask& mask = resumed ? mask_rest : in.mask;
  for (const auto& be : backends())
    if (be->name() == backend) {
      out.not_supported = be->not_supported_reasons(p, q, k, v, mask, o, options);
      if (resumed && out.not_supported.empty()) out.not_supported = be->not_supported_reasons(p, q, k, v, mask_first, o, first);
    }
  if (!out.not_supported.empty()) return out;
  if (resumed) attend(p, q, k, v, mask_first, o, first);
  const AttendStats stats = attend(p, q, k, v, mask, o, options);
  out.backend = stats.backend;
  out.kernel = stats.kernel;
  out.empty_rows = stats.empty_rows;
  out.visited_tiles = resumed ? 0 : stats.visited_tiles;  // resumed: the second call visits only the rest of the mask
  memory.download(o, got);
  memory.download(options.lse, lse_got);
  std::vector<float> state_got(resumed ? 2 * rows : 0);
  if (resumed) memory.download(reinterpret_cast<const float*>(options.state_out), state_got);

  const double tol = c.dtype == DType::bf16 ? 2e-2 : c.dtype == DType::f16 ? 3e-3 : 2e-5;
  // Rounding of the output; resumed, the first call's part is rounded to O's dtype too.
  const double out_tol = (resumed ? 2 : 1) * (c.out == DType::bf16 ? 8e-3 : c.out == DType::f16 ? 1e-3 : 0.0);
  const auto a = got.to_float(), b = want.to_float();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(double(a[i]) - double(b[i]));
    if (!(err <= (tol + out_tol) * (1.0 + std::fabs(double(b[i]))))) ++out.bad_outputs;  // NaN (poison) fails
    if (std::isfinite(err)) out.worst = std::max(out.worst, err);
  }
  // Rows past a variable-length sequence's end are not outputs: the LSE array is [B, Hq, max Nq].
  for (std::int64_t bb = 0; bb < p.batch; ++bb)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q_of(bb); ++i) {
        const auto at = static_cast<std::size_t>((bb * p.heads_q + h) * p.seqlen_q + i);
        const auto near = [&](float x) {
          if (std::isinf(lse_want[at])) return x == lse_want[at];
          return std::fabs(x - lse_want[at]) <= 1e-3 * (1 + std::fabs(lse_want[at]));
        };
        out.bad_lse += !near(lse_got[at]);
        if (resumed) {  // the resumed call's final state: the whole row's, m + log2 l = the LSE in base 2
          const float m = state_got[2 * at], l = state_got[2 * at + 1];
          out.bad_lse += !near(l == 0.0f && m == -INFINITY ? -INFINITY : (m + std::log2(l)) * kLn2);
        }
      }
  return out;
}

const std::vector<EstimatorCase>& estimator_cases() {
  static const std::vector<EstimatorCase> cases = [] {
    sparge::Config sp_topk;  // the authors' entry point: top-k ρ = 0.5, θ = −0.1
    sp_topk.topk = 0.5f;
    sparge::Config sp_cdf;
    sp_cdf.topk = 0.0f;
    sp_cdf.theta = {0.2f};
    sp_cdf.tau = {0.9f};
    sp_cdf.attention_sink = true;
    sparge::Config sp_small = sp_cdf;
    sp_small.block_q = 64;
    sp_small.block_k = 32;
    sparge::Config sp_heads = sp_cdf;  // per-head θ / τ, one dense head, 64 × 128 (the Hopper geometry)
    sp_heads.block_q = 64;
    sp_heads.block_k = 128;
    sp_heads.theta = {0.1f, -0.1f, 0.3f, 0.0f, 0.2f, 0.1f, -0.2f, 0.05f};
    sp_heads.tau = {0.5f, 0.7f, 0.9f, 0.95f, 0.6f, 0.8f, 0.99f, 1.0f};
    sp_heads.dense_heads = {0, 0, 1, 0, 0, 0, 0, 0};
    sparge::Config sp_sparse = sp_topk;  // a small top-k: most rows select far fewer than their reach
    sp_sparse.topk = 0.1f;
    sale::Config sale4;
    sale4.tau = {0.01f};
    sale::Config sale_strict = sale4;  // random inputs: a larger τ so that candidates are dropped
    sale_strict.tau = {0.3f};
    sparge::Config sp_topk_small = sp_topk;
    sp_topk_small.block_q = 64;
    sp_topk_small.block_k = 32;
    sale::Config sale8 = sale4;
    sale8.bits = 8;
    sale8.local_window = 64;
    sale::Config sale_heads;  // per-head τ: a dense head (τ = 0), the default, a large τ; int8
    sale_heads.bits = 8;
    sale_heads.tau = {0.0f, 0.004f, 0.05f, 0.3f};
    sale::Config sale8_strict = sale8;
    sale8_strict.tau = {0.3f};
    anchor_attn::Config anchor;
    anchor.step = 4;
    anchor.theta = 6.0f;
    anchor_attn::Config anchor_default;
    // The rules' edge values: θ = +∞ keeps every stripe (dense), −∞ none (the anchor region only), 0 the stripes whose
    // pooled score reaches the anchor mean; SALE τ = 1, the largest (the threshold at the sink-local mass itself).
    anchor_attn::Config anchor_dense = anchor, anchor_region = anchor, anchor_zero = anchor;
    anchor_dense.theta = INFINITY;
    anchor_region.theta = -INFINITY;
    anchor_zero.theta = 0.0f;
    anchor_attn::Config anchor_mid = anchor;  // θ 10: a quarter of the D = 256 cases' candidates kept (θ 6: under 2 %)
    anchor_mid.theta = 10.0f;
    sale::Config sale_no_local = sale4;  // NL = 0: the last candidate segment holds the partial key block
    sale_no_local.local_window = 0;
    sale_no_local.tau = {0.05f};
    sale::Config sale_tau1 = sale8;
    sale_tau1.tau = {1.0f};
    sale::Config sale_block = sale8_strict;  // block scale groups: one Q scale a 64-row block, K scales a segment
    sale_block.groups = sale::Groups::block;
    sale_block.tau = {0.05f};
    sale::Config sale_block4 = sale4;
    sale_block4.groups = sale::Groups::block;
    fg_attn::Config fg;
    fg.top_p = 0.8f;
    fg_attn::Config fg16 = fg;
    fg16.tile_q = 16;
    fg16.tile_k = 16;
    fg16.semantics = fg_attn::Semantics::union_keys;
    fg_attn::Config fg_union_consecutive;  // UNION over consecutive groups of R = 4 tiles
    fg_attn::Config fg_union_xor;          // UNION over greedy merge-XOR groups of R = 4 16-row tiles
    fg_union_consecutive.top_p = 0.7f;
    fg_union_consecutive.semantics = fg_attn::Semantics::union_keys;
    fg_union_consecutive.merge = fg_attn::Merge::consecutive;
    fg_union_xor.tile_q = 16;
    fg_union_xor.work_rows = 64;
    fg_union_xor.top_p = 0.6f;
    fg_union_xor.semantics = fg_attn::Semantics::union_keys;
    fg_attn::Config fg_tail = fg;
    fg_tail.tile_k = 48;
    fg_tail.size_weighted_tail = true;
    bfla::Config bf;
    bf.gamma = 0.95f;
    bfla::Config bf_rescue;
    bf_rescue.block = 128;
    bf_rescue.group = 32;
    bf_rescue.gamma = 0.9f;
    bf_rescue.eta = 7;
    bf_rescue.rho = 0.05f;
    bf_rescue.seed = 3;
    bfla::Config bf_tile = bf_rescue;
    bf_tile.rescue_grid = bfla::RescueGrid::tile;
    bfla::Config bf_rules;  // the code's optional rules on: probability threshold and top-k floor
    bf_rules.block = 128;
    bf_rules.group = 32;
    bf_rules.gamma = 0.9f;
    bf_rules.prob_threshold = 0.05f;
    bf_rules.keep_ratio = 0.1f;
    bf_rules.min_keep_blocks = 2;
    bfla::Config bf_384 = bf_tile;  // three executor rows (tile_q = 128) per query block
    bf_384.block = 384;
    bf_384.group = 64;
    bf_384.tile = 64;
    bf_384.n_local = 2;
    bf_384.eta = 5;
    bf_384.rho = 0.1f;
    bf_384.seed = 11;
    const auto llm = WorkloadKind::llm, video = WorkloadKind::video, random = WorkloadKind::random;
    // name, config, kind, B, Hq, Hkv, Nq, Nkv, D, causal, dtype[, lens_q, lens_kv]
    return std::vector<EstimatorCase>{
        {"sparge top-k llm GQA", sp_topk, llm, 1, 4, 1, 1000, 1000, 128, true, DType::bf16},
        {"sparge top-k video fp16", sp_topk, video, 1, 2, 2, 777, 777, 64, false, DType::f16},
        {"sparge TopCdf Nq < Nkv", sp_cdf, llm, 1, 4, 2, 300, 1100, 128, true, DType::bf16},
        {"sparge 64x32 D=256", sp_small, llm, 1, 2, 1, 333, 333, 256, true, DType::f16},
        {"sparge varlen", sp_topk_small, random, 3, 2, 1, 200, 260, 64, true, DType::bf16, {200, 17, 130}, {260, 17, 200}},
        {"sparge GQA 8:1 odd N per-head", sp_heads, llm, 1, 8, 1, 1531, 1531, 128, true, DType::bf16},
        {"sparge non-causal Nq < Nkv", sp_sparse, video, 1, 4, 2, 513, 2047, 64, false, DType::f16},
        {"sparge top-k 0.1 batch 2", sp_sparse, llm, 2, 2, 2, 2500, 2500, 128, true, DType::f16},
        {"sale int4 llm", sale4, llm, 1, 4, 2, 1000, 1000, 128, true, DType::bf16},
        {"sale int8 Nq < Nkv fp16", sale8, llm, 1, 2, 1, 400, 900, 64, true, DType::f16},
        {"sale non-causal video", sale4, video, 1, 2, 2, 600, 600, 64, false, DType::bf16},
        {"sale varlen D=256", sale_strict, random, 2, 2, 2, 300, 500, 256, true, DType::bf16, {300, 70}, {500, 70}},
        {"sale per-head tau GQA odd N", sale_heads, llm, 1, 4, 1, 1531, 1531, 128, true, DType::bf16},
        {"sale int4 tau 0.3 non-causal Nq < Nkv fp16", sale_strict, video, 1, 4, 2, 333, 1100, 128, false, DType::f16},
        {"sale int8 varlen", sale8_strict, random, 3, 4, 2, 700, 900, 64, true, DType::bf16, {700, 45, 200}, {900, 45, 333}},
        // GQA 4:1 at D = 64, int4: the CUDA s4 kernel's 4-head CTA, whose K loads cover a chunk in under one pass
        {"sale int4 GQA 4:1 D=64", sale4, llm, 1, 4, 1, 777, 777, 64, true, DType::bf16},
        {"sale int8 tau 1", sale_tau1, llm, 1, 4, 2, 800, 800, 128, true, DType::bf16},
        {"sale int4 GQA 2:1 D=96 odd N", sale4, llm, 1, 4, 2, 777, 777, 96, true, DType::bf16},
        {"sale int8 D=96 non-causal Nq < Nkv fp16", sale8_strict, video, 1, 2, 2, 300, 700, 96, false, DType::f16},
        {"sale int4 D=256", sale4, llm, 1, 2, 1, 600, 600, 256, true, DType::bf16},
        // 33 key blocks, the last partial: with no local blocks the candidates end with it (keys past Nkv: zeros)
        {"sale no local window, partial last candidate block", sale_no_local, video, 1, 2, 1, 1040, 1040, 128, false,
         DType::bf16},
        // GQA ratios 3 (the trained LM's 6:2) and 5: no divisor 4 or 2, so CUDA's candidate CTAs take one head each.
        {"sale int4 GQA 3:1", sale4, llm, 1, 6, 2, 700, 700, 128, true, DType::bf16},
        {"sale block groups int8 varlen odd N", sale_block, llm, 2, 4, 2, 900, 900, 128, true, DType::bf16, {900, 365},
         {900, 365}},
        {"sale block groups int8 non-causal Nq < Nkv D=96 fp16", sale_block, video, 1, 2, 1, 300, 701, 96, false,
         DType::f16},
        {"sale block groups int4 D=64", sale_block4, llm, 1, 4, 2, 1000, 1000, 64, true, DType::bf16},
        {"sale int8 GQA 5:1 D=64 Nq < Nkv fp16", sale8, llm, 1, 5, 1, 300, 650, 64, true, DType::f16},
        {"anchor llm GQA", anchor, llm, 1, 4, 1, 1500, 1500, 128, true, DType::bf16},
        {"anchor non-causal", anchor, video, 1, 2, 1, 1100, 1300, 64, false, DType::f16},
        {"anchor default Nq < Nkv", anchor_default, llm, 1, 2, 2, 700, 3000, 64, true, DType::bf16},
        {"anchor varlen", anchor, random, 2, 2, 1, 900, 900, 64, true, DType::bf16, {900, 513}, {900, 600}},
        {"anchor theta +inf (dense) GQA", anchor_dense, llm, 1, 4, 2, 900, 900, 128, true, DType::bf16},
        {"anchor theta -inf (anchor region only) non-causal", anchor_region, video, 1, 2, 1, 700, 800, 64, false, DType::f16},
        {"anchor theta 0", anchor_zero, llm, 1, 2, 1, 1000, 1000, 64, true, DType::bf16},
        {"anchor GQA D=96", anchor, llm, 1, 4, 2, 1200, 1200, 96, true, DType::bf16},
        {"anchor non-causal D=96 fp16", anchor, video, 1, 2, 1, 900, 1100, 96, false, DType::f16},
        // D = 256 (CUDA: the stripe kernel's A fragments of channels 128-255 from shared memory), one case per shape of
        // its CTA: GQA 4:1 (4 heads a CTA, NT 16; a last group of one row), GQA 2:1 (2 heads, NT 8), MHA (1 head,
        // NT 4; two 1024-key CTAs)
        {"anchor GQA 4:1 D=256 odd N", anchor_mid, llm, 1, 4, 1, 1537, 1537, 256, true, DType::bf16},
        {"anchor GQA 2:1 D=256 fp16 odd N", anchor_mid, llm, 1, 4, 2, 777, 777, 256, true, DType::f16},
        {"anchor non-causal D=256 fp16 Nq < Nkv", anchor_mid, video, 1, 2, 2, 700, 1300, 256, false, DType::f16},
        {"fgattn video", fg, video, 1, 2, 2, 1000, 1000, 128, false, DType::bf16},
        {"fgattn 16x16 union causal", fg16, llm, 1, 2, 1, 500, 700, 64, true, DType::f16},
        {"fgattn tail-weighted N=48", fg_tail, video, 1, 2, 2, 333, 333, 256, false, DType::bf16},
        {"fgattn varlen", fg, random, 2, 2, 2, 300, 300, 64, false, DType::f16, {300, 45}, {260, 300}},
        {"fgattn union consecutive varlen", fg_union_consecutive, random, 2, 2, 2, 700, 700, 64, false, DType::f16,
         {700, 93}, {700, 310}},
        {"fgattn union xor GQA Nq < Nkv", fg_union_xor, video, 1, 4, 2, 900, 1400, 128, false, DType::bf16},
        {"fgattn union xor causal odd N", fg_union_xor, llm, 1, 2, 1, 2001, 2001, 64, true, DType::bf16},
        {"bfla llm GQA", bf, llm, 1, 4, 2, 1200, 1200, 128, true, DType::bf16},
        {"bfla chunked prefill", bf, llm, 1, 4, 2, 500, 1500, 64, true, DType::bf16},
        {"bfla rescues coarse", bf_rescue, llm, 1, 4, 1, 1000, 1000, 64, true, DType::f16},
        {"bfla rescues tile non-causal", bf_tile, video, 1, 2, 2, 700, 700, 128, false, DType::bf16},
        {"bfla varlen", bf_rescue, random, 2, 4, 2, 600, 700, 64, true, DType::bf16, {600, 129}, {700, 300}},
        {"bfla rules D=256 fp16 non-causal Nq < Nkv", bf_rules, video, 1, 4, 2, 400, 1500, 256, false, DType::f16},
        {"bfla block 384 tile rescues chunked batch 2", bf_384, llm, 2, 4, 1, 900, 1300, 128, true, DType::bf16},
        {"dense", DenseConfig{64, 32}, random, 1, 2, 1, 300, 300, 64, true, DType::bf16},
    };
  }();
  return cases;
}

EstimatorInputs estimator_inputs(const EstimatorCase& c) {
  EstimatorInputs in;
  if (c.lens_q.empty()) {
    WorkloadSpec s;
    s.kind = c.kind;
    s.batch = c.batch;
    s.heads_q = c.hq;
    s.heads_kv = c.hkv;
    s.seqlen = c.nkv;
    s.seqlen_q = c.nq;
    s.head_dim = c.d;
    s.dtype = c.dtype;
    s.seed = test::test_seed();
    Workload w = make_workload(s);
    in.problem = w.problem;
    in.problem.causal = c.causal;
    in.q = std::move(w.q);
    in.k = std::move(w.k);
    return in;
  }
  in.problem = problem_of(c.batch, c.hq, c.hkv, c.nq, c.nkv, c.d, 0, c.causal, c.dtype, c.lens_q, c.lens_kv);
  const Problem& p = in.problem;
  in.q = HostTensor(c.dtype, 1, c.hq, p.cu_seqlens_q.back(), c.d, Layout::bnhd);
  in.k = HostTensor(c.dtype, 1, c.hkv, p.cu_seqlens_kv.back(), c.d, Layout::bnhd);
  test::fill_random(in.q, 1.5);
  test::fill_random(in.k, 1.5);
  return in;
}

EstimatorOutcome check_estimator(const EstimatorCase& c, const std::string& backend, MemoryAdapter& memory,
                                 double margin_tol) {
  const EstimatorInputs in = estimator_inputs(c);
  const Problem& p = in.problem;
  EstimatorOutcome out;
  Estimate want;
  {
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    EstimateOptions ref;
    ref.backend = "reference";
    want = estimate(c.config, p, in.q.view(), in.k.view(), ref);
  }
  out.density = want.mask.stats().density;
  const TensorView q = memory.upload(in.q), k = memory.upload(in.k);
  EstimateOptions options;
  options.backend = backend;
  for (const auto& be : backends())
    if (be->name() == backend) out.not_supported = be->estimate_not_supported_reasons(c.config, p, q, k, options);
  if (!out.not_supported.empty()) return out;
  const Estimate got = estimate(c.config, p, q, k, options);
  out.backend = got.backend;
  const std::vector<std::uint8_t> a = got.mask.to_bitmap(), b = want.mask.to_bitmap();
  const MaskShape& s = want.mask.shape;
  const std::int64_t tk = s.num_k_tiles();
  if (!(got.mask.shape == s) || a.size() != b.size()) {
    out.differing = out.outside_margin = 1;
    return out;
  }
  for (std::int64_t bb = 0; bb < s.batch; ++bb)
    for (std::int64_t h = 0; h < s.mask_heads; ++h)
      for (std::int64_t t = 0; t < s.num_q_tiles(); ++t)
        for (std::int64_t j = 0; j < s.reachable_k_tiles(bb, t); ++j) {
          const auto at = static_cast<std::size_t>(want.mask.row_index(bb, h, t) * tk + j);
          ++out.decisions;
          if (a[at] == b[at]) continue;
          ++out.differing;
          const bool explained = !want.margins.empty() && std::fabs(double(want.margins[at])) <= margin_tol;
          out.outside_margin += explained ? 0 : 1;
        }
  return out;
}

PipelineOutcome check_pipeline(const EstimatorCase& c, const std::string& backend, MemoryAdapter& memory) {
  const EstimatorInputs in = estimator_inputs(c);
  const Problem& p = in.problem;
  HostTensor v_host(c.dtype, in.k.batch(), c.hkv, in.k.seqlen(), c.d, in.k.layout());
  test::fill_random(v_host);
  HostTensor want(DType::f32, in.q.batch(), c.hq, in.q.seqlen(), c.d, in.q.layout()), got = want;
  const TensorView q = memory.upload(in.q), k = memory.upload(in.k), v = memory.upload(v_host);
  const TensorView o = memory.poisoned_like(got);
  AttendOptions options;
  options.backend = backend;
  PipelineOutcome out;
  for (const auto& be : backends())
    if (be->name() == backend)
      out.not_supported = be->sparse_attention_not_supported_reasons(c.config, p, q, k, v, o, attend_options_of(c.config, options));
  if (!out.not_supported.empty()) return out;
  const SparseAttentionResult r = sparse_attention(c.config, p, q, k, v, o, options);
  out.estimate_backend = r.estimate.backend;
  out.attend_backend = r.attend.backend;
  memory.download(o, got);

  EstimateOptions eo;
  eo.backend = backend;
  const Estimate e = estimate(c.config, p, q, k, eo);
  out.same_mask = r.estimate.mask.shape == e.mask.shape && r.estimate.mask.row_ptr == e.mask.row_ptr &&
                  r.estimate.mask.tiles == e.mask.tiles;
  const auto same_floats = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;  // NaN included
  };
  const auto states = [](const std::vector<SoftmaxState>& x) {
    std::vector<float> f;
    for (const SoftmaxState& st : x) f.push_back(st.m), f.push_back(st.l);
    return f;
  };
  out.same_counts = r.estimate.candidates == e.candidates && r.estimate.selected == e.selected &&
                    same_floats(r.estimate.margins, e.margins) && same_floats(states(r.estimate.anchor_state), states(e.anchor_state));

  const AttendStats ref = reference::attend(p, in.q.view(), in.k.view(), v_host.view(), r.estimate.mask, want.view(),
                                            attend_options_of(c.config, AttendOptions{}));
  out.pv_skipped = r.attend.pv_skipped;
  out.same_stats = r.attend.visited_tiles == ref.visited_tiles && r.attend.empty_rows == ref.empty_rows &&
                   r.attend.pv_skipped == ref.pv_skipped;
  const double tol = c.dtype == DType::bf16 ? 2e-2 : c.dtype == DType::f16 ? 3e-3 : 2e-5;
  const auto a = got.to_float(), b = want.to_float();
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(double(a[i]) - double(b[i])) <= tol * (1.0 + std::fabs(double(b[i]))))) ++out.bad_outputs;  // NaN fails
  return out;
}

}  // namespace spattn::conformance
