// GPU only (tests/README.md): cuda::Plan, the device-resident pipeline — resumed from an estimator's exact pass, in the
// int8 QKᵀ mode, through sparse_attention() on CUDA tensors, captured in a CUDA graph and replayed, on a caller's
// workspace. Masks are held to the contract table (conformance/contract.cpp), outputs to the reference executor's over
// the device's own mask.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "../common.hpp"
#include "../conformance/conformance.hpp"
#include "../conformance/contract.hpp"
#include "cuda_memory.hpp"
#include "device_case.hpp"
#include "output_mismatches.hpp"
#include "spattn/cuda/backend.hpp"
#include "spattn/cuda/plan.hpp"
#include "spattn/reference/executor.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

/// The estimators whose exact pass becomes part of the answer (SALE's sink-local region, AnchorAttention's anchor
/// region) over their cases of the shared estimator table (odd N, GQA, Nq < Nkv, varlen, fp16/bf16, D 64/96/128/256;
/// every AnchorAttention case must run, D 256 included):
/// Plan::run — the pass as the executor over its region (O and the row states), then the executor resuming every row
/// over the rest of the selection — gives (a) a selection (covered ∪ rest) that decides as the plain estimate does, up
/// to the few decisions that the two passes' rounding can flip (the thresholds come from states summed by different
/// kernels), and (b) the reference executor's output over that selection, within the dtype tolerance (O poisoned first;
/// a tile both covered and in the rest would count twice and fail it), with its visited-tile count.
TEST_CASE("Plan resumed from the estimator's exact pass (SALE, AnchorAttention): output equals the reference's") {
  CudaMemory memory;
  int ran = 0, anchor_ran = 0, anchor_d256 = 0;
  for (const conformance::EstimatorCase& c : conformance::estimator_cases()) {
    const bool anchor = std::holds_alternative<anchor_attn::Config>(c.config);
    const bool resuming = std::holds_alternative<sale::Config>(c.config) || anchor;
    if (!resuming) continue;
    const std::string case_name(c.name);
    CAPTURE(case_name);
    const DeviceCase device_case(c, memory);
    const auto& [in, q, k, cu_q, cu_kv] = device_case;
    const Problem& p = in.problem;
    const std::vector<std::string> why = cuda::Plan::not_supported_reasons(c.config, p);
    if (!why.empty()) {
      CHECK_MESSAGE(!anchor, why.front());  // AnchorAttention runs every case of the table (head dims 64/96/128/256)
      continue;
    }
    HostTensor v_host(p.dtype, in.k.batch(), in.k.heads(), in.k.seqlen(), p.dim_v());
    fill_random(v_host);
    const TensorView v = memory.upload(v_host);
    HostTensor got(DType::f32, in.q.batch(), in.q.heads(), in.q.seqlen(), p.dim_v()), want = got;
    const TensorView o = memory.poisoned_like(got);
    cuda::Plan plan(c.config, p);
    plan.estimate(q, k, nullptr);
    const TileMask plain = plan.selection(nullptr);
    plan.run(q, k, v, o, nullptr);
    const TileMask rest = plan.mask().download(nullptr);
    const TileMask mask = plan.selection(nullptr, &rest);
    REQUIRE(mask.shape == plain.shape);
    memory.download(o, got);
    std::int64_t covered = 0;  // tiles of the selection that the resumed executor did not visit
    for (std::int64_t r = 0; r < mask.shape.num_rows(); ++r)
      covered += (mask.row_ptr[r + 1] - mask.row_ptr[r]) - (rest.row_ptr[r + 1] - rest.row_ptr[r]);
    CHECK(covered > 0);
    const std::vector<std::uint8_t> a = mask.to_bitmap(), b = plain.to_bitmap();
    std::int64_t differing = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differing += a[i] != b[i] ? 1 : 0;
    const std::int64_t decisions = static_cast<std::int64_t>(a.size());
    CHECK(differing * 100 <= decisions);
    const AttendStats ra = reference::attend(p, in.q.view(), in.k.view(), v_host.view(), mask, want.view());
    double worst = 0;
    CHECK(mismatches(got, want, p.dtype, worst) == 0);
    CHECK(plan.stats(nullptr, &mask).visited_tiles == ra.visited_tiles);
    MESSAGE(case_name << ": " << covered << " tiles covered by the estimator's pass, " << rest.stats().kept_tiles
                      << " by the resumed executor; " << differing << " of " << decisions
                      << " decisions differ from the plain estimate; worst |err| " << worst);
    ++ran;
    anchor_ran += anchor ? 1 : 0;
    anchor_d256 += anchor && p.head_dim == 256 ? 1 : 0;
  }
  MESSAGE(ran << " resumed SALE / AnchorAttention cases (" << anchor_ran << " AnchorAttention, " << anchor_d256
              << " of them D = 256)");
  CHECK(ran >= 19);  // at least 7 SALE cases, and the 12 AnchorAttention cases at this writing
  CHECK(anchor_ran >= 12);
  CHECK(anchor_d256 >= 3);
}

