// GPU only (tests/README.md): calls the CUDA backend does not cover, explained in words, and CUDA inputs out of range,
// refused with the host's error word for word (the CUDA side of tests/test_bad_input.cpp).
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../common.hpp"
#include "../conformance/conformance.hpp"
#include "cuda_memory.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

TEST_CASE("attend() explains why the CUDA backend does not cover a call") {
  Problem p;
  p.seqlen_q = p.seqlen_kv = 64;
  p.head_dim = 80;
  p.dtype = DType::bf16;
  DeviceTensor dq(64 * 80 * 2), dout(64 * 80 * 4);
  cuda_check(cudaMemset(dq.ptr, 0, dq.bytes));  // finite inputs: the range check passes, coverage is what fails
  TensorView q = TensorView::dense(dq.ptr, DType::bf16, Layout::bhnd, 1, 1, 64, 80);
  q.memory = Memory::cuda;
  TensorView o = TensorView::dense(dout.ptr, DType::f32, Layout::bhnd, 1, 1, 64, 80);
  o.memory = Memory::cuda;
  const TileMask mask = TileMask::dense(MaskShape::of(p, 64, 64));
  AttendOptions cuda_only;  // a build with a CUDA Kokkos covers these calls on Kokkos: ask for this backend by name
  cuda_only.backend = "cuda";
  CHECK_THROWS_WITH_AS(attend(p, q, q, q, mask, o, cuda_only), doctest::Contains("head_dim must be 64, 96, 128 or 256"),
                       Error);
  Problem p48 = p;
  p48.head_dim = 64;
  const TileMask odd = TileMask::dense(MaskShape::of(p48, 48, 64));
  CHECK_THROWS_WITH_AS(attend(p48, q, q, q, odd, o, cuda_only), doctest::Contains("tile_q must be 16, 32"), Error);
}

/// The input range rule on CUDA tensors (CudaBackend::input_range scans on the GPU): the same errors, word for word,
/// as for the same tensors in host memory — non-finite elements (the first in (batch, head, row, dim) order) and
/// finite values whose scores or sums overflow fp32 — from attend(), estimate() and sparse_attention().
TEST_CASE("CUDA inputs that overflow fp32 give the host's error, word for word") {
  CudaMemory memory;
  struct Case {
    const char* name;
    std::vector<std::int64_t> lens;  ///< variable-length when not empty
    char tensor;                     ///< 'q', 'k' or 'v'
    std::int64_t h, n, d;            ///< where (row n of the packed tensor for varlen)
    float value;
    const char* expect;
  };
  const Case cases[] = {
      {"NaN in q", {}, 'q', 1, 5, 3, NAN, "q: not finite"},
      {"+inf in k, twice: the first is reported", {}, 'k', 0, 300, 64, INFINITY, "k: not finite"},
      {"finite k whose scores overflow", {}, 'k', 1, 77, 127, 1e30f, "scores overflow fp32"},
      {"-inf in v of the second sequence (varlen)", {200, 311}, 'v', 1, 250, 9, -INFINITY, "v: not finite"},
      {"finite q whose scores overflow (varlen)", {200, 311}, 'q', 0, 420, 0, 3e37f, "scores overflow fp32"},
  };
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const std::int64_t batch = c.lens.empty() ? 1 : static_cast<std::int64_t>(c.lens.size());
    std::int64_t n = 512;
    if (!c.lens.empty()) n = *std::max_element(c.lens.begin(), c.lens.end());
    // bf16 (a dtype the CUDA backend runs: device inputs are checked by the backend chosen for the call).
    const Problem p = conformance::problem_of(batch, 2, 2, n, n, 128, 0, true, DType::bf16, c.lens, c.lens);
    const std::int64_t rows = p.varlen() ? p.cu_seqlens_q.back() : n;
    HostTensor q(DType::bf16, p.varlen() ? 1 : batch, 2, rows, 128), k = q, v = q;
    HostTensor o(DType::f32, p.varlen() ? 1 : batch, 2, rows, 128);
    fill_random(q);
    fill_random(k);
    fill_random(v);
    HostTensor& t = c.tensor == 'q' ? q : c.tensor == 'k' ? k : v;
    t.set(0, c.h, c.n, c.d, c.value);
    if (c.tensor == 'k' && std::isinf(c.value)) t.set(0, c.h, c.n + 3, 0, c.value);  // a later one is not reported
    const auto message = [](auto&& call) {
      try {
        call();
      } catch (const Error& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    AttendOptions ref;
    ref.backend = "reference";
    const TileMask mask = TileMask::dense(MaskShape::of(p, 128, 128));
    const std::string want = message([&] { attend(p, q.view(), k.view(), v.view(), mask, o.view(), ref); });
    CHECK(want.find(c.expect) != std::string::npos);
    const TensorView dq = memory.upload(q), dk = memory.upload(k), dv = memory.upload(v), dout = memory.poisoned_like(o);
    CHECK(message([&] { attend(p, dq, dk, dv, mask, dout); }) == want);
    CHECK(message([&] { sparse_attention(sparge::Config{}, p, dq, dk, dv, dout); }) == want);
    if (c.tensor != 'v') CHECK(message([&] { estimate(fg_attn::Config{}, p, dq, dk); }) == want);
    MESSAGE(name << ": " << want);
  }
}

}  // namespace
}  // namespace spattn::test
