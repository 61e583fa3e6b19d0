// KokkosBackend: which calls the Kokkos kernels cover (in words), which execution space runs them, and Kokkos'
// initialisation (on first use, when the application has not initialised Kokkos itself).
#include "spattn/kokkos/backend.hpp"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <variant>

#include "spattn/error.hpp"
#include "spattn/input_range.hpp"

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

/// The executor's limit on its league (row blocks of 64 rows on a GPU, 128 on the host), or empty.
std::string row_block_reason(const Problem& p, const MaskShape& shape) {
  const std::int64_t blocks = (shape.tile_q + 63) / 64;
  if (p.batch * p.heads_q * shape.num_q_tiles() * blocks > INT_MAX) return "more than 2^31 row blocks (batch · heads · query tiles)";
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
  if (const std::string r = row_block_reason(p, mask.shape); !r.empty()) why.push_back(r);
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
  Estimate e = run_estimate(config, p, q, k);
  e.method = std::string(method_name(config));
  e.backend = std::string(name());
  return e;
}

std::vector<std::string> KokkosBackend::sparse_attention_not_supported_reasons(
    const MethodConfig& config, const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
    const TensorView& o, const AttendOptions& options) const {
  EstimateOptions eo;
  eo.backend = options.backend;
  std::vector<std::string> why = estimate_not_supported_reasons(config, p, q, k, eo);
  for (std::string& r : memory_reasons({&q, &k, &v, &o}, options.backend))
    if (std::find(why.begin(), why.end(), r) == why.end()) why.push_back(std::move(r));
  if (const std::string r = row_block_reason(p, estimated_mask_shape(config, p)); !r.empty()) why.push_back(r);
  return why;
}

SparseAttentionResult KokkosBackend::sparse_attention(const MethodConfig& config, const Problem& p,
                                                      const TensorView& q, const TensorView& k, const TensorView& v,
                                                      const TensorView& o, const AttendOptions& options) const {
  const auto lock = kokkos_ready();
  SparseAttentionResult r = run_sparse_attention(config, p, q, k, v, o, options);
  r.estimate.method = std::string(method_name(config));
  r.estimate.backend = std::string(name());
  return r;
}

DeviceEstimate::DeviceEstimate(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
const MaskShape& DeviceEstimate::shape() const { return data_->shape; }
Memory DeviceEstimate::memory() const { return data_->memory; }
Estimate DeviceEstimate::download() const {
  const auto lock = kokkos_ready();
  return data_->download();
}

namespace {

[[noreturn]] void fail_with(const std::string& what, const std::vector<std::string>& why) {
  std::ostringstream all;
  for (const std::string& r : why) all << " " << r << ";";
  fail("kokkos: ", what, " not covered:", all.str());
}

}  // namespace

DeviceEstimate estimate_on_device(const MethodConfig& config, const Problem& p, const TensorView& q, const TensorView& k) {
  p.validate(q, k);
  validate(config, p);
  EstimateOptions eo;
  eo.backend = "kokkos";
  const std::vector<std::string> why = KokkosBackend().estimate_not_supported_reasons(config, p, q, k, eo);
  if (!why.empty()) fail_with(std::string(method_name(config)) + " estimate for " + p.describe(), why);
  if (q.memory == Memory::host) check_input_range(p, q, k, nullptr);
  const auto lock = kokkos_ready();
  return DeviceEstimate(run_estimate_on_device(config, p, q, k));
}

DeviceEstimate upload(const TileMask& mask, Memory memory) {
  mask.validate();
  require(serves(memory), "kokkos: this build has no execution space for ", to_string(memory), " memory (",
          execution_spaces(), ")");
  const auto lock = kokkos_ready();
  return DeviceEstimate(upload_mask(mask, memory));
}

AttendStats attend(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                   const DeviceEstimate& estimate, const TensorView& o, const AttendOptions& options) {
  p.validate(q, k, v, o);
  options.validate(p.heads_q);
  const MaskShape& shape = estimate.shape();
  require(shape == MaskShape::of(p, shape.tile_q, shape.tile_k, shape.mask_heads != p.heads_q),
          "kokkos: the DeviceEstimate's mask (", shape.tile_q, " x ", shape.tile_k, " tiles, ", shape.mask_heads,
          " mask heads) was not estimated for ", p.describe());
  require(q.memory == estimate.memory(), "kokkos: the tensors must be in the memory the DeviceEstimate lies in (",
          to_string(estimate.memory()), "), not ", to_string(q.memory));
  std::vector<std::string> why = memory_reasons({&q, &k, &v, &o}, "kokkos");
  if (const std::string r = row_block_reason(p, shape); !r.empty()) why.push_back(r);
  if (!why.empty()) fail_with("attend for " + p.describe(), why);
  if (q.memory == Memory::host) check_input_range(p, q, k, &v);
  const auto lock = kokkos_ready();
  const DeviceEstimate::Data& d = estimate.data();
  return run_attend(p, q, k, v, shape, d.row_ptr, d.tiles, o, options);
}

TileMask bfla_estimate_with_scores(const Problem& p, const TensorView& q, const TensorView& k, const bfla::Config& c,
                                   std::vector<std::vector<float>>& scores) {
  const auto lock = kokkos_ready();
  return run_bfla_with_scores(p, q, k, c, scores);
}

TileMask anchor_attn_estimate_with_anchors(const Problem& p, const TensorView& q, const TensorView& k,
                                          const anchor_attn::Config& c, std::vector<AnchorStats>& anchors) {
  const auto lock = kokkos_ready();
  Estimate e = run_estimate(c, p, q, k);
  anchors = std::move(e.anchor_state);
  return std::move(e.mask);
}

TileMask sale_estimate_with_states(const Problem& p, const TensorView& q, const TensorView& k, const sale::Config& c,
                                   std::vector<float>& margins, std::vector<SoftmaxState>& sink_local) {
  const auto lock = kokkos_ready();
  Estimate e = run_estimate(c, p, q, k);
  margins = std::move(e.margins);
  sink_local = std::move(e.anchor_state);
  return std::move(e.mask);
}

}  // namespace spattn::kokkos
