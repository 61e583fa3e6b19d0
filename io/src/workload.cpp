// Seeded synthetic attention inputs. How each pattern is made (all constants below):
//
// Every Q/K row is Gaussian noise N(0, 1) per element plus structured components. With noise alone a raw
// score q·k/√D has standard deviation 1; each component adds a known number of logits where it applies.
// Rows are generated from a counter-based PRNG keyed by (seed, tensor, batch, head, position), so a row
// does not depend on the sequence length: a chunked-prefill workload (seqlen_q < seqlen) has exactly the
// last rows of the full workload's Q. Values are rounded to the spec's dtype when stored.
//
// llm (causal), per KV head (shared by its query heads, each query head scaling them by its own factor in
// [0.9, 1.1] on the query side); every logit below is multiplied by the fitted strength 1.2 (see the fit below):
//   - sinks: keys 0..3 carry a direction u_sink, every query carries it too: +8 logits on the sinks;
//   - local band: dims [0, 16) hold rotary-like features cos/sin(ω_f·pos) for 8 frequencies ω_f from 1/4
//     to 1/512 rad/token, on queries and keys: +5 logits at distance 0, decaying with distance;
//   - heavy keys: 8 random positions carry u_heavy, every query carries it: +4 logits on them;
//   - slash lines: dims [16, 18) hold cos/sin(2π·pos/P), P ∈ [64, 256) per head: +3 logits whenever the
//     query-key distance is a multiple of P;
//   - needles: 4 (key a, query b) pairs with b - a >= N/8 share a random direction: +10 logits on (b, a).
// video (non-causal): tokens on a T×H×W grid (frame-major). dims [0, 36) hold cos/sin features of the
//   frame, row and column at 6 frequencies per axis (2.4, 1.6, 1.1, 0.75, 0.5, 0.35 rad/cell): +8 logits
//   for a token and itself, about −1.7 per cell of distance along one axis nearby, −6 to −7 on average far
//   away; 3 random global tokens carry u_global that every query carries: +4 logits on them. Every logit is
//   multiplied by the fitted strength 1.3.
//
// Fit to trained models (2026-11-28; before it, strength 1 for both kinds): the measure is the oracle mask's density
// at rel L1 5e-2 (`spattn frontier`, threshold oracle, at FG-Attn's 32×32 and SpargeAttn's 128×64 tiles) on one layer
// of the trained models of bench/results/quality.md (data/captures.npz) against the generator at the same shape:
//   trained LM, layer 3, 4096 tokens, 3 query heads / 1 K/V head:  0.154 (32×32)  0.247 (128×64)
//   llm 4096, 3/1 heads, seed 1, strength 1 (the old generator):   0.219 (+42 %) 0.451 (+83 %)
//   llm, strength 1.2:                                               0.124 (−19 %) 0.301 (+22 %)
//   trained DiT, layer 3, 2048 tokens (2 frames), 2 heads:          0.428         0.462
//   video 2048, 2 heads, seed 1, strength 1:                        0.628 (+47 %) 0.732 (+58 %)
//   video, strength 1.3:                                             0.377 (−12 %) 0.577 (+25 %)
// One strength cannot match both tile shapes closer: the trained LM's mass sits in fewer coarse tiles than the
// generator's (the 128×64 / 32×32 ratio is 1.6 there and 2.4 here: its heavy keys and slash lines scatter mass over
// many 128-row tiles). The head-type mix is not fitted (see "NOT imitated" below). Command: `spattn frontier --method
// fgattn --settings 0.9 --targets 5e-2 --workload llm --seq 4096 --heads 3 --kv-heads 1 --seed 1` (and --method
// sparge; for the captures, --capture data/captures.npz:lm and :dit).
// random: Q, K, V i.i.d. N(0, 1).
//
// What each pattern imitates (and what it does not; bench/results/accuracy-frontier.md measures the effect):
//   llm sinks        — attention sinks (StreamingLLM): the first tokens take a large share of almost every head's
//                      mass whatever the query;
//   llm local band   — the local window of MInference's "A-shape" heads; the rotary-like features give the score
//                      RoPE's decay with distance, so the band has no hard edge;
//   llm heavy keys   — MInference's "vertical lines": a few keys every query attends to;
//   llm slash lines  — MInference's "slash lines": mass at fixed relative offsets (multiples of the period P);
//   llm needles      — retrieval heads: one query attends to one far-away key (needle in a haystack);
//   llm per-head     — per KV head: heavy-key positions, P and needle positions; per query head: a factor in
//                      [0.9, 1.1] on the sink and heavy components. NOT imitated: head-type specialisation —
//                      measured heads are mostly one type (pure local, vertical-slash, block-sparse) with
//                      very different sharpness; here every head mixes all five patterns at the same strengths;
//   video locality   — 3-D positional features: the mass of a token goes to its spatial neighbours in its frame
//                      and to the same place in nearby frames (the spatial and temporal heads of video DiTs,
//                      Sparse VideoGen); frame-major order makes the spatial neighbours near-diagonal and the
//                      temporal ones off-diagonal bands at multiples of H·W;
//   video globals    — 3 tokens every query attends to (text/register-like tokens);
//   video per-head   — only the global tokens' positions differ between heads. NOT imitated: separate spatial-only
//                      and temporal-only heads.
// Changing any constant changes every recorded result that uses the workloads (bench/results/): results recorded
// before the fit (2026-11-28) used strength 1 (each page names its commit).
// V is N(0, 1) for every kind. Structured directions are random unit vectors in the dims that the
// positional features do not use.
#include "spattn/workload.hpp"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "spattn/checked.hpp"
#include "spattn/error.hpp"
#include "spattn/npy.hpp"

