// KokkosBackend: which calls the Kokkos kernels cover (in words), which execution space runs them, and Kokkos'
// initialisation (on first use, when the application has not initialised Kokkos itself).
#include "spattn/kokkos/backend.hpp"

#include <Kokkos_Core.hpp>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <variant>

#include "run.hpp"

namespace spattn::kokkos {
namespace {

/// Initialises Kokkos unless the application did; finalises it at exit if we initialised it. Kernel launches are
/// serialised: the Serial space's team scratch is one buffer per process.
std::unique_lock<std::mutex> kokkos_ready() {
  static std::mutex mutex;
  std::unique_lock<std::mutex> lock(mutex);
  if (!Kokkos::is_initialized()) {
    int argc = 0;
    char* argv[] = {nullptr};
    Kokkos::initialize(argc, argv);
    std::atexit([] {
      if (Kokkos::is_initialized()) Kokkos::finalize();
    });
  }
  return lock;
}

/// The reasons that concern where the tensors are: one memory space this build serves; host memory only on request.
std::vector<std::string> memory_reasons(std::initializer_list<const TensorView*> tensors, const std::string& wanted) {
  const Memory memory = (*tensors.begin())->memory;
  for (const TensorView* t : tensors)
    if (t->memory != memory) return {"tensors must all be in one memory space"};
  if (!serves(memory)) {
    const std::string device(to_string(memory));
    return {"tensors are in " + device + " memory, but Kokkos was built without " + device + " (execution spaces: " +
            execution_spaces() + ")"};
  }
  if (memory == Memory::host && wanted != "kokkos")
    return {"host tensors run on the reference unless options.backend = \"kokkos\""};
  return {};
}

}  // namespace

bool serves(Memory memory) {
#if defined(KOKKOS_ENABLE_CUDA)
  if (memory == Memory::cuda) return true;
#endif
#if defined(KOKKOS_ENABLE_HIP)
  if (memory == Memory::hip) return true;
#endif
  return memory == Memory::host;
}

std::string execution_spaces() {
  std::string out;
#if defined(KOKKOS_ENABLE_CUDA)
  out = "Cuda (device), ";
#endif
#if defined(KOKKOS_ENABLE_HIP)
  out = "HIP (device), ";
#endif
  return out + Kokkos::DefaultHostExecutionSpace::name() + " (host)";
}

std::vector<std::string> KokkosBackend::not_supported_reasons(const Problem& p, const TensorView& q,
                                                              const TensorView& k, const TensorView& v,
                                                              const TileMask& mask, const TensorView& o,
                                                              const AttendOptions& options) const {
  std::vector<std::string> why = memory_reasons({&q, &k, &v, &o}, options.backend);
  const std::int64_t blocks = (mask.shape.tile_q + 63) / 64;  // row blocks of 64 rows on a GPU, 128 on the host
  if (p.batch * p.heads_q * mask.shape.num_q_tiles() * blocks > INT_MAX)
    why.push_back("more than 2^31 row blocks (batch · heads · query tiles)");
  return why;
}

AttendStats KokkosBackend::attend(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                                  const TileMask& mask, const TensorView& o, const AttendOptions& options) const {
  const auto lock = kokkos_ready();
  return run_attend(p, q, k, v, mask, o, options);
}

std::vector<std::string> KokkosBackend::estimate_not_supported_reasons(const MethodConfig& config, const Problem& p,
                                                                       const TensorView& q, const TensorView& k,
                                                                       const EstimateOptions& options) const {
  std::vector<std::string> why = memory_reasons({&q, &k}, options.backend);
  std::visit(Overload{[](const DenseConfig&) {},
                      [&](const sparge::Config& c) {
                        if (p.batch * p.heads_q * MaskShape::of(p, c.block_q, c.block_k).num_q_tiles() > INT_MAX)
                          why.push_back("more than 2^31 query blocks (batch · heads · blocks)");
                      },
                      [&](const bfla::Config& c) {
                        const std::int64_t g = c.group, bs = c.block;
                        if (p.batch * p.heads_q * ((p.seqlen_q + g - 1) / g) > INT_MAX ||
                            p.batch * p.heads_kv * ((p.seqlen_q + bs - 1) / bs) > INT_MAX)
                          why.push_back("more than 2^31 query groups (batch · heads · groups)");
                      },
                      [&](const fg_attn::Config& c) {
                        if (p.batch * p.heads_q * MaskShape::of(p, c.tile_q, c.tile_k).num_q_tiles() > INT_MAX)
                          why.push_back("more than 2^31 query tiles (batch · heads · tiles)");
                      },
                      [&](const anchor_attn::Config& c) {
                        const std::int64_t groups = MaskShape::of(p, c.group_rows(), 1).num_q_tiles();
                        if (p.batch * p.heads_q * groups * ((c.group_rows() + 63) / 64) > INT_MAX)
                          why.push_back("more than 2^31 row blocks (batch · heads · groups · 64-row blocks)");
                      },
                      [&](const sale::Config&) {
                        if (p.batch * p.heads_q * MaskShape::of(p, sale::kBlockQ, sale::kBlockK).num_q_tiles() > INT_MAX ||
                            p.batch * p.heads_q * ((p.seqlen_kv + 31) / 32) > INT_MAX)
                          why.push_back("more than 2^31 query blocks or key chunks (batch · heads · blocks)");
                      }},
             config);
  return why;
}

Estimate KokkosBackend::estimate(const MethodConfig& config, const Problem& p, const TensorView& q,
                                 const TensorView& k, const EstimateOptions&) const {
  const auto lock = kokkos_ready();
  Estimate e;
  e.method = std::string(method_name(config));
  e.backend = std::string(name());
  std::visit(Overload{[&](const DenseConfig& c) { e.mask = TileMask::dense(MaskShape::of(p, c.tile_q, c.tile_k)); },
                      [&](const sparge::Config& c) { e.mask = run_sparge(p, q, k, c); },
                      [&](const bfla::Config& c) { e.mask = run_bfla(p, q, k, c, nullptr); },
                      [&](const fg_attn::Config& c) {
                        e.mask = run_fg_attn(p, q, k, c);
                        if (c.semantics == fg_attn::Semantics::union_keys)
                          e.mask = fg_attn::effective_mask(e.mask, fg_attn::plan(e.mask, c), c.semantics);
                      },
                      [&](const anchor_attn::Config& c) {
                        std::int64_t counts[2] = {0, 0};
                        e.mask = run_anchor_attn(p, q, k, c, e.anchor_state, counts);
                        e.candidates = counts[0];
                        e.selected = counts[1];
                      },
                      [&](const sale::Config& c) {
                        std::int64_t counts[2] = {0, 0};
                        e.mask = run_sale(p, q, k, c, e.margins, e.anchor_state, counts);
                        e.candidates = counts[0];
                        e.selected = counts[1];
                      }},
             config);
  return e;
}

TileMask bfla_estimate_with_scores(const Problem& p, const TensorView& q, const TensorView& k, const bfla::Config& c,
                                   std::vector<std::vector<float>>& scores) {
  const auto lock = kokkos_ready();
  return run_bfla(p, q, k, c, &scores);
}

TileMask anchor_attn_estimate_with_anchors(const Problem& p, const TensorView& q, const TensorView& k,
                                          const anchor_attn::Config& c, std::vector<AnchorStats>& anchors) {
  const auto lock = kokkos_ready();
  std::int64_t counts[2] = {0, 0};
  return run_anchor_attn(p, q, k, c, anchors, counts);
}

TileMask sale_estimate_with_states(const Problem& p, const TensorView& q, const TensorView& k, const sale::Config& c,
                                   std::vector<float>& margins, std::vector<SoftmaxState>& sink_local) {
  const auto lock = kokkos_ready();
  std::int64_t counts[2] = {0, 0};
  return run_sale(p, q, k, c, margins, sink_local, counts);
}

}  // namespace spattn::kokkos