// The int8 QKᵀ mode through cuda::Plan: every kept tile is computed from the codes, so a resuming estimator's exact bf16
// pass (SALE's sink-local region, AnchorAttention's anchors) is not part of the answer — run() attends the whole
// selection, as the reference's pipeline does in that mode. SpargeAttn, the mode's own method, alongside.
TEST_CASE("Plan in the int8 QKᵀ mode: the whole selection from the codes, as the reference (SALE, AnchorAttention, SpargeAttn)") {
  CudaMemory memory;
  int ran = 0, anchor_d256 = 0;
  for (const conformance::EstimatorCase& c : conformance::estimator_cases()) {
    const bool anchor = std::holds_alternative<anchor_attn::Config>(c.config);
    const bool wanted = std::holds_alternative<sale::Config>(c.config) || anchor ||
                        std::holds_alternative<sparge::Config>(c.config);
    if (!wanted) continue;
    const std::string case_name(c.name);
    CAPTURE(case_name);
    const DeviceCase device_case(c, memory);
    const auto& [in, q, k, cu_q, cu_kv] = device_case;
    const Problem& p = in.problem;
    AttendOptions options;
    options.qk_int8 = true;
    const std::vector<std::string> why = cuda::Plan::not_supported_reasons(c.config, p);
    if (!why.empty()) {
      CHECK_MESSAGE(!anchor, why.front());  // AnchorAttention runs every case of the table (head dims 64/96/128/256)
      continue;
    }
    HostTensor v_host(p.dtype, in.k.batch(), in.k.heads(), in.k.seqlen(), p.dim_v());
    fill_random(v_host);
    const TensorView v = memory.upload(v_host);
    HostTensor got(DType::f32, in.q.batch(), in.q.heads(), in.q.seqlen(), p.dim_v()), want = got;
    const TensorView o = memory.poisoned_like(got);
    cuda::Plan plan(c.config, p, options);
    plan.run(q, k, v, o, nullptr);
    const TileMask mask = plan.mask().download(nullptr);
    const TileMask selection = plan.selection(nullptr);
    CHECK(mask.row_ptr == selection.row_ptr);  // nothing resumed: the executor ran the whole selection
    CHECK(mask.tiles == selection.tiles);
    memory.download(o, got);
    const AttendStats ra = reference::attend(p, in.q.view(), in.k.view(), v_host.view(), mask, want.view(), options);
    double worst = 0;
    CHECK(mismatches(got, want, p.dtype, worst) == 0);
    CHECK(plan.stats(nullptr, &mask).empty_rows == ra.empty_rows);
    ++ran;
    anchor_d256 += anchor && p.head_dim == 256 ? 1 : 0;
  }
  MESSAGE(ran << " Plan cases in the int8 mode (" << anchor_d256 << " AnchorAttention D = 256)");
  CHECK(ran >= 18);
  CHECK(anchor_d256 >= 3);
}