namespace spattn {
namespace {

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A small counter-based generator: a stream per key tuple.
class Rng {
 public:
  Rng(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0, std::uint64_t d = 0) {
    // Each key word goes through the full splitmix64 finaliser, so streams of nearby keys (tensor,
    // position) are unrelated; a plain xor/add chain let the Q row of one position replay the K row of a
    // nearby one.
    std::uint64_t h = seed;
    for (std::uint64_t x : {a, b, c, d}) {
      std::uint64_t s = h ^ (x * 0xd1342543de82ef95ull + 0x632be59bd9b4e019ull);
      h = splitmix(s);
    }
    state_ = h;
  }
  double uniform() { return static_cast<double>(splitmix(state_) >> 11) * 0x1p-53; }
  double normal() {  // Box–Muller in double: the same bits everywhere
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(uniform() * static_cast<double>(n)); }

 private:
  std::uint64_t state_;
};

enum Tensor : std::uint64_t { kQ = 1, kK = 2, kV = 3, kParams = 4 };

std::vector<double> unit_vector(Rng& rng, std::int64_t dim, std::int64_t first) {
  std::vector<double> u(static_cast<std::size_t>(dim), 0.0);
  double norm = 0;
  for (std::int64_t d = first; d < dim; ++d) norm += (u[d] = rng.normal()) * u[d];
  norm = std::sqrt(norm);
  for (auto& x : u) x /= norm;
  return u;
}

/// Per-KV-head structure of the llm workload.
struct LlmHead {
  std::vector<double> sink, heavy_dir;
  std::vector<std::int64_t> heavy;
  std::int64_t period = 64;
  std::vector<std::int64_t> needle_key, needle_query;
  std::vector<std::vector<double>> needle_dir;
};

constexpr int kLocalFreqs = 8, kSlashDims = 2;

LlmHead llm_head(const WorkloadSpec& s, std::int64_t b, std::int64_t hkv) {
  Rng rng(s.seed, kParams, static_cast<std::uint64_t>(b), static_cast<std::uint64_t>(hkv));
  const std::int64_t free_dim = 2 * kLocalFreqs + kSlashDims;
  LlmHead h;
  h.sink = unit_vector(rng, s.head_dim, free_dim);
  h.heavy_dir = unit_vector(rng, s.head_dim, free_dim);
  for (int i = 0; i < 8; ++i) h.heavy.push_back(rng.below(s.seqlen));
  h.period = 64 + rng.below(192);
  for (int i = 0; i < 4; ++i) {
    const std::int64_t gap = std::max<std::int64_t>(1, s.seqlen / 8);
    if (s.seqlen <= gap) break;
    const std::int64_t a = rng.below(s.seqlen - gap);
    h.needle_key.push_back(a);
    h.needle_query.push_back(a + gap + rng.below(s.seqlen - gap - a));
    h.needle_dir.push_back(unit_vector(rng, s.head_dim, free_dim));
  }
  return h;
}

/// Adds sqrt(logits·√D)·u to a row: paired with the same on the other side it adds `logits` to the score.
void add_dir(std::vector<double>& row, const std::vector<double>& u, double logits, double scale) {
  const double a = std::sqrt(logits) * scale;
  for (std::size_t d = 0; d < row.size(); ++d) row[d] += a * u[d];
}

/// The fitted strengths (header comment, "Fit to trained models"): every structured logit of a kind is multiplied by
/// its strength.
constexpr double kLlmStrength = 1.2, kVideoStrength = 1.3;

void llm_row(const WorkloadSpec& s, const LlmHead& head, bool is_query, std::int64_t pos, double head_factor,
             std::vector<double>& row) {
  // (√D · strength)^(1/2) per side: a pair of components of `logits` adds strength · logits to the score.
  const double root = std::sqrt(std::sqrt(static_cast<double>(s.head_dim)) * kLlmStrength);
  // Local band: γ² · Σ_f cos(ω_f Δ) / √D = 5 (× strength) at Δ = 0.
  const double gamma = std::sqrt(5.0 / kLocalFreqs) * root;
  for (int f = 0; f < kLocalFreqs; ++f) {
    const double w = 0.25 / std::pow(2.0, f);
    row[static_cast<std::size_t>(2 * f)] += gamma * std::cos(w * static_cast<double>(pos));
    row[static_cast<std::size_t>(2 * f + 1)] += gamma * std::sin(w * static_cast<double>(pos));
  }
  const double slash = std::sqrt(3.0) * root, ws = 6.283185307179586 / static_cast<double>(head.period);
  row[2 * kLocalFreqs] += slash * std::cos(ws * static_cast<double>(pos));
  row[2 * kLocalFreqs + 1] += slash * std::sin(ws * static_cast<double>(pos));
  const double f = is_query ? head_factor : 1.0;
  if (is_query || pos < 4) add_dir(row, head.sink, 8.0 * f, root);
  bool heavy = is_query;
  for (std::int64_t p : head.heavy) heavy = heavy || p == pos;
  if (heavy) add_dir(row, head.heavy_dir, 4.0 * f, root);
  for (std::size_t n = 0; n < head.needle_key.size(); ++n)
    if ((is_query ? head.needle_query[n] : head.needle_key[n]) == pos) add_dir(row, head.needle_dir[n], 10.0, root);
}

VideoGrid video_grid(const WorkloadSpec& s) {
  if (s.grid) return *s.grid;
  const std::int64_t t = 8;
  std::int64_t side = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(s.seqlen) / t)));
  while (t * side * side < s.seqlen) ++side;
  return {t, side, side};
}

