// The dense "estimator" on the GPU (DenseConfig: every tile kept, the tile-sparse executor as exact dense attention):
// one kernel writes every reachable key tile of each mask row (mask_policy::reachable_tiles, as TileMask::dense on
// the host), so that dense attention runs through the same Plan — on the caller's stream, graph-capturable — as the
// methods, for baselines. Reads no tensor; no workspace.
#include <cuda_runtime.h>

#include "estimator_interface.cuh"
#include "estimator_kernels.cuh"
#include "host_helpers.cuh"
#include "spattn/mask_policy.hpp"

namespace spattn::cuda {
namespace {

using detail::check;
using detail::Seqs;

/// One CTA per (batch·mask head, query tile) row (blockIdx.y, blockIdx.x): tiles 0 … reachable − 1.
__global__ void dense_rows_kernel(Seqs seqs, int tile_q, int tile_k, int mask_heads, int num_q_tiles,
                                  const std::int64_t* row_begin, std::int64_t* row_end, std::int32_t* tiles) {
  const int bh = static_cast<int>(blockIdx.y), t = static_cast<int>(blockIdx.x), b = bh / mask_heads;
  const std::int64_t row = static_cast<std::int64_t>(bh) * num_q_tiles + t;
  const std::int64_t nq = seqs.len_q(b), nkv = seqs.len_kv(b);
  const std::int64_t n = mask_policy::reachable_tiles<std::int64_t>(t, tile_q, tile_k, nq, nkv, seqs.causal);
  std::int32_t* out = tiles + row_begin[row];
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) out[j] = static_cast<std::int32_t>(j);
  if (threadIdx.x == 0) row_end[row] = row_begin[row] + n;
}

class DenseEstimator final : public DeviceEstimator {
 public:
  DenseEstimator(const DenseConfig& c, const Problem& p, const std::int64_t* cu_q, const std::int64_t* cu_kv)
      : shape_(MaskShape::of(p, c.tile_q, c.tile_k)), seqs_(Seqs::of(p, cu_q, cu_kv)) {}
  MaskShape shape() const override { return shape_; }
  std::size_t workspace_bytes() const override { return 0; }
  void run(const TensorView&, const TensorView&, DeviceTileMask& mask, cudaStream_t stream) override {
    const auto tq = static_cast<unsigned>(shape_.num_q_tiles()), rows = static_cast<unsigned>(shape_.batch * shape_.mask_heads);
    if (tq > 0 && rows > 0)
      dense_rows_kernel<<<dim3(tq, rows), 128, 0, stream>>>(seqs_, shape_.tile_q, shape_.tile_k,
                                                          static_cast<int>(shape_.mask_heads), static_cast<int>(tq),
                                                          mask.row_begin(), mask.row_end(), mask.tiles());
    check(cudaGetLastError(), "kernel launch");
    mask.build_work_order(stream);
  }

 private:
  MaskShape shape_;
  Seqs seqs_;
};

}  // namespace

std::vector<std::string> dense_not_supported_reasons(const DenseConfig& c, const Problem& p) {
  std::vector<std::string> why;
  if (MaskShape::of(p, c.tile_q, c.tile_k).num_q_tiles() > 65535) why.push_back("the CUDA dense mask takes at most 65535 query tiles");
  if (p.batch * p.heads_q > 65535) why.push_back("the CUDA dense mask takes at most 65535 (batch, head) pairs");
  return why;
}

std::unique_ptr<DeviceEstimator> make_dense_estimator(const DenseConfig& c, const Problem& p, const std::int64_t* cu_q,
                                                      const std::int64_t* cu_kv) {
  return std::make_unique<DenseEstimator>(c, p, cu_q, cu_kv);
}

}  // namespace spattn::cuda
