// The hand-written CUDA executor as a dispatchable backend. Covers calls whose tensors are in CUDA memory
// and fit its kernels (see not_supported_reasons); spattn::attend() falls back or explains otherwise.
#pragma once

#include "spattn/backend.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/tensor.hpp"

struct CUstream_st;

namespace spattn::cuda {

/// A TileMask in device memory: uploaded from a host TileMask once (benchmarks, layers with a fixed mask), or
/// built on the device by an estimator (Plan). Mask row r lists tiles()[row_begin()[r] .. row_end()[r]), ascending;
/// an uploaded mask is CSR (row_end = row_begin + 1), an estimated one has rows of fixed capacity (each row's
/// reachable tiles). Keeps no
/// reference to a TileMask it was built from (which may be a temporary): its shape is copied.
class DeviceTileMask {
 public:
  /// Uploads `mask` and builds the executor's work lists (synchronous copies; the work order is built on
  /// `stream`).
  explicit DeviceTileMask(const TileMask& mask, CUstream_st* stream = nullptr);
  /// Storage for a mask of `shape` whose rows an estimator fills on the device: row r = (b, h, t) holds up to
  /// shape.reachable_k_tiles(b, t) tiles — a mask lists no other — from row_begin()[r] = the sum of the earlier rows'
  /// capacities (written here; a causal mask needs about half of rows · num_k_tiles()); the estimator writes the tiles
  /// and row_end, then calls build_work_order(stream), which also builds the merged work items of 16/32/64-row tiles
  /// (capacity per item: its largest member reach). Any tile_q is stored; the executor runs 16, 32 and multiples of 64.
  explicit DeviceTileMask(const MaskShape& shape);
  ~DeviceTileMask();
  DeviceTileMask(const DeviceTileMask&) = delete;
  DeviceTileMask& operator=(const DeviceTileMask&) = delete;
  /// The mask's shape (tile_q, tile_k, mask_heads, num_q_tiles(), …), copied at construction.
  const MaskShape& shape() const { return shape_; }
  std::int32_t tile_q() const { return shape_.tile_q; }
  std::int32_t tile_k() const { return shape_.tile_k; }
  std::int64_t mask_heads() const { return shape_.mask_heads; }
  std::int64_t num_q_tiles() const { return shape_.num_q_tiles(); }
  const std::int64_t* row_begin() const { return row_begin_; }
  const std::int64_t* row_end() const { return row_end_; }
  const std::int32_t* tiles() const { return tiles_; }
  std::int64_t* row_end() { return row_end_; }
  std::int32_t* tiles() { return tiles_; }
  /// Merged work items (null when none): item_rows() / tile_q consecutive query tiles per item, the union of their
  /// kept key tiles and a membership byte per union tile (bit m: member m kept it); item i lists
  /// item_tiles()[item_begin()[i] .. item_end()[i]). Query tiles of 16 or 32 rows: items of 128 rows where the sm90
  /// kernel runs (use_sm90() when the mask is built), 64 elsewhere; of 64 rows: items of 128 rows where the sm90
  /// kernel runs, none elsewhere. Built on the host for an uploaded mask (CSR), by build_work_order() on the device
  /// for an estimated one; read by the sm90 kernel and by flash_sm80_kernel's kMerged path (tile_q 16/32).
  const std::int64_t* item_begin() const { return item_begin_; }
  const std::int64_t* item_end() const { return item_end_; }
  const std::int32_t* item_tiles() const { return item_tiles_; }
  const std::uint8_t* item_members() const { return item_members_; }
  int item_rows() const { return item_rows_; }
  /// For tile_q a multiple of 128 or items of 128 rows (null otherwise): the mask's 128-row blocks (b, mask head,
  /// block) encoded as (b * mask_heads + h) * order_blocks() + block, by batch, then by sections of order_section()
  /// consecutive mask heads, longest first inside a section (mask_policy::runs_before over the section's blocks,
  /// index: head in the section · blocks + block; items: by their union's length), blocks past a sequence's end left
  /// out. The sm90 kernel runs them in this order. A section is as many heads as have their K and V in the L2 cache
  /// together, so the last items of a section, and of the launch, are its shortest.
  const std::int32_t* order() const { return order_; }
  /// Mask heads per section of order() (≥ 1).
  int order_section() const { return order_section_; }
  int order_size() const { return order_size_; }
  /// With order(): the sm90 kernel's work queue, one device counter that each launch over this mask zeroes on its
  /// stream and its CTAs draw order() entries from. Launches that share a DeviceTileMask must therefore run one at a
  /// time (one stream, or ordered by events), as an estimate into it already must.
  std::int32_t* work_next() const { return work_next_; }
  int order_blocks() const { return order_blocks_; }
  /// Builds order() (tile_q a multiple of 128) and, for a mask estimated on the device with 16/32-row tiles, the
  /// merged items from the rows on `stream` (kernels: no host synchronisation, graph-capturable).
  void build_work_order(CUstream_st* stream) const;
  /// The mask on the host (waits for `stream`).
  TileMask download(CUstream_st* stream = nullptr) const;
  /// Device bytes this mask holds.
  std::size_t bytes() const { return bytes_; }
  /// Tile slots: the sum of the rows' capacities of an estimated mask, the kept tiles of an uploaded one.
  std::int64_t tile_slots() const { return tile_slots_; }