void video_row(const WorkloadSpec& s, const VideoGrid& g, const std::vector<double>& global_dir,
               const std::vector<std::int64_t>& globals, bool is_query, std::int64_t pos, std::vector<double>& row) {
  const double root = std::sqrt(std::sqrt(static_cast<double>(s.head_dim)) * kVideoStrength);
  const std::int64_t coord[3] = {pos / (g.height * g.width), (pos / g.width) % g.height, pos % g.width};
  const double gamma = std::sqrt(8.0 / 18.0) * root;  // 3 axes × 6 frequencies: +8 at distance 0
  constexpr double kFreqs[6] = {2.4, 1.6, 1.1, 0.75, 0.5, 0.35};
  for (int axis = 0; axis < 3; ++axis)
    for (int f = 0; f < 6; ++f) {
      const double w = kFreqs[f];
      const auto d = static_cast<std::size_t>(12 * axis + 2 * f);
      row[d] += gamma * std::cos(w * static_cast<double>(coord[axis]));
      row[d + 1] += gamma * std::sin(w * static_cast<double>(coord[axis]));
    }
  bool global = is_query;
  for (std::int64_t p : globals) global = global || p == pos;
  if (global) add_dir(row, global_dir, 4.0, root);
}

}  // namespace

std::string_view to_string(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::llm: return "llm";
    case WorkloadKind::video: return "video";
    case WorkloadKind::random: return "random";
  }
  return "?";
}

