// GPU only (tests/README.md): the CUDA executor — the sm90 work order, the shared executor table on both kernels and
// both load paths (conformance/executor_table.hpp), PV-skip, the int8 QKᵀ mode, a DeviceTileMask outliving its source.
// Outputs are poisoned (all bits set: NaN in every dtype) before the kernel runs, so an unwritten element fails; LSE
// and the empty-row count are compared too.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common.hpp"
#include "../conformance/conformance.hpp"
#include "../conformance/executor_options.hpp"
#include "../conformance/executor_table.hpp"
#include "cuda_memory.hpp"
#include "output_mismatches.hpp"
#include "spattn/cuda/backend.hpp"
#include "spattn/reference/executor.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

/// The shared executor table (conformance/executor_table.hpp) on the CUDA backend, in one call per case or resumed
/// (two calls: AttendOptions::state_out, then resume); returns how many cases it covered. Cases outside the backend's
/// coverage (f32 inputs, head dims 96/256, tile_q 48, …) are refused with its reasons.
int run_cuda_executor_table(const char* what, bool resumed = false) {
  CudaMemory memory;
  const ExecutorTableRun run = run_executor_table("cuda", memory, resumed, what);
  const std::string label = std::string(what) + (resumed ? ", resumed" : "");
  MESSAGE(label << ": " << run.ran << " cases ran on the CUDA backend, " << run.refused << " outside its coverage");
  return run.ran;
}

/// DeviceTileMask::order() against an order built here by sorting: per sequence, sections of order_section()
/// consecutive mask heads, and inside a section every 128-row block of those heads once (blocks past the sequence's
/// end left out), longest first (mask_policy::runs_before, index head in the section · blocks + block).
TEST_CASE("The sm90 work order lists every block once, longest first inside sections of heads") {
  struct Shape {
    const char* name;
    std::int64_t batch, heads, n, tile_q;
    std::vector<std::int64_t> lens;
  };
  const std::vector<Shape> shapes = {{"H 40, N 1000", 1, 40, 1000, 128, {}},
                                     {"H 32, N 8192, 256-row tiles", 1, 32, 8192, 256, {}},
                                     {"H 3, N 40000", 1, 3, 40000, 128, {}},
                                     {"varlen B 3, H 6", 3, 6, 900, 128, {900, 1, 300}}};
  for (const Shape& c : shapes) {
    CAPTURE(c.name);
    Problem p;
    p.batch = c.batch;
    p.heads_q = p.heads_kv = c.heads;
    p.seqlen_q = p.seqlen_kv = c.n;
    p.head_dim = 128;
    p.causal = true;
    if (!c.lens.empty()) {
      p.cu_seqlens_q = {0};
      for (std::int64_t len : c.lens) p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + len);
      p.cu_seqlens_kv = p.cu_seqlens_q;
    }
    const TileMask mask = random_mask(MaskShape::of(p, static_cast<std::int32_t>(c.tile_q), 128), 0.4);
    const cuda::DeviceTileMask dm(mask);
    REQUIRE(dm.order() != nullptr);
    std::vector<std::int32_t> got(static_cast<std::size_t>(dm.order_size()));
    cuda_check(cudaDeviceSynchronize());
    cuda_check(cudaMemcpy(got.data(), dm.order(), got.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost));
    const std::int64_t section = dm.order_section(), blocks = dm.order_blocks(), per_tile = c.tile_q / 128;
    CHECK(section >= 1);
    CHECK(section <= c.heads);
    MESSAGE(c.name << ": " << section << " heads per section, " << got.size() << " blocks");
    std::vector<std::int32_t> want;
    for (std::int64_t b = 0; b < c.batch; ++b) {
      const std::int64_t nb = (mask.shape.seqlen_q_of(b) + 127) / 128;
      for (std::int64_t h0 = 0; h0 < c.heads; h0 += section) {
        struct Block {
          std::int64_t kept, index;
          std::int32_t code;
        };
        std::vector<Block> sec;
        for (std::int64_t h = h0; h < std::min(h0 + section, c.heads); ++h)
          for (std::int64_t i = 0; i < nb; ++i)
            sec.push_back({static_cast<std::int64_t>(mask.row(b, h, i / per_tile).size()), (h - h0) * nb + i,
                           static_cast<std::int32_t>((b * c.heads + h) * blocks + i)});
        std::sort(sec.begin(), sec.end(), [](const Block& x, const Block& y) {
          return x.kept > y.kept || (x.kept == y.kept && x.index < y.index);
        });
        for (const Block& x : sec) want.push_back(x.code);
      }
    }
    CHECK(got == want);
  }
}

