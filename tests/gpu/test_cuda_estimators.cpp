// GPU only (tests/README.md): the CUDA estimators — the shared estimator table held to the contract table, the raw rows
// every device estimator writes, and the decompositions of the three whose sums are not the reference's (BFLA,
// AnchorAttention, SALE) into bounded sums and exact rules (DESIGN.md §5.3). Workspaces and masks are poisoned first.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "../common.hpp"
#include "../conformance/anchor_bound.hpp"
#include "../conformance/bfla_bound.hpp"
#include "../conformance/conformance.hpp"
#include "../conformance/estimator_table.hpp"
#include "../conformance/for_each_case.hpp"
#include "cuda_memory.hpp"
#include "device_case.hpp"
#include "estimator_interface.cuh"
#include "spattn/cuda/backend.hpp"
#include "spattn/reference/anchor_attn.hpp"
#include "spattn/reference/bfla.hpp"
#include "spattn/reference/sale.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::test {
namespace {

/// The shared estimator table on the CUDA backend (conformance/estimator_table.hpp), each case held to its (cuda,
/// method) row of the contract table (conformance/contract.cpp): SpargeAttn, FG-Attn and the dense estimator (the
/// core's fixed-order fp32 arithmetic, compiled with --fmad=false) equal the reference decision for decision
/// (bit-identical masks); BFLA's group scores, AnchorAttention's anchors and stripe scores and SALE's sink-local
/// statistics come from tensor-core sums that are not the reference's (DESIGN.md §5.3): their cases may differ in a few
/// decisions near a threshold (reported, at most 1 in 50); the decompositions into exact rules and bounded sums are the
/// next tests'. Cases outside a row's coverage would report the estimator's reasons (every CUDA row covers every case).
TEST_CASE("CUDA estimators over the shared conformance table: masks bit-identical to the reference") {
  CudaMemory memory;
  const EstimatorTableRun run = run_estimator_table("cuda", memory);
  MESSAGE("CUDA estimators: " << run.ran << " of " << conformance::estimator_cases().size() << " cases ran, "
                              << run.decisions << " decisions compared (BFLA, AnchorAttention and SALE: "
                              << run.approx_differing << " of " << run.approx_decisions << " differ)"
                              << (run.reason.empty() ? std::string() : "; not covered: " + run.reason));
  CHECK(run.ran >= 36);  // AnchorAttention's 3 D = 256 cases among them (its contract covers every case)
}

/// Every device estimator over every case of the shared table it covers writes, into a poisoned mask, rows that
/// start where DeviceTileMask put them (each row's slots follow the earlier rows', as many as its reachable tiles)
/// and hold only reachable tiles, ascending: no estimator writes past its row's slots (download() would clip
/// unreachable tiles silently; the raw rows show them).
TEST_CASE("CUDA estimators write only reachable tiles, within each row's slots (raw rows, mask poisoned first)") {
  CudaMemory memory;
  int ran = 0;
  for (const conformance::EstimatorCase& c : conformance::estimator_cases()) {
    const std::string case_name(c.name);
    CAPTURE(case_name);
    const DeviceCase device_case(c, memory);
    const auto& [in, q, k, cu_q, cu_kv] = device_case;
    if (!cuda::estimator_not_supported_reasons(c.config, in.problem).empty()) continue;
    const std::unique_ptr<cuda::DeviceEstimator> est = cuda::make_estimator(c.config, in.problem, cu_q.ptr, cu_kv.ptr);
    cuda::DeviceTileMask mask(est->shape());
    const TileMask got = run_poisoned(*est, q, k, mask);  // REQUIREs bad_device_rows(mask) == 0
    CHECK(got.stats().kept_tiles <= mask.tile_slots());
    ++ran;
  }
  MESSAGE(ran << " estimator cases: raw rows within their slots");
  CHECK(ran >= 36);
}

/// BFLA's device estimator over every BFLA case of the shared table, decision by decision (DESIGN.md §5.3):
///  (a) every group score the mask depends on (causal block pairs) is within the rounding bound of the reference's
///      Eigen score: |S_dev − S_ref| ≤ c · n · 2⁻²⁴ · Σ|q·k|, n = g·D products, Σ|q·k| over the pair in double. Both
///      sums add the same exact products (fp16/bf16 products are exact in fp32): the reference's round-to-nearest fp32
///      sums err by at most γ_n ≤ n·u (u = 2⁻²⁴) of Σ|q·k|, the tensor core's accumulation truncates (≤ 2u per add)
///      → 2n·u; c = 4 adds one n·u of slack for the second-order terms and the mma's multi-operand alignment. A wrong
///      or missing row errs by a sizeable fraction of Σ|q·k| (the bound is ~2e-3 of it at g·D = 8192).
///  (b) the device mask is bit-identical to reference::bfla_mask_from_scores fed with the device's scores: every rule
///      after the GEMM (block maxima, mass, threshold and top-k rules, sink, band, rescues, expansion) is exact.
///  (c) (the table test above) how many decisions differ from the pure reference.
/// The workspace and the mask are poisoned (all bits set) before the run, so stale or unwritten values fail.
TEST_CASE("CUDA BFLA estimator: group scores within their rounding bound, every rule after them exact") {
  CudaMemory memory;
  constexpr double kC = 4.0;
  const int ran = conformance::for_each_case<bfla::Config>([&](const conformance::EstimatorCase& c,
                                                               const bfla::Config& cfg) {
    const DeviceCase device_case(c, memory);
    const auto& [in, q, k, cu_q, cu_kv] = device_case;
    const Problem& p = in.problem;
    REQUIRE(cuda::bfla_not_supported_reasons(cfg, p).empty());
    const std::unique_ptr<cuda::BflaEstimator> est = cuda::make_bfla_estimator(cfg, p, cu_q.ptr, cu_kv.ptr);
    cuda::DeviceTileMask mask(est->shape());
    CHECK(est->shape() == reference::bfla_estimate(p, in.q.view(), in.k.view(), cfg).shape);
    cuda_check(cudaMemset(est->scores_workspace(), 0xff, est->workspace_bytes()));
    const TileMask got = run_poisoned(*est, q, k, mask);

    // (a) the scores the mask depends on, against the reference's within the bound.
    std::vector<std::vector<float>> dev(static_cast<std::size_t>(p.batch * p.heads_q));
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < p.heads_q; ++h) dev[static_cast<std::size_t>(b * p.heads_q + h)] = est->group_scores(b, h, nullptr);
    const auto [compared, outside, worst] = bfla_scores_within_bound(
        p, in.q.view(), in.k.view(), cfg, kC,
        [&](std::int64_t b, std::int64_t h) -> const std::vector<float>& { return dev[static_cast<std::size_t>(b * p.heads_q + h)]; });
    CHECK(compared > 0);
    CHECK(outside == 0);

    // (b) the mask of the reference's rules over the device's scores.
    const TileMask want = bfla_mask_given(p, cfg, dev);
    CHECK(got.shape == want.shape);
    CHECK(got.row_ptr == want.row_ptr);
    CHECK(got.tiles == want.tiles);
    MESSAGE(c.name << ": " << compared << " group scores within " << kC << "·n·2^-24·Σ|qk| (worst at " << worst
                   << " of the bound), mask density " << got.stats().density);
  });
  CHECK(ran >= 7);
}