/// sparse_attention() on CUDA tensors runs the device pipeline (mask never on the host between the stages); its
/// mask equals the reference estimator's and its output the reference executor's over that mask.
TEST_CASE("sparse_attention() on CUDA tensors: device estimate → attend equals the reference") {
  CudaMemory memory;
  const auto sparge_of = [](std::int32_t block_q, std::int32_t block_k, float topk) {
    sparge::Config cfg;
    cfg.block_q = block_q;
    cfg.block_k = block_k;
    cfg.topk = topk;
    cfg.tau = {0.9f};
    return cfg;
  };
  const auto fg_of = [](std::int32_t tile_q, std::int32_t tile_k, float top_p) {
    fg_attn::Config cfg;
    cfg.tile_q = tile_q;
    cfg.tile_k = tile_k;
    cfg.top_p = top_p;
    return cfg;
  };
  struct Case {
    const char* name;
    MethodConfig config;
    WorkloadKind kind;
    std::int64_t hq, hkv, nq, nkv, d;
    bool causal;
    DType dtype;
  };
  const auto llm = WorkloadKind::llm, video = WorkloadKind::video;
  const Case cases[] = {
      {"sparge GQA 4:1 causal bf16 top-k", sparge_of(128, 64, 0.5f), llm, 8, 2, 1531, 1531, 128, true, DType::bf16},
      {"sparge non-causal f16 TopCdf D=64", sparge_of(128, 128, 0.0f), llm, 4, 4, 1000, 1000, 64, false, DType::f16},
      {"sparge Nq < Nkv causal 64x64", sparge_of(64, 64, 0.3f), llm, 4, 1, 300, 1100, 128, true, DType::bf16},
      // FG-Attn: 16/32-row query tiles, whose work items (128 rows on the sm90 kernel, 64 on mma.sync) are merged on
      // the device.
      {"fgattn video 32x32 bf16", fg_of(32, 32, 0.9f), video, 4, 4, 1000, 1000, 128, false, DType::bf16},
      {"fgattn 16x48 causal GQA f16", fg_of(16, 48, 0.8f), llm, 4, 2, 777, 777, 64, true, DType::f16},
      {"fgattn 64x16 Nq < Nkv bf16", fg_of(64, 16, 0.7f), video, 2, 1, 333, 1000, 128, false, DType::bf16}};
  for (const Case& c : cases) {
    CAPTURE(c.name);
    WorkloadSpec s;
    s.kind = c.kind;
    s.seqlen = c.nkv;
    s.seqlen_q = c.nq;
    s.heads_q = c.hq;
    s.heads_kv = c.hkv;
    s.head_dim = c.d;
    s.dtype = c.dtype;
    s.seed = test_seed() + 17;
    Workload w = make_workload(s);
    w.problem.causal = c.causal;
    const MethodConfig& cfg = c.config;
    const TensorView q = memory.upload(w.q), k = memory.upload(w.k), v = memory.upload(w.v);
    HostTensor got(DType::f32, 1, c.hq, c.nq, c.d), want = got;
    const TensorView o = memory.poisoned_like(got);
    AttendOptions options;
    options.backend = "cuda";
    const SparseAttentionResult r = sparse_attention(cfg, w.problem, q, k, v, o, options);
    memory.download(o, got);
    const Estimate ref = estimate(cfg, w.problem, w.q.view(), w.k.view());
    CHECK(r.estimate.backend == "cuda");
    CHECK(r.attend.backend == "cuda");
    CHECK(r.estimate.mask.row_ptr == ref.mask.row_ptr);
    CHECK(r.estimate.mask.tiles == ref.mask.tiles);
    const AttendStats ra = reference::attend(w.problem, w.q.view(), w.k.view(), w.v.view(), ref.mask, want.view());
    CHECK(r.attend.visited_tiles == ra.visited_tiles);
    CHECK(r.attend.empty_rows == ra.empty_rows);
    double worst = 0;
    CHECK(mismatches(got, want, c.dtype, worst) == 0);
    MESSAGE(std::string(c.name) << ": density " << ref.mask.stats().density << ", worst |err| " << worst);
  }
}