WorkloadKind parse_workload_kind(std::string_view name) {
  if (name == "llm") return WorkloadKind::llm;
  if (name == "video") return WorkloadKind::video;
  if (name == "random") return WorkloadKind::random;
  fail("workload: unknown workload '", name, "' (expected llm, video or random)");
}

Workload make_workload(const WorkloadSpec& s) {
  require_in("workload seqlen", s.seqlen, Interval<std::int64_t>{1, std::int64_t{1} << 62});
  if (s.seqlen_q) require_in("workload seqlen_q", *s.seqlen_q, Interval<std::int64_t>{1, s.seqlen});
  if (s.grid) {
    const auto [frames, height, width] = *s.grid;
    require(frames >= 1 && height >= 1 && width >= 1, "workload grid: frames, height and width must be >= 1, got ",
            frames, "×", height, "×", width);
    require(checked_product("workload grid frames×height×width", {frames, height, width}) >= s.seqlen,
            "workload grid frames×height×width: ", frames, "×", height, "×", width, " holds fewer than seqlen = ",
            s.seqlen, " tokens");
  }
  const std::int64_t nq = s.seqlen_q.value_or(s.seqlen), nkv = s.seqlen, first_q = nkv - nq;

  Workload w;
  Problem& p = w.problem;
  p.batch = s.batch;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.seqlen_q = nq;
  p.seqlen_kv = nkv;
  p.head_dim = s.head_dim;
  p.causal = s.kind == WorkloadKind::llm;
  p.dtype = s.dtype;
  p.validate();
  w.q = HostTensor(s.dtype, s.batch, s.heads_q, nq, s.head_dim);
  w.k = HostTensor(s.dtype, s.batch, s.heads_kv, nkv, s.head_dim);
  w.v = HostTensor(s.dtype, s.batch, s.heads_kv, nkv, s.head_dim);
  const auto dim = static_cast<std::size_t>(s.head_dim);
  std::vector<double> row(dim);
  auto noise_row = [&](Tensor t, std::int64_t b, std::int64_t h, std::int64_t pos) {
    Rng rng(s.seed, t, static_cast<std::uint64_t>(b), static_cast<std::uint64_t>(h), static_cast<std::uint64_t>(pos));
    for (auto& x : row) x = rng.normal();
  };
  auto store = [&](HostTensor& t, std::int64_t b, std::int64_t h, std::int64_t n) {
    for (std::size_t d = 0; d < dim; ++d) t.set(b, h, n, static_cast<std::int64_t>(d), static_cast<float>(row[d]));
  };
  const VideoGrid grid = video_grid(s);
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t hk = 0; hk < s.heads_kv; ++hk) {
      LlmHead head;
      std::vector<double> global_dir;
      std::vector<std::int64_t> globals;
      if (s.kind == WorkloadKind::llm) head = llm_head(s, b, hk);
      if (s.kind == WorkloadKind::video) {
        Rng rng(s.seed, kParams, static_cast<std::uint64_t>(b), static_cast<std::uint64_t>(hk), 1);
        global_dir = unit_vector(rng, s.head_dim, 36);
        for (int i = 0; i < 3; ++i) globals.push_back(rng.below(nkv));
      }
      for (std::int64_t n = 0; n < nkv; ++n) {
        noise_row(kK, b, hk, n);
        if (s.kind == WorkloadKind::llm) llm_row(s, head, false, n, 1.0, row);
        if (s.kind == WorkloadKind::video) video_row(s, grid, global_dir, globals, false, n, row);
        store(w.k, b, hk, n);
        noise_row(kV, b, hk, n);
        store(w.v, b, hk, n);
      }
      const std::int64_t group = s.heads_q / s.heads_kv;
      for (std::int64_t hq = hk * group; hq < (hk + 1) * group; ++hq) {
        Rng frng(s.seed, kParams, static_cast<std::uint64_t>(b), static_cast<std::uint64_t>(hq), 2);
        const double factor = 0.9 + 0.2 * frng.uniform();
        for (std::int64_t i = 0; i < nq; ++i) {
          const std::int64_t pos = first_q + i;
          noise_row(kQ, b, hq, pos);
          if (s.kind == WorkloadKind::llm) llm_row(s, head, true, pos, factor, row);
          if (s.kind == WorkloadKind::video) video_row(s, grid, global_dir, globals, true, pos, row);
          store(w.q, b, hq, i);
        }
      }
    }
  return w;
}