/// AnchorAttention's device estimator over every AnchorAttention case of the shared table, decision by decision
/// (DESIGN.md §5.3; conformance/anchor_bound.hpp): (a) the anchor pass, every row's (m, l) within the rounding bound of the
/// reference's (c = 4 as in the BFLA test); (b) the stripes, against reference::anchor_attn_select over the DEVICE's
/// anchors: sink and window keys exact, candidates within the score bound. The anchor workspace and the mask are
/// poisoned before the run. Every head dim of the table runs, 256 included (the stripe kernel's A fragments of channels
/// 128-255 from shared memory: one case per CTA shape, GQA 4:1 / 2:1 / MHA, causal and not, bf16 and fp16, odd N).
TEST_CASE("CUDA AnchorAttention estimator: anchors within their rounding bound, stripes within the score bound") {
  CudaMemory memory;
  int d256 = 0;
  const int ran = conformance::for_each_case<anchor_attn::Config>([&](const conformance::EstimatorCase& c,
                                                                      const anchor_attn::Config& cfg) {
    const DeviceCase device_case(c, memory);
    const auto& [in, q, k, cu_q, cu_kv] = device_case;
    const Problem& p = in.problem;
    REQUIRE(cuda::anchor_attn_not_supported_reasons(cfg, p).empty());
    d256 += p.head_dim == 256 ? 1 : 0;
    const auto est = cuda::make_anchor_attn_estimator(cfg, p, cu_q.ptr, cu_kv.ptr);
    cuda::DeviceTileMask mask(est->shape());
    cuda_check(cudaMemset(est->anchors_workspace(), 0xff, static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q) * sizeof(SoftmaxState)));
    const TileMask got = run_poisoned(*est, q, k, mask);
    const std::vector<AnchorStats> dev = est->anchors(nullptr);
    const reference::AnchorEstimate ref = reference::anchor_attn_estimate(p, in.q.view(), in.k.view(), cfg);
    REQUIRE(got.shape == ref.mask.shape);

    const ProblemRows rows(p, in.q.view(), in.k.view());
    const AnchorBound a = anchors_within_bound(p, rows, dev, ref.anchors, 4.0);
    CHECK(a.rows > 0);
    CHECK(a.bad_m == 0);
    CHECK(a.bad_l == 0);
    const StripeBound st = stripes_within_bound(p, in.q.view(), in.k.view(), rows, cfg, dev, got);
    CHECK(st.other_keys_wrong == 0);
    CHECK(st.candidates > 0);
    CHECK(st.outside == 0);
    CHECK(st.differing * 100 <= st.candidates);
    const double density = got.stats().density;
    CHECK(density > 0.0);
    MESSAGE(c.name << ": " << a.rows << " anchors within the bound (worst at " << a.worst_m << " of it); " << st.differing
                   << " of " << st.candidates << " stripe decisions differ from the rules over the device's anchors, all within "
                   << "the score bound; density " << density << " (reference " << ref.mask.stats().density << ")");
  });
  CHECK(ran >= 12);
  CHECK(d256 >= 3);
}

