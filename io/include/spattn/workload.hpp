// Seeded synthetic attention inputs with the structure real models show, for the program, tests and
// benchmarks. Every pattern and constant is documented in workload.cpp's header comment and README.md.
//   llm    causal; attention sinks, a local band, a few vertical "heavy" keys, slash lines, needles
//   video  non-causal; tokens on a T×H×W grid with spatio-temporal locality and a few global tokens
//   random i.i.d. Gaussian Q, K, V (no structure: the hard case for every sparse method)
// The same spec and seed give the same bits on every machine (own PRNG and Box–Muller in double).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "spattn/problem.hpp"
#include "spattn/tensor.hpp"

namespace spattn {

enum class WorkloadKind : std::uint8_t { llm, video, random };

std::string_view to_string(WorkloadKind kind);
WorkloadKind parse_workload_kind(std::string_view name);  ///< throws spattn::Error

struct VideoGrid {
  std::int64_t frames = 0, height = 0, width = 0;
};

struct WorkloadSpec {
  WorkloadKind kind = WorkloadKind::llm;
  std::int64_t batch = 1;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;
  std::int64_t seqlen = 4096;  ///< Nq = Nkv = seqlen unless seqlen_q is set
  std::optional<std::int64_t> seqlen_q;  ///< in [1, seqlen]; < seqlen is chunked prefill (the last seqlen_q rows)
  std::int64_t head_dim = 128;
  DType dtype = DType::bf16;
  std::uint64_t seed = 0;
  /// video: the token grid T×H×W (each >= 1, T·H·W >= seqlen; tokens past seqlen are dropped); unset: T = 8
  /// frames, H = W ≈ sqrt(seqlen / T), rounded so that T·H·W >= seqlen.
  std::optional<VideoGrid> grid;
};

struct Workload {
  Problem problem;  ///< causal for llm, non-causal otherwise; default softmax scale
  HostTensor q, k, v;  ///< [B, H, N, D], dtype of the spec
};

/// Builds the workload; throws spattn::Error on an invalid spec (names the field).
Workload make_workload(const WorkloadSpec& spec);

/// The problem of attention inputs q [B, Hq, Nq, D], k [B, Hkv, Nkv, D], v [B, Hkv, Nkv, Dv] (their extents and dtype;
/// the default softmax scale), validated. The caller checks that the shapes agree.
Problem problem_of(const HostTensor& q, const HostTensor& k, const HostTensor& v, bool causal);

/// A captured workload: one layer's Q, K, V of a trained model, as bench/quality/quality.py --captures writes them
/// into an .npz — arrays PREFIX_q [Hq, N, D], PREFIX_k and PREFIX_v [Hkv, N, D] (bf16 bit patterns, '<u2') and
/// PREFIX_meta [causal, softmax scale, layer] ('<f8'). B = 1. Throws spattn::Error naming the file and the array.
Workload read_capture(const std::string& npz_path, const std::string& prefix);

}  // namespace spattn