TEST_CASE("spattn::upload copies a host tensor into CUDA memory, layout kept, and download() copies it back") {
  const Workload w = test_workload(WorkloadKind::llm, 300, 4, 2);
  const DeviceBuffer d = upload(w.q, Memory::cuda);
  const TensorView h = w.q.view(), dv = d.view();
  CHECK(dv.memory == Memory::cuda);
  CHECK(dv.data != h.data);
  CHECK((dv.dtype == h.dtype && dv.stride_b == h.stride_b && dv.stride_h == h.stride_h && dv.stride_n == h.stride_n));
  CHECK(d.size_bytes() == w.q.size_bytes());
  HostTensor back = w.q;
  back.poison();
  d.download(back);
  CHECK(std::memcmp(back.data(), w.q.data(), w.q.size_bytes()) == 0);
  HostTensor wrong(DType::f32, 1, 1, 1, 1);
  CHECK_THROWS_WITH_AS(d.download(wrong), doctest::Contains("bytes"), Error);
}

TEST_CASE("CUDA executor matches the reference over the shared conformance table") {
  CHECK(run_cuda_executor_table("default (sm90 on Hopper for tile_q multiples of 128, TMA)") >= 37);
  CHECK(run_cuda_executor_table("default (sm90 on Hopper for tile_q multiples of 128, TMA)", true) >= 37);
}

// Masks with tile_q a multiple of 128 run the sm90 WGMMA kernel on an H100/H200; the table runs again with
// SPATTN_CUDA_NO_TMA=1 (every chunk through the cp.async gather) and with SPATTN_CUDA_KERNEL=sm80, so both
// kernels and both load paths are held to the reference.
TEST_CASE("CUDA executor with the cp.async gather only (no TMA) matches the reference") {
  setenv("SPATTN_CUDA_NO_TMA", "1", 1);
  CHECK(run_cuda_executor_table("SPATTN_CUDA_NO_TMA=1") >= 37);
  CHECK(run_cuda_executor_table("SPATTN_CUDA_NO_TMA=1", true) >= 37);
  unsetenv("SPATTN_CUDA_NO_TMA");
}

// The sm90 kernel's persistent CTAs draw items from a work queue; the table's launches have at most a few hundred
// items, so most CTAs of a full grid run one. SPATTN_CUDA_GRID=2 makes each CTA run many items in a row (items with no
// chunk, merged and plain, short and long), with and without TMA.
TEST_CASE("CUDA executor on a grid of 2 CTAs (many items per CTA) matches the reference") {
  setenv("SPATTN_CUDA_GRID", "2", 1);
  CHECK(run_cuda_executor_table("SPATTN_CUDA_GRID=2") >= 37);
  CHECK(run_cuda_executor_table("SPATTN_CUDA_GRID=2", true) >= 37);
  setenv("SPATTN_CUDA_NO_TMA", "1", 1);
  CHECK(run_cuda_executor_table("SPATTN_CUDA_GRID=2 SPATTN_CUDA_NO_TMA=1") >= 37);
  unsetenv("SPATTN_CUDA_NO_TMA");
  unsetenv("SPATTN_CUDA_GRID");
}

TEST_CASE("CUDA executor with the mma.sync kernel forced matches the reference") {
  setenv("SPATTN_CUDA_KERNEL", "sm80", 1);
  CHECK(run_cuda_executor_table("SPATTN_CUDA_KERNEL=sm80") >= 37);
  CHECK(run_cuda_executor_table("SPATTN_CUDA_KERNEL=sm80", true) >= 37);
  unsetenv("SPATTN_CUDA_KERNEL");
}

// PV-skip on the sm90 kernel. Q and K hold small integers, so every score is an exact integer on both sides
// (any summation order) and the skip decisions — exact comparisons of scaled maxima — are the reference's;
// the skipped counts must then be equal and the outputs within the usual tolerance.
struct PvCase {
  const char* name;
  std::int64_t hq, hkv, nq, nkv;
  bool causal;
  DType dtype;
  std::int32_t tile_q, tile_k;
  float threshold;
  int vote, exempt;
  double density;
};