/// SALE's device estimator over every SALE case of the shared table (head_dim 64, 96, 128, 256), decision by
/// decision (DESIGN.md §5.2–5.3):
///  (a) the codes and scales of Q' and K' are bit-identical to the reference's (reference::sale_head_inputs);
///  (b) the sink-local statistics (the executor's statistics pass, moved to the smoothed domain q·k' by subtracting
///      scale·log2e·q·μ_k) are within a rounding bound of sale_estimate's exact ones: the device sums q·k_j on the tensor
///      cores and subtracts q·μ_k (dot_lanes8), the reference sums q·k'_j with k'_j = RN(k_j − μ_k) (Eigen); with
///      products exact in fp32, every sum errs by at most γ_D ≤ D·2⁻²⁴ of its Σ|terms| (the tensor core's truncation:
///      2·D·2⁻²⁴), so |Δx| ≤ 4·D·2⁻²⁴·scale·log2e·Σ_e |q_e|·(max_j |k_je| + |μ_ke|) (c = 4 as in the BFLA and anchor
///      tests; the rounding of k' and of the correction are below one D·2⁻²⁴ of the same sum) + 4·2⁻²⁴·|m|; m is a max of
///      such scores; l sums 2^(x − m): relative error ≤ 2·ln2·|Δx| + 3e-5 (ex2.approx and fp32 sums). A missing or extra
///      key moves l by ≳ 1 / (number of sink-local keys) ≥ 1/300.
///  (c) every candidate's margin and the mask are BIT-IDENTICAL to reference::sale_select over the DEVICE's states:
///      the integer products, the biases, GroupMax, the dequantization and the thresholds are the core's rules;
///  (d) the estimator without kept margins (the pipeline's: sale::folded_decision first) gives the same mask.
/// The workspaces and the mask are poisoned before the run.
TEST_CASE("CUDA SALE estimator: codes bit-identical, sink-local states within their bound, margins and mask exact") {
  CudaMemory memory;
  int ran = 0, cases = 0;
  const double u = std::ldexp(1.0, -24);
  for (const conformance::EstimatorCase& c : conformance::estimator_cases()) {
    const auto* cfg = std::get_if<sale::Config>(&c.config);
    if (cfg == nullptr) continue;
    ++cases;
    const std::string case_name(c.name);
    CAPTURE(case_name);
    const DeviceCase device_case(c, memory);
    const auto& [in, q, k, cu_q, cu_kv] = device_case;
    const Problem& p = in.problem;
    REQUIRE(cuda::sale_not_supported_reasons(*cfg, p).empty());
    const auto est = cuda::make_sale_estimator(*cfg, p, cu_q.ptr, cu_kv.ptr, /*keep_margins*/ true);
    cuda::DeviceTileMask mask(est->shape());
    est->poison_workspace();
    const TileMask got = run_poisoned(*est, q, k, mask);
    const reference::SaleEstimate ref = reference::sale_estimate(p, in.q.view(), in.k.view(), *cfg);
    REQUIRE(got.shape == ref.mask.shape);
    CHECK(est->workspace_bytes() > 0);

    // (a) codes and scales, and (b) the sink-local states, head by head.
    const std::int64_t d = p.head_dim, ratio = p.heads_q / p.heads_kv;
    const double sl = scale_log2(p.softmax_scale());
    const std::vector<SoftmaxState> dev = est->sink_local(nullptr);
    std::int64_t codes = 0, bad_codes = 0, bad_scales = 0, rows = 0, bad_m = 0, bad_l = 0;
    double worst_m = 0.0;
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
      for (std::int64_t h = 0; h < p.heads_q; ++h) {
        const reference::SaleHeadInputs want = reference::sale_head_inputs(p, in.q.view(), in.k.view(), *cfg, b, h);
        const cuda::SaleEstimator::Quantized gq = est->q_codes(b, h, nullptr);
        REQUIRE(gq.codes.size() == want.q.codes.size());
        codes += static_cast<std::int64_t>(gq.codes.size());
        for (std::size_t i = 0; i < gq.codes.size(); ++i) bad_codes += gq.codes[i] != want.q.codes[i] ? 1 : 0;
        for (std::size_t i = 0; i < gq.scale.size(); ++i)
          bad_scales += std::memcmp(&gq.scale[i], &want.q.scale[i], sizeof(float)) != 0 ? 1 : 0;
        if (h % ratio == 0) {  // K' codes: once per KV head
          const cuda::SaleEstimator::Quantized gk = est->k_codes(b, p.kv_head_of(h), nullptr);
          REQUIRE(gk.codes.size() == want.k.codes.size());
          codes += static_cast<std::int64_t>(gk.codes.size());
          for (std::size_t i = 0; i < gk.codes.size(); ++i) bad_codes += gk.codes[i] != want.k.codes[i] ? 1 : 0;
          for (std::size_t i = 0; i < gk.scale.size(); ++i)
            bad_scales += std::memcmp(&gk.scale[i], &want.k.scale[i], sizeof(float)) != 0 ? 1 : 0;
        }
        // (b) μ_k from K' = K − μ_k: |μ_ke| ≤ |k_je| + |k'_je| for any j; the bound takes max_j |k_je| and |μ_ke| as
        // max_j |k_je − k'_je|.
        std::vector<float> kraw(static_cast<std::size_t>(nkv * d));
        for (std::int64_t j = 0; j < nkv; ++j)
          load_row(in.k.view(), row_offset(in.k.view(), p, false, b, p.kv_head_of(h), j), d, kraw.data() + j * d);
        std::vector<double> kmag(static_cast<std::size_t>(d), 0.0);
        for (std::int64_t j = 0; j < nkv; ++j)
          for (std::int64_t e = 0; e < d; ++e) {
            const auto at = static_cast<std::size_t>(j * d + e);
            const double mu = std::fabs(double(kraw[at]) - double(want.k_centred[at]));
            kmag[static_cast<std::size_t>(e)] = std::max(kmag[static_cast<std::size_t>(e)], std::fabs(double(kraw[at])) + mu);
          }
        for (std::int64_t i = 0; i < nq; ++i) {
          const auto at = static_cast<std::size_t>((b * p.heads_q + h) * p.seqlen_q + i);
          const SoftmaxState a = dev[at], r = ref.sink_local[at];
          ++rows;
          if (!std::isfinite(r.m)) {  // no statistics (a query block without candidates): both (−∞, 0)
            bad_m += a.m == r.m && a.l == 0.0f ? 0 : 1;
            continue;
          }
          double mag = 0.0;
          for (std::int64_t e = 0; e < d; ++e)
            mag += std::fabs(double(want.q_raw[static_cast<std::size_t>(i * d + e)])) * kmag[static_cast<std::size_t>(e)];
          const double bx = 4.0 * double(d) * u * sl * mag + 4.0 * u * std::fabs(double(r.m));
          const double em = std::fabs(double(a.m) - double(r.m));
          if (!(em <= bx)) ++bad_m;  // NaN (poison) fails
          if (bx > 0.0) worst_m = std::max(worst_m, em / bx);
          const double el = std::fabs(double(a.l) - double(r.l));
          if (!(el <= double(r.l) * (2.0 * std::log(2.0) * bx + 3e-5))) ++bad_l;
        }
      }
    }
    CHECK(codes > 0);
    CHECK(bad_codes == 0);
    CHECK(bad_scales == 0);
    CHECK(rows > 0);
    CHECK(bad_m == 0);
    CHECK(bad_l == 0);

    // (c) margins and mask against the reference's rules over the device's states.
    const reference::SaleEstimate want = reference::sale_select(p, in.q.view(), in.k.view(), *cfg, dev);
    const std::vector<float> margins = est->margins(nullptr);
    REQUIRE(margins.size() == want.margins.size());
    std::int64_t candidates = 0, bad_margins = 0;
    for (std::size_t i = 0; i < margins.size(); ++i) {
      if (std::isnan(want.margins[i])) continue;  // not a candidate: the device does not write it
      ++candidates;
      bad_margins += std::memcmp(&margins[i], &want.margins[i], sizeof(float)) != 0 ? 1 : 0;
    }
    CHECK(candidates == want.candidates);
    CHECK(bad_margins == 0);
    CHECK(got.row_ptr == want.mask.row_ptr);
    CHECK(got.tiles == want.mask.tiles);
    // (d) without kept margins the kernel decides most blocks by sale::folded_decision (no bias division): the same
    //     mask, bit for bit (the statistics are the same deterministic pass).
    const auto fast = cuda::make_sale_estimator(*cfg, p, cu_q.ptr, cu_kv.ptr, /*keep_margins*/ false);
    cuda::DeviceTileMask fast_mask(fast->shape());
    fast->poison_workspace();
    const TileMask got_fast = run_poisoned(*fast, q, k, fast_mask);
    CHECK(got_fast.row_ptr == want.mask.row_ptr);
    CHECK(got_fast.tiles == want.mask.tiles);
    // How far the pure reference is (its own exact statistics): reported; the table test bounds it.
    const std::vector<std::uint8_t> a = got.to_bitmap(), bref = ref.mask.to_bitmap();
    std::int64_t differing = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differing += a[i] != bref[i] ? 1 : 0;
    ++ran;
    MESSAGE(case_name << ": " << codes << " codes bit-identical; " << rows << " sink-local states within the bound (worst at "
                      << worst_m << " of it); " << candidates << " candidate margins bit-identical (" << want.selected
                      << " selected); " << differing << " decisions differ from the pure reference; density "
                      << got.stats().density << "; workspace " << est->workspace_bytes() << " bytes");
  }
  CHECK(ran == cases);
  CHECK(ran >= 15);
}

}  // namespace
}  // namespace spattn::test
