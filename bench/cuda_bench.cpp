// GPU benchmark of the CUDA executor (PERF.md rules): causal bf16, B = 1, H = 32, D = 128 (HEAD_DIM=…), dense and
// random block masks (diagonal and key tile 0 always kept), stripes and 16-key tiles (N ≤ 32K). Every arm's output
// is checked against the reference executor (head 0) before it is timed; CUDA events, 3 warm-ups, median
// of 10. Writes each mask's FlexAttention lists to $OUT_DIR (if set) for bench/peers.py, and prints a table.
// QK_INT8=1: every arm also runs in SpargeAttn's int8 QKᵀ mode (AttendOptions::qk_int8; default blocks 128 × 64),
// checked against the reference in that mode and timed as the executor's whole enqueue (the codes' prologue, then
// the kernel), in a row marked "int8".
// ARMS=substring runs only the masks whose name contains it (e.g. ARMS=stripes).
//   [HEAD_DIM=D] [QK_INT8=1] [ARMS=…] ./spattn_bench_cuda [N ...]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "estimator_interface.cuh"  // cuda::ExecutorState: the int8 arms' timed enqueue
#include "random_mask.hpp"
#include "spattn/cuda/backend.hpp"
#include "spattn/npy.hpp"
#include "spattn/reference/executor.hpp"
#include "spattn/spattn.hpp"
#include "spattn/tensor.hpp"

using namespace spattn;
using spattn::bench::random_block_mask;