/// plan.run(q, k, v, o) captured in a CUDA graph on a new stream (global capture mode: any allocation, copy or
/// synchronisation inside would fail the capture), instantiated; destroyed with the object.
struct CapturedRun {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CapturedRun(cuda::Plan& plan, const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& o) {
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    plan.run(q, k, v, o, stream);
    cuda_check(cudaStreamEndCapture(stream, &graph));
    cuda_check(cudaGraphInstantiate(&exec, graph, 0));
  }
  ~CapturedRun() {
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
  CapturedRun(const CapturedRun&) = delete;
  CapturedRun& operator=(const CapturedRun&) = delete;
};

/// The whole estimate → attend sequence of a Plan captured in a CUDA graph (global capture mode: any allocation,
/// copy or synchronisation inside would fail the capture) and replayed on fresh inputs written into the same
/// buffers: each replay's mask and output are the reference's for those inputs.
/// The device mask agrees with the reference's as the contract table's (cuda, method) row says (conformance/contract.cpp:
/// exact, or at most 1 decision in 50 where tensor-core scores or statistics decide); the output is the reference
/// executor's over the device's own mask.
void check_graph_replays(const MethodConfig& cfg, WorkloadKind kind) {
  CAPTURE(method_name(cfg));
  const conformance::Contract& contract = conformance::contract_of("cuda", cfg);
  WorkloadSpec s;
  s.kind = kind;
  s.seqlen = 1200;
  s.heads_q = 4;
  s.heads_kv = 2;
  s.head_dim = 128;
  s.dtype = DType::bf16;
  s.seed = test_seed() + 1;
  Workload w = make_workload(s);
  cuda::Plan plan(cfg, w.problem);
  MESSAGE("plan workspace: " << plan.workspace_bytes() << " bytes");
  DeviceTensor dq(w.q.size_bytes()), dk(w.k.size_bytes()), dv(w.v.size_bytes());
  HostTensor got(DType::bf16, 1, 4, 1200, 128);
  DeviceTensor dout(got.size_bytes());
  TensorView q = on_device(w.q, dq), k = on_device(w.k, dk), v = on_device(w.v, dv);
  TensorView o = got.view();
  o.data = dout.ptr;
  o.memory = Memory::cuda;
  const CapturedRun captured(plan, q, k, v, o);
  const cudaStream_t stream = captured.stream;
  for (int replay = 0; replay < 3; ++replay) {
    CAPTURE(replay);
    if (replay > 0) {  // fresh inputs into the captured buffers
      s.seed = test_seed() + 100 + static_cast<std::uint64_t>(replay);
      w = make_workload(s);
      on_device(w.q, dq), on_device(w.k, dk), on_device(w.v, dv);
    }
    cuda_check(cudaMemset(dout.ptr, 0xff, dout.bytes));
    cuda_check(cudaGraphLaunch(captured.exec, stream));
    cuda_check(cudaStreamSynchronize(stream));
    const TileMask mask = plan.selection(stream);  // AnchorAttention: its anchor region and the stripes (resumed)
    const Estimate ref = estimate(cfg, w.problem, w.q.view(), w.k.view());
    REQUIRE(mask.shape == ref.mask.shape);
    const std::vector<std::uint8_t> a = mask.to_bitmap(), bref = ref.mask.to_bitmap();
    std::int64_t decisions = 0, differing = 0;
    for (std::int64_t h = 0; h < mask.shape.mask_heads; ++h)
      for (std::int64_t t = 0; t < mask.shape.num_q_tiles(); ++t)
        for (std::int64_t j = 0; j < mask.shape.reachable_k_tiles(0, t); ++j) {
          const auto at = static_cast<std::size_t>(mask.row_index(0, h, t) * mask.shape.num_k_tiles() + j);
          ++decisions;
          differing += a[at] != bref[at] ? 1 : 0;
        }
    MESSAGE(method_name(cfg) << " replay " << replay << ": " << differing << " of " << decisions
                             << " decisions differ from the reference");
    conformance::check_agreement(contract, decisions, differing, differing);  // no margins here: none explains a decision
    HostTensor want(DType::f32, 1, 4, 1200, 128);
    const AttendStats ra = reference::attend(w.problem, w.q.view(), w.k.view(), w.v.view(), mask, want.view());
    cuda_check(cudaMemcpy(got.data(), dout.ptr, dout.bytes, cudaMemcpyDeviceToHost));
    double worst = 0;
    CHECK(mismatches(got, want, DType::bf16, worst) == 0);
    CHECK(plan.stats(stream).visited_tiles == ra.visited_tiles);  // per query head (BFLA: a mask per KV head)
  }
}

TEST_CASE("Plan: estimate → attend captured in a CUDA graph and replayed on new inputs") {
  check_graph_replays(DenseConfig{}, WorkloadKind::llm);  // every reachable tile, written on the device
  check_graph_replays(DenseConfig{64, 32}, WorkloadKind::video);  // merged 128-row items on the sm90 kernel
  sparge::Config sp;  // 128 × 64 blocks, the authors' top-k 0.5
  sp.topk = 0.5f;
  check_graph_replays(sp, WorkloadKind::llm);
  fg_attn::Config fg;  // 32 × 32 tiles (merged items built on the device), the paper's top-p 0.9 (sparser than the default)
  fg.top_p = 0.9f;
  check_graph_replays(fg, WorkloadKind::video);
  fg.semantics = fg_attn::Semantics::union_keys;  // UNION over the greedy merge-XOR groups, planned on the device
  check_graph_replays(fg, WorkloadKind::video);
  bfla::Config bf;  // 128-key blocks of 32-token groups: several blocks at N = 1200
  bf.block = 128;
  bf.group = 32;
  bf.gamma = 0.9f;
  check_graph_replays(bf, WorkloadKind::llm);
  anchor_attn::Config an;  // groups of 512 rows (128 × 4): three groups at N = 1200; θ low enough to decide
  an.step = 4;
  an.theta = 3.0f;
  check_graph_replays(an, WorkloadKind::llm);  // the resumed executor on the sm90 kernel (512-row tiles)
  an.block = 32;  // groups of 64 rows: the anchor region and the resumed executor on the mma.sync kernel
  an.step = 2;
  check_graph_replays(an, WorkloadKind::llm);
  sale::Config sa;  // defaults: int4, τ = 0.004, 128 local keys; thresholds from the tensor-core statistics pass
  check_graph_replays(sa, WorkloadKind::llm);
  sa.bits = 8;
  sa.tau = {0.05f};
  check_graph_replays(sa, WorkloadKind::llm);
}

/// Device bytes in use (cudaMemGetInfo: what allocations take from the GPU, in the driver's pages).
std::size_t device_bytes_used() {
  std::size_t free = 0, total = 0;
  cuda_check(cudaMemGetInfo(&free, &total));
  return total - free;
}

/// Plan's workspace option: a plan built on a caller's buffer of Plan::required_bytes allocates no device memory,
/// writes only inside the buffer, and computes what a plan with its own allocations computes, bit for bit (mask and
/// output), also captured in a CUDA graph; a buffer one byte short, misaligned or null is refused with a message.
void check_caller_workspace(const MethodConfig& cfg, WorkloadKind kind, std::int64_t n, std::int64_t heads_q) {
  CAPTURE(method_name(cfg));
  CAPTURE(n);
  WorkloadSpec s;
  s.kind = kind;
  s.seqlen = n;
  s.heads_q = heads_q;
  s.heads_kv = 2;
  s.head_dim = 128;
  s.dtype = DType::bf16;
  s.seed = test_seed() + 7;
  const Workload w = make_workload(s);
  DeviceTensor dq(w.q.size_bytes()), dk(w.k.size_bytes()), dv(w.v.size_bytes());
  const TensorView q = on_device(w.q, dq), k = on_device(w.k, dk), v = on_device(w.v, dv);
  HostTensor want(DType::bf16, 1, heads_q, n, 128), got(DType::bf16, 1, heads_q, n, 128);
  DeviceTensor dout(got.size_bytes());
  TensorView o = got.view();
  o.data = dout.ptr;
  o.memory = Memory::cuda;
  // The plan with its own allocations (it also loads the kernels, which takes device memory once).
  const std::size_t before_own = device_bytes_used();
  auto own = std::make_unique<cuda::Plan>(cfg, w.problem);
  const std::size_t own_grew = device_bytes_used() - before_own;
  cuda_check(cudaMemset(dout.ptr, 0xff, dout.bytes));
  own->run(q, k, v, o);
  cuda_check(cudaMemcpy(want.data(), dout.ptr, dout.bytes, cudaMemcpyDeviceToHost));
  const TileMask own_mask = own->selection();
  const std::size_t own_bytes = own->workspace_bytes();
  own.reset();

  const std::size_t need = cuda::Plan::required_bytes(cfg, w.problem);
  CHECK(need >= own_bytes);
  constexpr std::size_t kGuard = 1 << 16;
  DeviceTensor buffer(need + kGuard);
  cuda_check(cudaMemset(buffer.ptr, 0xff, need));  // poison: the plan must write what it reads
  cuda_check(cudaMemset(static_cast<char*>(buffer.ptr) + need, 0xa5, kGuard));
  const std::size_t before = device_bytes_used();
  cuda::Plan plan(cfg, w.problem, {}, cuda::Workspace{buffer.ptr, need});
  const std::size_t grew = device_bytes_used() - before;
  MESSAGE(method_name(cfg) << " N " << n << ": required " << need << " bytes (plan's own: " << own_bytes
                           << "); device memory grew by " << own_grew << " bytes for its own plan, " << grew
                           << " for the plan on the workspace");
  CHECK(grew < (std::size_t{2} << 20));  // no allocation beyond the driver's page noise
  CHECK(plan.workspace_bytes() == own_bytes);
  const CapturedRun captured(plan, q, k, v, o);
  const cudaStream_t stream = captured.stream;
  cuda_check(cudaMemset(dout.ptr, 0xff, dout.bytes));
  cuda_check(cudaGraphLaunch(captured.exec, stream));
  cuda_check(cudaStreamSynchronize(stream));
  cuda_check(cudaMemcpy(got.data(), dout.ptr, dout.bytes, cudaMemcpyDeviceToHost));
  const TileMask mask = plan.selection(stream);
  CHECK(mask.row_ptr == own_mask.row_ptr);
  CHECK(mask.tiles == own_mask.tiles);
  CHECK(std::memcmp(got.data(), want.data(), got.size_bytes()) == 0);
  std::vector<std::uint8_t> guard(kGuard);
  cuda_check(cudaMemcpy(guard.data(), static_cast<char*>(buffer.ptr) + need, kGuard, cudaMemcpyDeviceToHost));
  CHECK(std::count(guard.begin(), guard.end(), std::uint8_t{0xa5}) == static_cast<std::ptrdiff_t>(kGuard));
  // Refusals, before any kernel runs.
  const auto refusal = [&](cuda::Workspace ws) {
    try {
      cuda::Plan bad(cfg, w.problem, {}, ws);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  CHECK(refusal({buffer.ptr, need - 1}).find("too small") != std::string::npos);
  CHECK(refusal({static_cast<char*>(buffer.ptr) + 16, need}).find("256-byte aligned") != std::string::npos);
  CHECK(refusal({nullptr, need}).find("null") != std::string::npos);
}

TEST_CASE("Plan on a caller's workspace: no allocation, same bits, graph-capturable, clear refusals") {
  fg_attn::Config fg;  // 16 × 16 tiles, UNION over merge-XOR groups: every FG-Attn buffer (tens of MiB at 16K)
  fg.tile_q = 16;
  fg.tile_k = 16;
  fg.top_p = 0.9f;  // the paper's (sparser than the default)
  fg.semantics = fg_attn::Semantics::union_keys;
  check_caller_workspace(fg, WorkloadKind::video, 16384, 8);
  check_caller_workspace(sparge::Config{}, WorkloadKind::llm, 4000, 4);
  bfla::Config bf;
  bf.block = 128;
  bf.group = 32;
  check_caller_workspace(bf, WorkloadKind::llm, 3000, 4);
  anchor_attn::Config an;  // its anchor region is an uploaded mask inside the estimator; resumed executor
  an.step = 4;
  an.theta = 3.0f;
  check_caller_workspace(an, WorkloadKind::llm, 3000, 4);
  check_caller_workspace(sale::Config{}, WorkloadKind::llm, 3000, 4);
  check_caller_workspace(DenseConfig{64, 32}, WorkloadKind::video, 2000, 4);
}

}  // namespace
}  // namespace spattn::test
