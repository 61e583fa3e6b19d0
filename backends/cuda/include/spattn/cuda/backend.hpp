// The hand-written CUDA executor as a dispatchable backend. Covers calls whose tensors are in CUDA memory
// and fit its kernels (see not_supported_reasons); spattn::attend() falls back or explains otherwise.
#pragma once

#include "spattn/backend.hpp"

struct CUstream_st;

namespace spattn::cuda {

/// A TileMask copied to device memory once, for calls that reuse it (benchmarks, layers with a fixed mask).
/// Keeps no reference to the TileMask it was built from (which may be a temporary): its shape is copied.
class DeviceTileMask {
 public:
  explicit DeviceTileMask(const TileMask& mask);
  ~DeviceTileMask();
  DeviceTileMask(const DeviceTileMask&) = delete;
  DeviceTileMask& operator=(const DeviceTileMask&) = delete;
  /// The mask's shape (tile_q, tile_k, mask_heads, num_q_tiles(), …), copied at construction.
  const MaskShape& shape() const { return shape_; }
  std::int32_t tile_q() const { return shape_.tile_q; }
  std::int32_t tile_k() const { return shape_.tile_k; }
  std::int64_t mask_heads() const { return shape_.mask_heads; }
  std::int64_t num_q_tiles() const { return shape_.num_q_tiles(); }
  const std::int64_t* row_ptr() const { return row_ptr_; }
  const std::int32_t* tiles() const { return tiles_; }
  /// Merged work items for query tiles of 16 or 32 rows (null otherwise): 64 / tile_q consecutive query tiles
  /// per item, the union of their kept key tiles and a membership byte per union tile (FlashParams::item_ptr;
  /// built in the constructor, backend.cu; read by flash_sm80_kernel's kMerged path, flash_sm80.cu).
  const std::int64_t* item_ptr() const { return item_ptr_; }
  const std::int32_t* item_tiles() const { return item_tiles_; }
  const std::uint8_t* item_members() const { return item_members_; }
  /// For tile_q a multiple of 128 (null otherwise): the mask's 128-row blocks (b, mask head, block) encoded
  /// as (b * mask_heads + h) * order_blocks() + block, by (batch, mask head), then by kept key tiles, most first (ties by index),
  /// blocks past a sequence's end left out. The sm90 kernel runs them in this order.
  const std::int32_t* order() const { return order_; }
  int order_size() const { return order_size_; }
  int order_blocks() const { return order_blocks_; }

 private:
  MaskShape shape_;
  std::int64_t* row_ptr_ = nullptr;
  std::int32_t* tiles_ = nullptr;
  std::int64_t* item_ptr_ = nullptr;
  std::int32_t* item_tiles_ = nullptr;
  std::uint8_t* item_members_ = nullptr;
  std::int32_t* order_ = nullptr;
  int order_size_ = 0, order_blocks_ = 0;
};

/// SpargeAttn's PV-skip for attend_async (AttendOptions::pv_threshold … in device form): one threshold per
/// query head (device array), vote rows 16, 64 or 128, exempt last tiles, and a device counter that
/// receives the skipped (vote group, key tile) pairs. Runs on the sm90 kernel only.
struct DevicePvSkip {
  const float* thresholds = nullptr;
  int vote_rows = 128;
  int exempt_last = 1;
  unsigned long long* skipped = nullptr;
};

/// Enqueues the executor on `stream` without synchronising. On a compute-capability-9.0 GPU, masks with
/// tile_q a multiple of 128 run the sm90 WGMMA kernel, everything else the mma.sync kernel; the environment
/// variable SPATTN_CUDA_KERNEL=sm80 forces the latter (A/B comparisons, conformance of both). Arguments must already be validated and
/// covered (CudaBackend::not_supported_reasons empty). cu_seqlens_* are device copies of the problem's
/// offsets (null when not variable-length); lse and empty_rows (a device counter) are optional.
void attend_async(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                  const DeviceTileMask& mask, const TensorView& o, float* lse, const std::int64_t* cu_seqlens_q,
                  const std::int64_t* cu_seqlens_kv, int* empty_rows, CUstream_st* stream = nullptr,
                  const DevicePvSkip* pv_skip = nullptr);

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  std::vector<std::string> not_supported_reasons(const Problem& problem, const TensorView& q, const TensorView& k,
                                                 const TensorView& v, const TileMask& mask, const TensorView& o,
                                                 const AttendOptions& options) const override;
  AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                     const TileMask& mask, const TensorView& o, const AttendOptions& options) const override;
};

}  // namespace spattn::cuda