Workload read_capture(const std::string& npz_path, const std::string& prefix) {
  const std::map<std::string, NpyArray> arrays = read_npz(npz_path);
  const auto array = [&](const char* name) -> const NpyArray& {
    const auto it = arrays.find(prefix + "_" + name);
    require(it != arrays.end(), "capture '", npz_path, "': no array ", prefix, "_", name);
    return it->second;
  };
  const auto tensor = [&](const char* name) {
    const NpyArray& a = array(name);
    require(a.descr == "<u2" && a.shape.size() == 3, "capture '", npz_path, "': ", prefix, "_", name,
            " must be a 3-d [H, N, D] array of bf16 bit patterns ('<u2'), got ", a.descr, " with ", a.shape.size(),
            " dimensions");
    HostTensor t(DType::bf16, 1, a.shape[0], a.shape[1], a.shape[2]);
    require(t.size_bytes() == a.data.size(), "capture '", npz_path, "': ", prefix, "_", name, " is truncated");
    std::memcpy(t.data(), a.data.data(), a.data.size());
    require(t.all_finite(), "capture '", npz_path, "': ", prefix, "_", name, " holds NaN or infinity");
    return t;
  };
  Workload w;
  w.q = tensor("q");
  w.k = tensor("k");
  w.v = tensor("v");
  const std::vector<double> meta = array("meta").to_vector<double>();
  require(meta.size() == 3, "capture '", npz_path, "': ", prefix, "_meta must hold [causal, scale, layer]");
  require(w.k.dim() == w.q.dim() && w.v.seqlen() == w.k.seqlen() && w.v.heads() == w.k.heads(), "capture '", npz_path,
          "': ", prefix, "_q/_k/_v shapes disagree");
  w.problem = problem_of(w.q, w.k, w.v, meta[0] != 0.0);
  w.problem.scale = static_cast<float>(meta[1]);
  w.problem.validate();
  return w;
}

Problem problem_of(const HostTensor& q, const HostTensor& k, const HostTensor& v, bool causal) {
  Problem p;
  p.batch = q.batch();
  p.heads_q = q.heads();
  p.heads_kv = k.heads();
  p.seqlen_q = q.seqlen();
  p.seqlen_kv = k.seqlen();
  p.head_dim = q.dim();
  p.head_dim_v = v.dim();
  p.causal = causal;
  p.dtype = q.dtype();
  p.validate();
  return p;
}

}  // namespace spattn