 private:
  void allocate_order();
  void allocate_items();
  template <class T>
  T* allocate(std::size_t n);
  MaskShape shape_;
  std::int64_t* row_begin_ = nullptr;
  std::int64_t* row_end_ = nullptr;  ///< row_begin_ + 1 for an uploaded CSR mask (not owned then)
  bool csr_ = true;
  bool owned_ = true;  ///< false: the memory is a caller's workspace (cuda::Plan's option)
  std::int32_t* tiles_ = nullptr;
  std::int64_t* item_begin_ = nullptr;
  std::int64_t* item_end_ = nullptr;  ///< item_begin_ + 1 for an uploaded mask (CSR; not owned then)
  std::int64_t items_ = 0;
  std::int32_t* item_tiles_ = nullptr;
  std::uint8_t* item_members_ = nullptr;
  int item_rows_ = 0;  ///< 0: no items
  std::int32_t* order_ = nullptr;
  std::int32_t* order_base_ = nullptr;  ///< per batch: first order entry of (b, mask head 0), and its block count
  std::int32_t* work_next_ = nullptr;   ///< the sm90 kernel's work queue counter (with order_)
  int order_size_ = 0, order_blocks_ = 0, order_section_ = 1;
  std::size_t bytes_ = 0;
  std::int64_t tile_slots_ = 0;
};

/// A device copy of a host tensor, same layout and strides (for callers without CUDA allocations of their own,
/// e.g. the spattn program's --backend cuda). view() is a TensorView of device memory.
class DeviceTensor {
 public:
  explicit DeviceTensor(const HostTensor& host);
  ~DeviceTensor();
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  TensorView view() const { return view_; }
  /// Copies the device contents into `host` (same shape; synchronous).
  void download(HostTensor& host) const;

 private:
  TensorView view_;
  std::size_t bytes_ = 0;
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

/// AttendOptions::state_out and AttendOptions::resume in device memory ([B, Hq, Nq] states, indexed like lse), for
/// attend_async: write each row's final (m, l); start rows from given states and l·O.
struct DeviceRowStates {
  SoftmaxState* state_out = nullptr;
  const SoftmaxState* resume = nullptr;
};

/// Enqueues the executor on `stream` without synchronising. On a compute-capability-9.0 GPU, masks with
/// tile_q a multiple of 128 run the sm90 WGMMA kernel, everything else the mma.sync kernel; the environment
/// variable SPATTN_CUDA_KERNEL=sm80 forces the latter (A/B comparisons, conformance of both). Arguments must already be validated and
/// covered (CudaBackend::not_supported_reasons empty). cu_seqlens_* are device copies of the problem's
/// offsets (null when not variable-length); lse and empty_rows (a device counter) are optional.
void attend_async(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                  const DeviceTileMask& mask, const TensorView& o, float* lse, const std::int64_t* cu_seqlens_q,
                  const std::int64_t* cu_seqlens_kv, int* empty_rows, CUstream_st* stream = nullptr,
                  const DevicePvSkip* pv_skip = nullptr, const DeviceRowStates& states = {});

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  /// The input range summary of a tensor in CUDA memory, computed on the GPU (input_range.cu; synchronises).
  std::optional<TensorRange> input_range(const Problem& problem, const TensorView& t, bool is_q, std::int64_t heads,
                                         std::int64_t dim) const override;
  std::vector<std::string> not_supported_reasons(const Problem& problem, const TensorView& q, const TensorView& k,
                                                 const TensorView& v, const TileMask& mask, const TensorView& o,
                                                 const AttendOptions& options) const override;
  AttendStats attend(const Problem& problem, const TensorView& q, const TensorView& k, const TensorView& v,
                     const TileMask& mask, const TensorView& o, const AttendOptions& options) const override;
  /// The device estimators (SpargeAttn, FG-Attn, BFLA): the mask is estimated in device memory and downloaded.
  std::vector<std::string> estimate_not_supported_reasons(const MethodConfig& config, const Problem& problem,
                                                          const TensorView& q, const TensorView& k,
                                                          const EstimateOptions& options) const override;
  Estimate estimate(const MethodConfig& config, const Problem& problem, const TensorView& q, const TensorView& k,
                    const EstimateOptions& options) const override;
  /// estimate → attend through a Plan: the mask stays on the device between the stages; the result's mask and
  /// counts are downloaded after both are enqueued.
  std::vector<std::string> sparse_attention_not_supported_reasons(const MethodConfig& config, const Problem& problem,
                                                                  const TensorView& q, const TensorView& k,
                                                                  const TensorView& v, const TensorView& o,
                                                                  const AttendOptions& options) const override;
  SparseAttentionResult sparse_attention(const MethodConfig& config, const Problem& problem, const TensorView& q,
                                         const TensorView& k, const TensorView& v, const TensorView& o,
                                         const AttendOptions& options) const override;
  /// CUDA memory (cudaMalloc / cudaFree) for calibrate()'s outputs beside device samples and spattn::upload.
  std::shared_ptr<void> allocate(Memory memory, std::size_t bytes) const override;
  bool download(Memory memory, void* host_dst, const void* src, std::size_t bytes) const override;
  bool upload(Memory memory, void* dst, const void* host_src, std::size_t bytes) const override;
};

}  // namespace spattn::cuda
