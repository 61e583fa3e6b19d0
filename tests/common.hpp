// Test helpers: fresh random inputs (seed printed, overridable with SPATTN_TEST_SEED) and the independent
// fp64 reference, exact_fp64 — dense attention with an explicit element mask, written without any of the
// library's numerics, so the executor is checked against something it does not share code with.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "spattn/mask.hpp"
#include "spattn/problem.hpp"
#include "spattn/spattn.hpp"
#include "spattn/tensor.hpp"
#include "spattn/workload.hpp"

namespace spattn::test {

/// A seed for this run: SPATTN_TEST_SEED if set, else fresh from the OS. Printed so a failure reproduces.
inline std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("SPATTN_TEST_SEED");
    const std::uint64_t s = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
    MESSAGE("SPATTN_TEST_SEED=" << s);
    return s;
  }();
  return seed;
}

inline std::mt19937_64& rng() {
  static std::mt19937_64 gen(test_seed());
  return gen;
}

inline double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng()); }

/// Gaussian values with a spread that makes softmax peaky but not one-hot.
inline void fill_random(HostTensor& t, double stddev = 1.0) {
  std::normal_distribution<double> dist(0.0, stddev);
  for (std::int64_t b = 0; b < t.batch(); ++b)
    for (std::int64_t h = 0; h < t.heads(); ++h)
      for (std::int64_t n = 0; n < t.seqlen(); ++n)
        for (std::int64_t d = 0; d < t.dim(); ++d) t.set(b, h, n, d, static_cast<float>(dist(rng())));
}

/// fp64 dense attention restricted to `allowed(b, hq, i, j)`; out is [B, Hq, Nq, Dv] (per-sequence rows;
/// rows of a shorter sequence left 0). Reads the tensors through get(), i.e. the dtype-rounded values.
/// For a packed variable-length batch pass seq offsets; tensors are then [1, H, total, D].
template <class Allowed>
std::vector<double> exact_fp64(const Problem& p, const HostTensor& q, const HostTensor& k, const HostTensor& v,
                           Allowed allowed) {
  const std::int64_t dv = p.dim_v();
  std::vector<double> out(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q * dv), 0.0);
  const double scale = p.scale ? *p.scale : 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  std::vector<double> s;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const std::int64_t nq = p.seqlen_q_of(b), nkv = p.seqlen_kv_of(b);
    const std::int64_t tb_q = p.varlen() ? 0 : b, tb_kv = p.varlen() ? 0 : b;
    const std::int64_t oq = p.row_offset_q(b), okv = p.row_offset_kv(b);
    for (std::int64_t h = 0; h < p.heads_q; ++h) {
      const std::int64_t hk = h / (p.heads_q / p.heads_kv);
      for (std::int64_t i = 0; i < nq; ++i) {
        s.assign(static_cast<std::size_t>(nkv), -INFINITY);
        double mx = -INFINITY;
        for (std::int64_t j = 0; j < nkv; ++j) {
          if (!allowed(b, h, i, j)) continue;
          double dot = 0.0;
          for (std::int64_t d = 0; d < p.head_dim; ++d)
            dot += static_cast<double>(q.get(tb_q, h, oq + i, d)) * static_cast<double>(k.get(tb_kv, hk, okv + j, d));
          s[static_cast<std::size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        if (mx == -INFINITY) continue;
        double l = 0.0;
        std::vector<double> acc(static_cast<std::size_t>(dv), 0.0);
        for (std::int64_t j = 0; j < nkv; ++j) {
          if (s[static_cast<std::size_t>(j)] == -INFINITY) continue;
          const double w = std::exp(s[static_cast<std::size_t>(j)] - mx);
          l += w;
          for (std::int64_t d = 0; d < dv; ++d) acc[static_cast<std::size_t>(d)] += w * v.get(tb_kv, hk, okv + j, d);
        }
        for (std::int64_t d = 0; d < dv; ++d)
          out[static_cast<std::size_t>(((b * p.heads_q + h) * p.seqlen_q + i) * dv + d)] = acc[static_cast<std::size_t>(d)] / l;
      }
    }
  }
  return out;
}

/// The element mask a TileMask + causal rule define (DESIGN.md §3), computed from the bitmap.
struct MaskAllowed {
  const Problem& p;
  const TileMask& mask;
  std::vector<std::uint8_t> bitmap = mask.to_bitmap();
  bool operator()(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    if (p.causal && j > i + p.seqlen_kv_of(b) - p.seqlen_q_of(b)) return false;
    const std::int64_t mh = mask.shape.mask_heads == p.heads_q ? h : h / (p.heads_q / p.heads_kv);
    const std::int64_t r = (b * mask.shape.mask_heads + mh) * mask.shape.num_q_tiles() + i / mask.shape.tile_q;
    return bitmap[static_cast<std::size_t>(r * mask.shape.num_k_tiles() + j / mask.shape.tile_k)] != 0;
  }
};

/// A small workload with this run's seed: N keys, the last nq (0 = all) as queries, D = 64.
inline Workload test_workload(WorkloadKind kind, std::int64_t n, std::int64_t heads = 2, std::int64_t kv = 1,
                              std::int64_t nq = 0) {
  WorkloadSpec s;
  s.kind = kind;
  s.seqlen = n;
  if (nq != 0) s.seqlen_q = nq;
  s.heads_q = heads;
  s.heads_kv = kv;
  s.head_dim = 64;
  s.seed = test_seed();
  return make_workload(s);
}

/// A workload as a calibration sample (views into its tensors).
inline Sample sample_of(const Workload& w) { return {w.problem, w.q.view(), w.k.view(), w.v.view()}; }
inline std::vector<Sample> samples_of(const std::vector<Workload>& ws) {
  std::vector<Sample> out;
  for (const Workload& w : ws) out.push_back(sample_of(w));
  return out;
}

/// A random mask with about `density` of the reachable tiles kept.
inline TileMask random_mask(const MaskShape& shape, double density) {
  std::vector<std::uint8_t> bits(static_cast<std::size_t>(shape.num_rows() * shape.num_k_tiles()));
  for (auto& x : bits) x = uniform(0.0, 1.0) < density ? 1 : 0;
  return TileMask::from_bitmap(shape, bits);
}

/// doctest's matcher copies the text, so a temporary std::string is fine.
inline doctest::Contains contains(const std::string& text) { return doctest::Contains(text.c_str()); }

/// A fresh directory under the system temp dir (name starting with `prefix`), removed with everything in it
/// at scope exit.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::random_device rd;
    const auto base = std::filesystem::temp_directory_path();
    do {
      path_ = base / (prefix + std::to_string(rd()) + "_" + std::to_string(rd()));
    } while (!std::filesystem::create_directory(path_));
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace spattn::test