namespace {

void ck(cudaError_t e) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> lengths;
  for (int i = 1; i < argc; ++i) lengths.push_back(std::atoll(argv[i]));
  if (lengths.empty()) lengths = {8192, 32768};
  const char* out_dir = std::getenv("OUT_DIR");
  const char* head_dim = std::getenv("HEAD_DIM");  // 64, 96, 128 (default) or 256
  const std::int64_t H = 32, D = head_dim != nullptr ? std::atoll(head_dim) : 128;
  const bool with_int8 = std::getenv("QK_INT8") != nullptr && std::string(std::getenv("QK_INT8")) == "1";
  std::printf("causal bf16, B = 1, H = %lld, D = %lld\n", static_cast<long long>(H), static_cast<long long>(D));
  std::printf("%-8s %-22s %8s %10s %12s %12s %8s\n", "N", "mask", "density", "ms", "TFLOP/s(eq)", "TFLOP/s(exec)", "check");
  for (std::int64_t n : lengths) {
    Problem p;
    p.heads_q = p.heads_kv = H;
    p.seqlen_q = p.seqlen_kv = n;
    p.head_dim = D;
    p.causal = true;
    p.dtype = DType::bf16;
    HostTensor q(DType::bf16, 1, H, n, D), k(DType::bf16, 1, H, n, D), v(DType::bf16, 1, H, n, D);
    std::mt19937_64 gen(n);
    std::normal_distribution<float> nd;
    for (auto* t : {&q, &k, &v}) {
      auto* bits = static_cast<std::uint16_t*>(t->data());
      for (std::int64_t i = 0; i < t->numel(); ++i) bits[i] = f32_to_bf16_bits(nd(gen));
    }
    void *dq, *dk, *dv, *dout;
    ck(cudaMalloc(&dq, q.size_bytes()));
    ck(cudaMalloc(&dk, k.size_bytes()));
    ck(cudaMalloc(&dv, v.size_bytes()));
    ck(cudaMalloc(&dout, q.size_bytes()));
    ck(cudaMemcpy(dq, q.data(), q.size_bytes(), cudaMemcpyHostToDevice));
    ck(cudaMemcpy(dk, k.data(), k.size_bytes(), cudaMemcpyHostToDevice));
    ck(cudaMemcpy(dv, v.data(), v.size_bytes(), cudaMemcpyHostToDevice));
    auto dev = [](const HostTensor& h, void* ptr) {
      TensorView t = h.view();
      t.data = ptr;
      t.memory = Memory::cuda;
      return t;
    };
    HostTensor o(DType::bf16, 1, H, n, D);
    const TensorView vq = dev(q, dq), vk = dev(k, dk), vv = dev(v, dv), vo = dev(o, dout);

    struct Arm {
      std::string name;
      TileMask mask;
    };
    std::vector<Arm> arms;
    arms.push_back({"dense 128x128", TileMask::dense(MaskShape::of(p, 128, 128))});
    if (with_int8) {  // no kept tile: the output's zeros alone, and in the int8 row the codes' prologue besides
      const MaskShape shape = MaskShape::of(p, 128, 128);
      arms.push_back({"empty 128x128", TileMask::from_rows(shape, std::vector<std::vector<std::int32_t>>(
                                                                     static_cast<std::size_t>(shape.num_rows())))});
    }
    for (double d : {0.5, 0.25, 0.11})
      arms.push_back({"random " + std::to_string(int(d * 100)) + "% 128x128",
                      random_block_mask(MaskShape::of(p, 128, 128), d, 7)});
    if (n <= 32768) {  // beyond, the fine masks' bitmaps built here would take tens of GB
      arms.push_back({"random 25% 128x16", random_block_mask(MaskShape::of(p, 128, 16), 0.25, 7)});
      arms.push_back({"stripes 25% 128x1", random_block_mask(MaskShape::of(p, 128, 1), 0.25, 7)});
      arms.push_back({"random 25% 64x32", random_block_mask(MaskShape::of(p, 64, 32), 0.25, 7)});
      arms.push_back({"random 25% 32x32 merged", random_block_mask(MaskShape::of(p, 32, 32), 0.25, 7)});
      arms.push_back({"random 25% 16x16 merged", random_block_mask(MaskShape::of(p, 16, 16), 0.25, 7)});
    }

    // Head-0 slice for the reference check.
    Problem p1 = p;
    p1.heads_q = p1.heads_kv = 1;
    const char* only = std::getenv("ARMS");
    for (const Arm& arm : arms) {
      if (only != nullptr && arm.name.find(only) == std::string::npos) continue;
      for (const bool int8 : {false, true}) {
        if (int8 && !with_int8) continue;
        AttendOptions options;
        options.qk_int8 = int8;
        const auto st = arm.mask.stats();
        // check head 0 against the reference
        ck(cudaMemset(dout, 0xff, o.size_bytes()));
        attend(p, vq, vk, vv, arm.mask, vo, options);
        ck(cudaMemcpy(o.data(), dout, o.size_bytes(), cudaMemcpyDeviceToHost));
        MaskShape s1 = arm.mask.shape;
        s1.mask_heads = 1;
        std::vector<std::vector<std::int32_t>> rows;
        for (std::int64_t t = 0; t < s1.num_q_tiles(); ++t) {
          const auto r = arm.mask.row(0, 0, t);
          rows.emplace_back(r.begin(), r.end());
        }
        const TileMask m1 = TileMask::from_rows(s1, rows);
        HostTensor want(DType::f32, 1, 1, n, D);
        TensorView q1 = q.view(), k1 = k.view(), v1 = v.view();
        reference::attend(p1, q1, k1, v1, m1, want.view(), options);
        double worst = 0;
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t d = 0; d < D; ++d) {
            const double e = std::fabs(double(o.get(0, 0, i, d)) - want.get(0, 0, i, d));
            worst = std::isfinite(e) ? std::max(worst, e) : 1e30;
          }
        const bool ok = worst < 3e-2;
        // time
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        const cuda::DeviceTileMask dmask(arm.mask);  // uploaded once: the timed loop is the kernel alone
        cuda::ExecutorState executor(p, options);  // int8: its prologue's buffers, allocated once
        const auto run = [&] {
          if (int8) executor.enqueue(vq, vk, vv, dmask, vo, nullptr);
          else cuda::attend_async(p, vq, vk, vv, dmask, vo, nullptr, nullptr, nullptr, nullptr);
        };
        for (int w = 0; w < 3; ++w) run();
        std::vector<float> times;
        for (int r = 0; r < 10; ++r) {
          cudaEventRecord(e0);
          run();
          cudaEventRecord(e1);
          cudaEventSynchronize(e1);
          float ms = 0;
          cudaEventElapsedTime(&ms, e0, e1);
          times.push_back(ms);
        }
        std::sort(times.begin(), times.end());
        const double ms = times[times.size() / 2];
        const double dense_flops = 4.0 * H * double(n) * double(n) * double(D) / 2.0;
        const std::string name = arm.name + (int8 ? " int8" : "");
        std::printf("%-8lld %-22s %8.3f %10.3f %12.1f %12.1f %8s\n", static_cast<long long>(n), name.c_str(),
                    st.density, ms, dense_flops / ms / 1e9, dense_flops * st.pair_density / ms / 1e9,
                    ok ? "ok" : "FAIL");
        if (!ok) std::printf("  max abs error vs reference (head 0): %g\n", worst);
#if !defined(SPATTN_BENCH_NO_NPZ)
        if (out_dir && arm.mask.shape.tile_k == 128 && !int8) {
          const auto flex = arm.mask.to_flex_block_mask();
          const std::int64_t tq = arm.mask.shape.num_q_tiles(), tk = arm.mask.shape.num_k_tiles();
          std::string base = std::string(out_dir) + "/mask_" + std::to_string(n) + "_" + std::to_string(int(st.density * 1000));
          write_npz(base + ".npz", {{"kv_num_blocks", NpyArray::from_vector(flex.kv_num_blocks, {1, H, tq})},
                                    {"kv_indices", NpyArray::from_vector(flex.kv_indices, {1, H, tq, tk})},
                                    {"full_kv_num_blocks", NpyArray::from_vector(flex.full_kv_num_blocks, {1, H, tq})},
                                    {"full_kv_indices", NpyArray::from_vector(flex.full_kv_indices, {1, H, tq, tk})}});
        }
#endif
      }
    }
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dout);
  }
  return 0;
}
