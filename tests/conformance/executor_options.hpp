// The executor options the shared conformance table does not exercise (PV-skip, the int8 QKᵀ mode), run on a backend
// (Kokkos by default) with the tensors in a MemoryAdapter's memory and compared with the reference: the Kokkos host
// test (test_kokkos.cpp), Kokkos on CUDA (gpu/test_kokkos_cuda.cpp) and the CUDA backend (gpu/test_cuda_executor.cpp)
// run the same checks.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "../common.hpp"
#include "conformance.hpp"

namespace spattn::test {

struct Compared {
  std::vector<std::string> not_supported;  ///< the backend's reasons (nothing ran); empty when it ran
  std::int64_t bad = 0;  ///< outputs farther than tol·(1 + |reference|) from the reference's (NaN: poison, counts)
  AttendStats reference, backend;
};

/// `options` on the reference (host tensors) and on `backend` (copies in `memory`, a poisoned output), unless the
/// backend does not cover the call (its reasons in not_supported).
inline Compared compare_with_reference(const Problem& p, const HostTensor& q, const HostTensor& k, const HostTensor& v,
                                       const TileMask& mask, DType out, AttendOptions options,
                                       conformance::MemoryAdapter& memory, double tol,
                                       const std::string& backend = "kokkos") {
  HostTensor want(out, q.batch(), p.heads_q, q.seqlen(), p.dim_v(), q.layout()), got = want;
  Compared r;
  const TensorView qd = memory.upload(q), kd = memory.upload(k), vd = memory.upload(v), od = memory.poisoned_like(got);
  options.backend = backend;
  for (const auto& be : backends())
    if (be->name() == backend) r.not_supported = be->not_supported_reasons(p, qd, kd, vd, mask, od, options);
  if (!r.not_supported.empty()) return r;
  r.backend = attend(p, qd, kd, vd, mask, od, options);
  options.backend = "reference";
  r.reference = attend(p, q.view(), k.view(), v.view(), mask, want.view(), options);
  memory.download(od, got);
  const std::vector<float> a = got.to_float(), b = want.to_float();
  for (std::size_t i = 0; i < a.size(); ++i)
    r.bad += std::fabs(double(a[i]) - double(b[i])) <= tol * (1.0 + std::fabs(double(b[i]))) ? 0 : 1;
  return r;
}

/// SpargeAttn's PV-skip against the reference: planted inputs whose skip decisions lie far from the threshold (every
/// query carries 4·e0, keys 0..63 carry 10·e0: the first tile sets a max ≈ 57.7 in base 2 that the others sit ≈ 57
/// below; rows 0..15 of every 128 also carry 4·e1 and keys of tile 3 10·e1, so 16-row votes differ from whole-block
/// ones), per-head thresholds, exempt tiles, tile_k 64 and 30. Same skipped counts, outputs within fp32 tolerance.
inline void check_pv_skip(conformance::MemoryAdapter& memory) {
  Problem p;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.seqlen_q = p.seqlen_kv = 512;
  p.head_dim = 64;
  p.causal = true;
  p.scale = 1.0f;
  HostTensor q(DType::f32, 1, 2, 512, 64), k(DType::f32, 1, 1, 512, 64), v(DType::f32, 1, 1, 512, 64);
  fill_random(q, 0.05);
  fill_random(k, 0.05);
  fill_random(v);
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 512; ++i) {
      q.set(0, h, i, 0, 4.0f);
      if (i % 128 < 16) q.set(0, h, i, 1, 4.0f);
    }
  for (std::int64_t j = 0; j < 64; ++j) k.set(0, 0, j, 0, 10.0f);
  for (std::int64_t j = 192; j < 256; ++j) k.set(0, 0, j, 1, 10.0f);
  for (const std::int32_t tile_k : {64, 30})
    for (const int vote : {0, 16, 64})
      for (const int exempt : {1, 3}) {
        CAPTURE(tile_k);
        CAPTURE(vote);
        CAPTURE(exempt);
        AttendOptions opt;
        opt.pv_threshold_per_head = {20.0f, 30.0f};
        opt.pv_vote_rows = vote;
        opt.pv_exempt_last = exempt;
        const Compared r = compare_with_reference(p, q, k, v, TileMask::dense(MaskShape::of(p, 128, tile_k)), DType::f32,
                                                  opt, memory, 1e-4);
        CHECK(r.reference.pv_skipped > 0);
        CHECK(r.not_supported.empty());
        CHECK(r.backend.pv_skipped == r.reference.pv_skipped);
        CHECK(r.bad == 0);
      }
}

/// SpargeAttn's quantized compute mode (qk_int8) against the reference over the executor table (block sizes 128 × 64
/// and 32 × 16, and 1000 × 7: blocks that straddle query tiles and sequence ends): the integer products are the
/// reference's bits, the rest within the dtype's tolerance (P rounded to the input dtype relative to running maxima
/// that move at other keys). Returns how many (case, blocks) ran; the cases `backend` does not cover are skipped (Kokkos
/// covers all).
inline int check_int8(conformance::MemoryAdapter& memory, const std::string& backend = "kokkos") {
  int ran = 0, outside = 0;
  for (const conformance::ExecutorCase& c : conformance::executor_cases())
    for (const auto& [block_q, block_k] : {std::pair{128, 64}, std::pair{32, 16}, std::pair{1000, 7}}) {
      const std::string case_name(c.name);
      CAPTURE(case_name);
      CAPTURE(block_q);
      const conformance::ExecutorInputs in = conformance::make_inputs(c);
      AttendOptions opt;
      opt.qk_int8 = true;
      opt.quant_block_q = block_q;
      opt.quant_block_k = block_k;
      const double tol = (c.dtype == DType::bf16 ? 2e-2 : c.dtype == DType::f16 ? 3e-3 : 2e-5) +
                         (c.out == DType::bf16 ? 8e-3 : c.out == DType::f16 ? 1e-3 : 0.0);
      const Compared r = compare_with_reference(in.problem, in.q, in.k, in.v, in.mask, c.out, opt, memory, tol, backend);
      if (!r.not_supported.empty()) {
        ++outside;
        continue;
      }
      CHECK(r.backend.backend == backend);
      CHECK(r.backend.empty_rows == r.reference.empty_rows);
      CHECK(r.bad == 0);
      ++ran;
    }
  MESSAGE("int8 QK mode on " << backend << ": " << ran << " (case, blocks) ran, " << outside << " outside its coverage");
  if (backend == "kokkos") CHECK(outside == 0);
  return ran;
}

}  // namespace spattn::test