std::int64_t check_pv_case(const PvCase& c, bool int8 = false) {
  CAPTURE(c.name);
  CAPTURE(int8);
  Problem p;
  p.heads_q = c.hq;
  p.heads_kv = c.hkv;
  p.seqlen_q = c.nq;
  p.seqlen_kv = c.nkv;
  p.head_dim = 128;
  p.causal = c.causal;
  p.dtype = c.dtype;
  HostTensor q(c.dtype, 1, c.hq, c.nq, 128), k(c.dtype, 1, c.hkv, c.nkv, 128), v(c.dtype, 1, c.hkv, c.nkv, 128);
  // Q in {0, 1, 2}; K in {1, 2} ("hot" keys) except every third block of 128 keys, which holds {-2, -1, 0}
  // ("cold"): a cold tile's scores sit far below the running max, so it is skipped unless exempt.
  for (std::int64_t h = 0; h < c.hq; ++h)
    for (std::int64_t n = 0; n < c.nq; ++n)
      for (std::int64_t d = 0; d < 128; ++d) q.set(0, h, n, d, std::floor(static_cast<float>(uniform(0.0, 3.0))));
  for (std::int64_t h = 0; h < c.hkv; ++h)
    for (std::int64_t n = 0; n < c.nkv; ++n) {
      const bool cold = (n / 128) % 3 == 1;
      for (std::int64_t d = 0; d < 128; ++d)
        k.set(0, h, n, d, std::floor(static_cast<float>(cold ? uniform(-2.0, 1.0) : uniform(1.0, 3.0))));
    }
  fill_random(v);
  const TileMask mask = random_mask(MaskShape::of(p, c.tile_q, c.tile_k), c.density);
  AttendOptions options;
  options.qk_int8 = int8;
  options.pv_threshold = c.threshold;
  options.pv_vote_rows = c.vote;
  options.pv_exempt_last = c.exempt;
  if (c.hq > 1) {  // per-head thresholds: head 1 never skips
    options.pv_threshold_per_head.assign(static_cast<std::size_t>(c.hq), c.threshold);
    options.pv_threshold_per_head[1] = INFINITY;
  }
  HostTensor want(DType::f32, 1, c.hq, c.nq, 128), got(DType::f32, 1, c.hq, c.nq, 128);
  const AttendStats ref = reference::attend(p, q.view(), k.view(), v.view(), mask, want.view(), options);

  DeviceTensor dq(q.size_bytes()), dk(k.size_bytes()), dv(v.size_bytes()), dout(got.size_bytes());
  TensorView o_view = got.view();
  o_view.data = dout.ptr;
  o_view.memory = Memory::cuda;
  cuda_check(cudaMemset(dout.ptr, 0xff, dout.bytes));
  const AttendStats stats = attend(p, on_device(q, dq), on_device(k, dk), on_device(v, dv), mask, o_view, options);
  CHECK(stats.backend == "cuda");
  cuda_check(cudaMemcpy(got.data(), dout.ptr, got.size_bytes(), cudaMemcpyDeviceToHost));
  double worst = 0;
  CHECK(mismatches(got, want, c.dtype, worst) == 0);
  CHECK(stats.pv_skipped == ref.pv_skipped);
  CHECK(stats.empty_rows == ref.empty_rows);
  MESSAGE(std::string(c.name) << ": skipped " << stats.pv_skipped << " (reference " << ref.pv_skipped << ")");
  return ref.pv_skipped;
}

TEST_CASE("CUDA PV-skip (sm90 kernel) skips what the reference skips") {
  const std::vector<PvCase> cases = {
      {"vote 128, tile_k 64, causal", 2, 1, 1000, 1000, true, DType::bf16, 128, 64, 4.0f, 0, 1, 1.0},
      {"vote 16, tile_k 64, causal", 2, 2, 777, 777, true, DType::f16, 128, 64, 4.0f, 16, 1, 0.7},
      {"vote 64, tile_k 128, exempt 2", 2, 1, 1200, 1200, true, DType::bf16, 128, 128, 3.0f, 64, 2, 1.0},
      {"vote 16, non-causal, Nq < Nkv", 2, 2, 300, 1500, false, DType::bf16, 256, 64, 6.0f, 16, 0, 0.8},
      {"vote 128, huge threshold: nothing skipped", 2, 2, 513, 513, true, DType::f16, 128, 64, 1e9f, 0, 1, 1.0},
  };
  std::int64_t skipped = 0;
  for (const PvCase& c : cases) skipped += check_pv_case(c);
  CHECK(skipped > 0);  // the table exercises skipping, not just the pass-through
  // SpargeAttn's usual pairing: PV-skip on the int8 QKᵀ scores (the planted scores sit far from the thresholds, so the
  // ≤ 2-ulp difference in the scores' rounding (flash_sm90.cu, kInt8) cannot flip a vote).
  std::int64_t skipped_int8 = 0;
  for (const PvCase& c : cases) skipped_int8 += check_pv_case(c, true);
  CHECK(skipped_int8 > 0);
}

