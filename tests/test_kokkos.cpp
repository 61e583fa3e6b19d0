// The Kokkos backend beyond the shared conformance table: how the dispatcher picks it and what it says it does not
// cover. (Its outputs and masks are checked against the reference by tests/conformance, which runs every linked
// backend.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <variant>

#include "common.hpp"
#include "conformance/conformance.hpp"
#include "conformance/executor_options.hpp"
#include "conformance/executor_table.hpp"
#include "conformance/kokkos_anchor.hpp"
#include "conformance/kokkos_bfla.hpp"
#include "conformance/kokkos_pool.hpp"
#include "spattn/kokkos/backend.hpp"
#include "spattn/reference/anchor_attn.hpp"
#include "spattn/reference/bfla.hpp"
#include "spattn/reference/executor.hpp"
#include "spattn/reference/sale.hpp"
#include "spattn/spattn.hpp"
#include "spattn/tensor_rows.hpp"
#include "spattn/tensor.hpp"

namespace spattn::test {
namespace {

struct SmallCall {
  Problem p;
  HostTensor q, k, v, o;
  TileMask mask;
  SmallCall() {
    p.heads_q = 2;
    p.heads_kv = 1;
    p.seqlen_q = p.seqlen_kv = 100;
    p.head_dim = 64;
    p.causal = true;
    p.dtype = DType::bf16;
    q = HostTensor(p.dtype, 1, 2, 100, 64);
    k = HostTensor(p.dtype, 1, 1, 100, 64);
    v = HostTensor(p.dtype, 1, 1, 100, 64);
    o = HostTensor(DType::f32, 1, 2, 100, 64);
    fill_random(q);
    fill_random(k);
    fill_random(v);
    mask = TileMask::dense(MaskShape::of(p, 64, 32));
  }
};

TEST_CASE("kokkos: the host execution space is the one the build was meant to test (SPATTN_KOKKOS_EXPECT_HOST)") {
  // backends/kokkos/openmp.sh sets SPATTN_KOKKOS_EXPECT_HOST=OpenMP: the table below must run on concurrent teams, not
  // on a Kokkos that quietly fell back to Serial. Unset (preset kokkos on Debian's Serial-only Kokkos): nothing asked.
  const char* expected = std::getenv("SPATTN_KOKKOS_EXPECT_HOST");
  const std::string spaces = kokkos::execution_spaces();
  MESSAGE("Kokkos execution spaces: " << spaces);
  if (expected != nullptr && expected[0] != '\0') CHECK(spaces.find(std::string(expected) + " (host)") != std::string::npos);
}

TEST_CASE("kokkos: host tensors run on the reference by default, on Kokkos when asked for by name") {
  SmallCall c;
  AttendOptions options;
  CHECK(attend(c.p, c.q.view(), c.k.view(), c.v.view(), c.mask, c.o.view(), options).backend == "reference");
  options.backend = "kokkos";
  CHECK(attend(c.p, c.q.view(), c.k.view(), c.v.view(), c.mask, c.o.view(), options).backend == "kokkos");
  EstimateOptions eo;
  CHECK(estimate(sparge::Config{}, c.p, c.q.view(), c.k.view(), eo).backend == "reference");
  eo.backend = "kokkos";
  CHECK(estimate(sparge::Config{}, c.p, c.q.view(), c.k.view(), eo).backend == "kokkos");
}

TEST_CASE("kokkos: estimate_on_device, then attend over the mask where it lies, as estimate() and the reference executor") {
  SmallCall c;
  c.p.batch = 2;  // a variable-length batch, GQA 2:1, causal, Nq < Nkv in the second sequence
  c.p.seqlen_q = 100;
  c.p.seqlen_kv = 120;
  c.p.cu_seqlens_q = {0, 100, 161};
  c.p.cu_seqlens_kv = {0, 100, 220};
  c.q = HostTensor(c.p.dtype, 1, 2, 161, 64, Layout::bnhd);
  c.k = HostTensor(c.p.dtype, 1, 1, 220, 64, Layout::bnhd);
  c.v = HostTensor(c.p.dtype, 1, 1, 220, 64, Layout::bnhd);
  fill_random(c.q, 1.5);
  fill_random(c.k, 1.5);
  fill_random(c.v);
  sparge::Config sp;
  sp.block_q = 32;
  sp.block_k = 16;
  sp.topk = 0.3f;
  anchor_attn::Config an;
  an.block = 16;
  an.step = 2;
  an.n_sink = 8;
  an.local_lead = 16;
  fg_attn::Config fg;
  fg.tile_q = fg.tile_k = 16;
  fg.top_p = 0.7f;
  fg_attn::Config fg_xor = fg, fg_consecutive = fg;  // UNION semantics: the merge plan built on the device
  fg_xor.semantics = fg_consecutive.semantics = fg_attn::Semantics::union_keys;
  fg_xor.work_rows = 48;
  fg_consecutive.merge = fg_attn::Merge::consecutive;
  for (const MethodConfig& config : {MethodConfig{sp}, MethodConfig{an}, MethodConfig{fg}, MethodConfig{fg_xor},
                                     MethodConfig{fg_consecutive}, MethodConfig{DenseConfig{}}}) {
    const std::string method(method_name(config));
    CAPTURE(method);
    const auto* fg_config = std::get_if<fg_attn::Config>(&config);
    const bool union_keys = fg_config != nullptr && fg_config->semantics == fg_attn::Semantics::union_keys;
    CAPTURE(union_keys);
    const kokkos::DeviceEstimate device = kokkos::estimate_on_device(config, c.p, c.q.view(), c.k.view());
    const Estimate got = device.download();
    EstimateOptions eo;
    eo.backend = "kokkos";
    const Estimate want = estimate(config, c.p, c.q.view(), c.k.view(), eo);
    CHECK(got.method == method);
    CHECK(got.backend == "kokkos");
    CHECK(device.shape() == want.mask.shape);
    CHECK(got.mask.row_ptr == want.mask.row_ptr);
    CHECK(got.mask.tiles == want.mask.tiles);
    CHECK(got.candidates == want.candidates);
    CHECK(got.selected == want.selected);
    CHECK(got.anchor_state.size() == want.anchor_state.size());
    if (!std::holds_alternative<anchor_attn::Config>(config)) {  // the reference's mask, bit for bit (anchors: rounding)
      const Estimate reference_estimate = estimate(config, c.p, c.q.view(), c.k.view());
      CHECK(got.mask.row_ptr == reference_estimate.mask.row_ptr);
      CHECK(got.mask.tiles == reference_estimate.mask.tiles);
    }
    if (union_keys) CHECK(got.mask.tiles.size() > estimate(fg, c.p, c.q.view(), c.k.view()).mask.tiles.size());

    HostTensor o(DType::f32, 1, 2, 161, 64, Layout::bnhd), ref = o;
    std::memset(o.data(), 0xff, o.size_bytes());  // NaN: a row the executor skips fails
    const AttendStats stats = kokkos::attend(c.p, c.q.view(), c.k.view(), c.v.view(), device, o.view());
    const AttendStats ref_stats = reference::attend(c.p, c.q.view(), c.k.view(), c.v.view(), want.mask, ref.view(), {});
    CHECK(stats.backend == "kokkos");
    CHECK(stats.visited_tiles == ref_stats.visited_tiles);
    CHECK(stats.empty_rows == ref_stats.empty_rows);
    const auto a = o.to_float(), b = ref.to_float();
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < a.size(); ++i) bad += std::fabs(a[i] - b[i]) <= 2e-2f * (1.0f + std::fabs(b[i])) ? 0 : 1;
    CHECK(bad == 0);
  }
}

TEST_CASE("kokkos: upload a mask once, attend over it twice, as attend() over the host mask") {
  SmallCall c;  // causal, GQA 2:1
  std::mt19937_64& gen = rng();  // this run's seed (tests/common.hpp: printed, SPATTN_TEST_SEED)
  const MaskShape shape = MaskShape::of(c.p, 32, 16);
  std::vector<std::uint8_t> bits(static_cast<std::size_t>(shape.num_rows() * shape.num_k_tiles()));
  for (auto& x : bits) x = gen() % 3 == 0 ? 1 : 0;
  const TileMask mask = TileMask::from_bitmap(shape, bits);
  const kokkos::DeviceEstimate device = kokkos::upload(mask, Memory::host);
  CHECK(device.shape() == shape);
  CHECK(device.memory() == Memory::host);
  const Estimate back = device.download();
  CHECK(back.method == "uploaded");
  CHECK(back.mask.row_ptr == mask.row_ptr);
  CHECK(back.mask.tiles == mask.tiles);
  AttendOptions by_name;
  by_name.backend = "kokkos";
  HostTensor want(DType::f32, 1, 2, c.p.seqlen_q, 64), got = want;
  const AttendStats want_stats = attend(c.p, c.q.view(), c.k.view(), c.v.view(), mask, want.view(), by_name);
  for (int call = 0; call < 2; ++call) {
    std::memset(got.data(), 0xff, got.size_bytes());  // NaN: a row the executor skips fails
    const AttendStats stats = kokkos::attend(c.p, c.q.view(), c.k.view(), c.v.view(), device, got.view());
    CHECK(stats.visited_tiles == want_stats.visited_tiles);
    CHECK(stats.empty_rows == want_stats.empty_rows);
    CHECK(std::memcmp(got.data(), want.data(), got.size_bytes()) == 0);  // the same kernel over the same mask
  }
  TileMask broken = mask;
  broken.row_ptr.back() += 1;
  CHECK_THROWS_AS(kokkos::upload(broken, Memory::host), Error);
  if (kokkos::execution_spaces().find("HIP") == std::string::npos)
    CHECK_THROWS_WITH_AS(kokkos::upload(mask, Memory::hip), doctest::Contains("no execution space"), Error);
}

TEST_CASE("kokkos: estimate_on_device and its attend refuse what they cannot do, in words") {
  SmallCall c;
  const kokkos::DeviceEstimate device = kokkos::estimate_on_device(sparge::Config{}, c.p, c.q.view(), c.k.view());
  Problem longer = c.p;
  longer.seqlen_q = longer.seqlen_kv = 50;  // another problem: the mask was not estimated for it
  HostTensor q(c.p.dtype, 1, 2, 50, 64), k(c.p.dtype, 1, 1, 50, 64), v = k, o(DType::f32, 1, 2, 50, 64);
  CHECK_THROWS_WITH_AS(kokkos::attend(longer, q.view(), k.view(), v.view(), device, o.view()),
                       doctest::Contains("was not estimated for"), Error);
}

TEST_CASE("kokkos: what it does not cover is said in words, and asking for it fails with those words") {
  SmallCall c;
  if (kokkos::execution_spaces().find("Cuda") == std::string::npos) {  // CUDA memory, no CUDA space: said in words
    TensorView qd = c.q.view(), kd = c.k.view();
    qd.memory = kd.memory = Memory::cuda;
    EstimateOptions eo;
    eo.backend = "kokkos";
    CHECK_THROWS_WITH_AS(estimate(sparge::Config{}, c.p, qd, kd, eo), doctest::Contains("built without CUDA"), Error);
  }
  if (kokkos::execution_spaces().find("HIP") == std::string::npos) {  // AMD memory, no HIP space: said in words
    TensorView qd = c.q.view(), kd = c.k.view(), vd = c.v.view(), od = c.o.view();
    qd.memory = kd.memory = vd.memory = od.memory = Memory::hip;
    AttendOptions ao;
    ao.backend = "kokkos";
    CHECK_THROWS_WITH_AS(attend(c.p, qd, kd, vd, c.mask, od, ao), doctest::Contains("HIP memory, but Kokkos was built without HIP"),
                         Error);
    ao.backend = "auto";  // no backend of this build reads AMD memory: the dispatcher says so instead of running one
    CHECK_THROWS_WITH_AS(attend(c.p, qd, kd, vd, c.mask, od, ao), doctest::Contains("built without HIP"), Error);
  }
  for (const auto& be : backends())
    if (be->name() == "kokkos") {
      AttendOptions auto_options;
      const auto why = be->not_supported_reasons(c.p, c.q.view(), c.k.view(), c.v.view(), c.mask, c.o.view(), auto_options);
      REQUIRE(why.size() == 1);
      CHECK(why[0].find("options.backend = \"kokkos\"") != std::string::npos);
    }
}

TEST_CASE("kokkos: PV-skip decisions and outputs as the reference's (tests/conformance/executor_options.hpp)") {
  auto memory = conformance::host_adapter();
  check_pv_skip(*memory);
}

TEST_CASE("kokkos: the int8 QKᵀ mode against the reference over the executor table (tests/conformance/executor_options.hpp)") {
  auto memory = conformance::host_adapter();
  check_int8(*memory);
}

/// The executor table on the host (conformance/executor_table.hpp), each case plain and (resumed_too) resumed, under
/// the current environment.
void check_executor_table(bool resumed_too) {
  auto memory = conformance::host_adapter();
  int ran = 0;
  // The dispatch on a host space: the register-tiled kernel for Dv 64 / 128 unless the generic one is forced (the
  // tensor-core kernel is Kokkos::Cuda's only).
  const auto dispatch = [](const conformance::ExecutorCase& c, const conformance::ExecutorOutcome& r) {
    const std::int64_t dv = c.dv == 0 ? c.d : c.dv;
    const bool generic = std::getenv("SPATTN_KOKKOS_EXECUTOR") != nullptr || (dv != 64 && dv != 128);
    CHECK(r.kernel == (generic ? "generic" : "tile"));
  };
  for (const bool resumed : {false, true}) {
    if (resumed && !resumed_too) break;
    const ExecutorTableRun run = run_executor_table("kokkos", *memory, resumed, "host memory", dispatch);
    CHECK(run.refused == 0);
    ran += run.ran;
  }
  CHECK(ran == (resumed_too ? 2 : 1) * static_cast<int>(conformance::executor_cases().size()));
}

/// The executor table on the generic kernel (SPATTN_KOKKOS_EXECUTOR=generic), plain and resumed: the register-tiled
/// kernel (flash_tile.hpp) runs every Dv 64 / 128 case of the conformance table, the generic one keeps its coverage here.
TEST_CASE("kokkos: executor table on the generic kernel (plain, then resumed)") {
  setenv("SPATTN_KOKKOS_EXECUTOR", "generic", 1);
  check_executor_table(true);
  unsetenv("SPATTN_KOKKOS_EXECUTOR");
}

/// The executor table on the host with the generic kernel's GPU team shape (64-row blocks, 32-key chunks;
/// SPATTN_KOKKOS_GPU_SHAPE): the same kernel code as on a GPU, one thread per team. (The tiled kernel has one geometry
/// on every space: the conformance table runs it on the host as on a GPU.)
TEST_CASE("kokkos: executor table with the GPU's team shape on the host") {
  setenv("SPATTN_KOKKOS_GPU_SHAPE", "1", 1);
  setenv("SPATTN_KOKKOS_EXECUTOR", "generic", 1);
  check_executor_table(false);
  unsetenv("SPATTN_KOKKOS_GPU_SHAPE");
  unsetenv("SPATTN_KOKKOS_EXECUTOR");
}

/// BFLA on Kokkos, decision by decision (tests/conformance/kokkos_bfla.hpp): the portable group scores.
TEST_CASE("kokkos: SpargeAttn and FG-Attn pooled in staged chunks of 1 and 5 rows, masks as the reference's") {
  auto memory = conformance::host_adapter();
  check_pool_chunks(*memory);
}

TEST_CASE("kokkos: BFLA group scores within their rounding bound, every rule after them exact") {
  auto memory = conformance::host_adapter();
  check_bfla_scores(*memory, 2.5);
}

/// AnchorAttention on Kokkos, decision by decision, over every AnchorAttention case of the shared table
/// (tests/conformance/kokkos_anchor.hpp): anchors within their rounding bound (c = 2.5: the portable kernel's fma
/// chains), the mask bit-identical to reference::anchor_attn_select over the Kokkos anchors (every rule after them).
TEST_CASE("kokkos: AnchorAttention anchors within their rounding bound, every rule after them exact") {
  auto memory = conformance::host_adapter();
  check_anchor_attn(*memory, 2.5, true);
}

/// SALE on Kokkos, decision by decision, over every SALE case of the shared table:
///  (a) every row's sink-local max m is within the rounding bound of the reference's (both are maxima of the same
///      exact scores q_i·k'_j, D-term fp32 dot products): |Δm| ≤ c·D·2⁻²⁴·scale·log2e·‖q_i‖·max_j ‖k'_j‖, c = 2.5;
///  (b) codes, scales, biases and integer products are the reference's bits: reference::sale_select over the Kokkos
///      sink-local states gives this mask and these margins bit for bit.
TEST_CASE("kokkos: SALE sink-local states within their rounding bound, margins and mask exact given them") {
  constexpr double kC = 2.5;
  int ran = 0;
  for (const conformance::EstimatorCase& c : conformance::estimator_cases()) {
    const auto* cfg = std::get_if<sale::Config>(&c.config);
    if (cfg == nullptr) continue;
    const std::string case_name(c.name);
    CAPTURE(case_name);
    const conformance::EstimatorInputs in = conformance::estimator_inputs(c);
    const Problem& p = in.problem;
    std::vector<float> margins;
    std::vector<SoftmaxState> states;
    const TileMask got = kokkos::sale_estimate_with_states(p, in.q.view(), in.k.view(), *cfg, margins, states);
    const reference::SaleEstimate want = reference::sale_estimate(p, in.q.view(), in.k.view(), *cfg);
    REQUIRE(states.size() == want.sink_local.size());
    const double sl = double(p.softmax_scale()) * 1.4426950408889634;
    const std::int64_t d = p.head_dim;
    std::int64_t compared = 0, outside = 0;
    const auto norm = [&](const float* x) {
      double s = 0.0;
      for (std::int64_t e = 0; e < d; ++e) s += double(x[e]) * double(x[e]);
      return std::sqrt(s);
    };
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < p.heads_q; ++h) {
        const reference::SaleHeadInputs hi = reference::sale_head_inputs(p, in.q.view(), in.k.view(), *cfg, b, h);
        double k_max = 0.0;
        for (std::int64_t j = 0; j < p.seqlen_kv_of(b); ++j) k_max = std::max(k_max, norm(hi.k_centred.data() + j * d));
        for (std::int64_t i = 0; i < p.seqlen_q_of(b); ++i) {
          const auto at = static_cast<std::size_t>((b * p.heads_q + h) * p.seqlen_q + i);
          const float m_got = states[at].m, m_want = want.sink_local[at].m;
          ++compared;
          if (std::isinf(m_want)) {
            outside += m_got == m_want ? 0 : 1;
            continue;
          }
          const double bound = kC * double(d) * std::ldexp(1.0, -24) * sl * norm(hi.q_raw.data() + i * d) * k_max;
          if (!(std::fabs(double(m_got) - double(m_want)) <= bound)) ++outside;
        }
      }
    CHECK(compared > 0);
    CHECK(outside == 0);
    const reference::SaleEstimate given = reference::sale_select(p, in.q.view(), in.k.view(), *cfg, states);
    CHECK(got.shape == given.mask.shape);
    CHECK(got.row_ptr == given.mask.row_ptr);
    CHECK(got.tiles == given.mask.tiles);
    REQUIRE(margins.size() == given.margins.size());
    std::int64_t margin_bits_differ = 0;
    for (std::size_t i = 0; i < margins.size(); ++i)
      margin_bits_differ += std::memcmp(&margins[i], &given.margins[i], sizeof(float)) != 0 &&
                                    !(std::isnan(margins[i]) && std::isnan(given.margins[i]))
                                ? 1
                                : 0;
    CHECK(margin_bits_differ == 0);
    ++ran;
  }
  CHECK(ran >= 7);
}

}  // namespace
}  // namespace spattn::test