// SpargeAttn's quantized compute mode on the sm90 kernel (int8 codes by the prologue of int8_quant.cu, s8 WGMMA) over
// the executor table, three block-size pairs, TMA and cp.async-only; the mma.sync kernel refuses it in words.
TEST_CASE("CUDA int8 QKᵀ mode (sm90 kernel) matches the reference over the executor table") {
  CudaMemory memory;
  CHECK(check_int8(memory, "cuda") >= 3 * 30);
  setenv("SPATTN_CUDA_NO_TMA", "1", 1);
  CHECK(check_int8(memory, "cuda") >= 3 * 30);
  unsetenv("SPATTN_CUDA_NO_TMA");
  setenv("SPATTN_CUDA_KERNEL", "sm80", 1);
  const conformance::ExecutorInputs in = conformance::make_inputs(conformance::executor_cases()[0]);
  AttendOptions opt;
  opt.qk_int8 = true;
  const Compared r = compare_with_reference(in.problem, in.q, in.k, in.v, in.mask, DType::f32, opt, memory, 1.0, "cuda");
  REQUIRE(!r.not_supported.empty());
  CHECK(r.not_supported[0].find("int8 QK mode runs on the sm90 kernel only") != std::string::npos);
  unsetenv("SPATTN_CUDA_KERNEL");
}

// DeviceTileMask keeps no reference to the TileMask it was built from: one built from a temporary (destroyed at
// the end of its declaration) still runs attend_async correctly, on each kernel path (sm90 blocks of 128 rows; tiles
// of 64 and 16 rows as merged items on sm90, as 64-row CTAs and merged items on mma.sync).
TEST_CASE("DeviceTileMask built from a temporary TileMask runs attend_async") {
  struct Shape {
    std::int32_t tile_q, tile_k;
  };
  for (const Shape sh : {Shape{128, 64}, Shape{64, 32}, Shape{16, 16}}) {
    CAPTURE(sh.tile_q);
    Problem p;
    p.heads_q = 4;
    p.heads_kv = 2;
    p.seqlen_q = p.seqlen_kv = 300;
    p.head_dim = 64;
    p.causal = true;
    p.dtype = DType::bf16;
    HostTensor q(p.dtype, 1, 4, 300, 64), k(p.dtype, 1, 2, 300, 64), v(p.dtype, 1, 2, 300, 64);
    fill_random(q, 1.5);
    fill_random(k, 1.5);
    fill_random(v);
    const MaskShape shape = MaskShape::of(p, sh.tile_q, sh.tile_k);
    const cuda::DeviceTileMask dmask(TileMask::dense(shape));
    CHECK(dmask.shape() == shape);
    CHECK(dmask.tile_q() == sh.tile_q);
    CHECK(dmask.tile_k() == sh.tile_k);
    CHECK(dmask.mask_heads() == shape.mask_heads);
    CHECK(dmask.num_q_tiles() == shape.num_q_tiles());

    HostTensor want(DType::f32, 1, 4, 300, 64), got(DType::f32, 1, 4, 300, 64);
    const AttendStats ref = reference::attend(p, q.view(), k.view(), v.view(), TileMask::dense(shape), want.view());
    DeviceTensor dq(q.size_bytes()), dk(k.size_bytes()), dv(v.size_bytes()), dout(got.size_bytes()), dempty(sizeof(int));
    TensorView o_view = got.view();
    o_view.data = dout.ptr;
    o_view.memory = Memory::cuda;
    cuda_check(cudaMemset(dout.ptr, 0xff, dout.bytes));
    cuda_check(cudaMemset(dempty.ptr, 0, dempty.bytes));
    cuda::attend_async(p, on_device(q, dq), on_device(k, dk), on_device(v, dv), dmask, o_view, nullptr, nullptr, nullptr,
                       static_cast<int*>(dempty.ptr));
    cuda_check(cudaDeviceSynchronize());
    cuda_check(cudaMemcpy(got.data(), dout.ptr, got.size_bytes(), cudaMemcpyDeviceToHost));
    int empty_rows = -1;
    cuda_check(cudaMemcpy(&empty_rows, dempty.ptr, sizeof(int), cudaMemcpyDeviceToHost));
    double worst = 0;
    CHECK(mismatches(got, want, p.dtype, worst) == 0);
    CHECK(empty_rows == ref.empty_rows);
    // The empty-row counter is optional: every row of an empty mask, with none given, gives zeros (the kernel once
    // counted through the null pointer).
    const cuda::DeviceTileMask none(
        TileMask::from_rows(shape, std::vector<std::vector<std::int32_t>>(static_cast<std::size_t>(shape.num_rows()))));
    cuda_check(cudaMemset(dout.ptr, 0xff, dout.bytes));
    cuda::attend_async(p, on_device(q, dq), on_device(k, dk), on_device(v, dv), none, o_view, nullptr, nullptr, nullptr,
                       nullptr);
    cuda_check(cudaDeviceSynchronize());
    cuda_check(cudaMemcpy(got.data(), dout.ptr, got.size_bytes(), cudaMemcpyDeviceToHost));
    std::int64_t nonzero = 0;
    for (const float x : got.to_float()) nonzero += x != 0.0f ? 1 : 0;
    CHECK(nonzero == 0);
  }
}

}  // namespace
}  // namespace spattn::test
