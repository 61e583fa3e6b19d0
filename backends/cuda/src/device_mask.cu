// DeviceTensor and DeviceTileMask (spattn/cuda/backend.hpp): a tensor copy, and a mask in device memory and the executor's work lists over it —
// the longest-first order of 128-row blocks for the sm90 kernel (built on the device by one kernel, for uploaded
// and estimated masks alike) and the merged work items of 16/32/64-row query tiles (item_rows_for; on the host for an
// uploaded mask, by a kernel for one an estimator filled).
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "estimator_kernels.cuh"
#include "flash.cuh"
#include "host_helpers.cuh"
#include "spattn/cuda/backend.hpp"
#include "spattn/error.hpp"
#include "spattn/mask_policy.hpp"

namespace spattn::cuda {
namespace {

using detail::check;

/// Entries past the kept counts in work_order_kernel's shared memory: ptxas loads the next unrolled step's counts
/// (two 16-byte reads) before the loop's exit test, which compute-sanitizer reports as reads past the allocation.
constexpr int kWorkOrderPad = 4;

/// work_order_kernel's dynamic shared memory: the kept counts of a section's blocks, and the pad.
std::size_t work_order_smem_bytes(int section, int blocks) {
  return (static_cast<std::size_t>(section) * static_cast<std::size_t>(blocks) + kWorkOrderPad) * sizeof(std::int64_t);
}

/// One CTA per (batch, section of `section` consecutive mask heads): each 128-row block's rank under
/// mask_policy::runs_before among the blocks of its section (index: head in the section · nb + block) is its place in
/// the order. Kept counts are staged in shared memory ((section · blocks + kWorkOrderPad) · 8 bytes).
/// base[2b] = first order entry of (b, mask head 0), base[2b + 1] = 128-row blocks of sequence b.
__global__ void work_order_kernel(const std::int64_t* row_begin, const std::int64_t* row_end, int num_q_tiles,
                                  int per_tile, int mask_heads, int blocks, int section, const std::int32_t* base,
                                  std::int32_t* order) {
  extern __shared__ std::int64_t kept[];
  const int sections = (mask_heads + section - 1) / section;
  const int b = static_cast<int>(blockIdx.x) / sections, h0 = static_cast<int>(blockIdx.x) % sections * section;
  const int nb = base[2 * b + 1], n = min(section, mask_heads - h0) * nb;
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    const std::int64_t bh = static_cast<std::int64_t>(b) * mask_heads + h0 + e / nb;
    const std::int64_t r = bh * num_q_tiles + (e % nb) / per_tile;
    kept[e] = row_end[r] - row_begin[r];
  }
  __syncthreads();
  const std::int64_t first = base[2 * b] + static_cast<std::int64_t>(h0) * nb;
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    int rank = 0;
    for (int f = 0; f < n; ++f) rank += mask_policy::runs_before<std::int64_t>(kept[f], f, kept[e], e) ? 1 : 0;
    order[first + rank] = (b * mask_heads + h0 + e / nb) * blocks + e % nb;
  }
}

/// Mask heads per section of the work order (DeviceTileMask::order_section): as many as have their keys and values
/// in the GPU's L2 cache together (each head's K and V counted as rows of 512 bytes: head dim 128 in 16 bits; an
/// H100's 50 MB: 12 heads at 8K keys, 3 at 32K, 1 from 64K on), at most mask_heads and 2048 blocks (the work order
/// kernel's shared memory), at least 1. Measured on an H100 against half the L2 (cuda-executor.md, version 10): 8K
/// dense 6 % faster, 32K equal within the spread.
int section_heads(const MaskShape& s, std::int64_t blocks) {
  int dev = 0, l2 = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "cudaDeviceGetAttribute");
  const std::int64_t fit = static_cast<std::int64_t>(l2) / (std::max<std::int64_t>(s.seqlen_kv, 1) * 512);
  return static_cast<int>(
      std::max<std::int64_t>(1, std::min({fit, s.mask_heads, 2048 / std::max<std::int64_t>(blocks, 1)})));
}

/// Rows per merged work item of a mask of this shape, 0 for none (DeviceTileMask::item_rows): 128 where the sm90
/// kernel runs (its 128-row blocks: 16/32/64-row tiles), 64 elsewhere for 16/32-row tiles (the mma.sync kernel's
/// 64-row CTAs), none for 64-row tiles there (one CTA per tile).
int item_rows_for(const MaskShape& s) {
  const bool sm90 = use_sm90();
  if (s.tile_q == 16 || s.tile_q == 32) return sm90 ? 128 : 64;
  return s.tile_q == 64 && sm90 ? 128 : 0;
}

/// One CTA per merged work item (b, mask head, block of item rows) of a mask with 16/32/64-row tiles: the union of its
/// per_item member rows' key tiles with a membership byte each (bit m: member m kept the tile), ascending, written
/// into the item's slot [item_begin[item], …) and item_end. `bits` (dynamic shared memory) holds tk bytes.
__global__ void merge_items_kernel(const std::int64_t* row_begin, const std::int64_t* row_end, const std::int32_t* tiles,
                                   int num_q_tiles, int per_item, int blocks, int tk, const std::int64_t* item_begin,
                                   std::int64_t* item_end, std::int32_t* item_tiles, std::uint8_t* item_members) {
  extern __shared__ std::uint8_t bits[];
  __shared__ unsigned long long scan[32];
  const std::int64_t item = blockIdx.x, bh = item / blocks, blk = item % blocks, base = item_begin[item];
  for (int j = threadIdx.x; j < tk; j += blockDim.x) bits[j] = 0;
  for (int m = 0; m < per_item; ++m) {
    __syncthreads();  // one member at a time: a member's tiles are distinct, so its writes do not race
    const std::int64_t t = blk * per_item + m;
    if (t >= num_q_tiles) break;
    const std::int64_t r = bh * num_q_tiles + t;
    for (std::int64_t e = row_begin[r] + threadIdx.x; e < row_end[r]; e += blockDim.x)
      bits[tiles[e]] = static_cast<std::uint8_t>(bits[tiles[e]] | (1u << m));
  }
  __syncthreads();
  const int n = detail::compact_kept(bits, tk, scan, [&](int at, int j) {
    item_tiles[base + at] = j;
    item_members[base + at] = bits[j];
  });
  if (threadIdx.x == 0) item_end[item] = base + n;
}

}  // namespace

template <class T>
T* DeviceTileMask::allocate(std::size_t n) {
  bytes_ += std::max<std::size_t>(n, 1) * sizeof(T);
  return static_cast<T*>(detail::device_allocate(std::max<std::size_t>(n, 1) * sizeof(T), owned_));
}

void DeviceTileMask::allocate_order() {
  if (shape_.tile_q % 128 != 0 && item_rows_ != 128) return;
  const std::int64_t blocks = (shape_.seqlen_q + 127) / 128;
  if (shape_.batch * shape_.mask_heads * blocks > INT32_MAX) fail("cuda backend: mask too large");
  std::vector<std::int32_t> base;
  std::int64_t total = 0;
  for (std::int64_t b = 0; b < shape_.batch; ++b) {
    const std::int64_t nb = (shape_.seqlen_q_of(b) + 127) / 128;
    base.push_back(static_cast<std::int32_t>(total));
    base.push_back(static_cast<std::int32_t>(nb));
    total += nb * shape_.mask_heads;
  }
  order_size_ = static_cast<int>(total);
  order_blocks_ = static_cast<int>(blocks);
  order_section_ = section_heads(shape_, blocks);
  order_ = allocate<std::int32_t>(static_cast<std::size_t>(total));
  order_base_ = allocate<std::int32_t>(base.size());
  detail::upload(order_base_, base.data(), base.size() * sizeof(std::int32_t));
  work_next_ = allocate<std::int32_t>(1);
  const std::size_t staged = work_order_smem_bytes(order_section_, order_blocks_);
  if (staged > 48 * 1024)
    check(cudaFuncSetAttribute(work_order_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(staged)),
          "work order: shared memory for this sequence length");
}

void DeviceTileMask::allocate_items() {
  item_rows_ = item_rows_for(shape_);
  if (item_rows_ == 0) return;
  const std::int64_t blocks = (shape_.seqlen_q + item_rows_ - 1) / item_rows_, per_item = item_rows_ / shape_.tile_q;
  const std::int64_t tq = shape_.num_q_tiles();
  items_ = shape_.batch * shape_.mask_heads * blocks;
  // An item's union lies within its members' reach: capacity = the largest member reach.
  std::vector<std::int64_t> begin(static_cast<std::size_t>(items_));
  std::int64_t total = 0;
  for (std::int64_t i = 0; i < items_; ++i) {
    const std::int64_t b = i / (shape_.mask_heads * blocks), blk = i % blocks;
    std::int64_t cap = 0;
    for (std::int64_t t = blk * per_item; t < std::min(tq, (blk + 1) * per_item); ++t)
      cap = std::max(cap, shape_.reachable_k_tiles(b, t));
    begin[static_cast<std::size_t>(i)] = total;
    total += cap;
  }
  item_begin_ = allocate<std::int64_t>(begin.size());
  item_end_ = allocate<std::int64_t>(begin.size());
  detail::upload(item_begin_, begin.data(), begin.size() * sizeof(std::int64_t));
  detail::upload(item_end_, begin.data(), begin.size() * sizeof(std::int64_t));
  item_tiles_ = allocate<std::int32_t>(static_cast<std::size_t>(total));
  item_members_ = allocate<std::uint8_t>(static_cast<std::size_t>(total));
}

void DeviceTileMask::build_work_order(CUstream_st* stream) const {
  if (!csr_ && items_ > 0) {
    const std::int64_t blocks = (shape_.seqlen_q + item_rows_ - 1) / item_rows_;
    merge_items_kernel<<<static_cast<unsigned>(items_), 256, static_cast<std::size_t>(shape_.num_k_tiles()), stream>>>(
        row_begin_, row_end_, tiles_, static_cast<int>(shape_.num_q_tiles()), item_rows_ / shape_.tile_q,
        static_cast<int>(blocks), static_cast<int>(shape_.num_k_tiles()), item_begin_, item_end_, item_tiles_,
        item_members_);
    check(cudaGetLastError(), "merged items kernel launch");
  }
  if (order_ == nullptr || order_size_ == 0) return;
  const std::int64_t sections = (shape_.mask_heads + order_section_ - 1) / order_section_;
  const auto grid = static_cast<unsigned>(shape_.batch * sections);
  const bool items = item_rows_ == 128;  // the blocks are the items: ranked by their unions' lengths
  work_order_kernel<<<grid, 256, work_order_smem_bytes(order_section_, order_blocks_), stream>>>(
      items ? item_begin_ : row_begin_, items ? item_end_ : row_end_,
      items ? order_blocks_ : static_cast<int>(shape_.num_q_tiles()), items ? 1 : shape_.tile_q / 128,
      static_cast<int>(shape_.mask_heads), order_blocks_, order_section_, order_base_, order_);
  check(cudaGetLastError(), "work order kernel launch");
}

DeviceTileMask::DeviceTileMask(const TileMask& mask, CUstream_st* stream)
    : shape_(mask.shape), item_rows_(item_rows_for(mask.shape)) {
  if (item_rows_ > 0) {  // work items of item_rows / tile_q consecutive query tiles (exact semantics)
    const std::int64_t per_item = item_rows_ / mask.shape.tile_q;
    const std::int64_t blocks = (mask.shape.seqlen_q + item_rows_ - 1) / item_rows_, tq = mask.shape.num_q_tiles();
    std::vector<std::int64_t> ptr = {0};
    std::vector<std::int32_t> keys;
    std::vector<std::uint8_t> members;
    std::vector<std::int32_t> merged;
    for (std::int64_t bh = 0; bh < mask.shape.batch * mask.shape.mask_heads; ++bh)
      for (std::int64_t blk = 0; blk < blocks; ++blk) {
        merged.clear();
        for (std::int64_t m = 0; m < per_item && blk * per_item + m < tq; ++m) {
          const std::int64_t r = bh * tq + blk * per_item + m;
          merged.insert(merged.end(), mask.tiles.begin() + mask.row_ptr[r], mask.tiles.begin() + mask.row_ptr[r + 1]);
        }
        std::sort(merged.begin(), merged.end());
        merged.erase(std::unique(merged.begin(), merged.end()), merged.end());
        for (std::int32_t k : merged) {
          std::uint8_t bits = 0;
          for (std::int64_t m = 0; m < per_item && blk * per_item + m < tq; ++m) {
            const std::int64_t r = bh * tq + blk * per_item + m;
            if (std::binary_search(mask.tiles.begin() + mask.row_ptr[r], mask.tiles.begin() + mask.row_ptr[r + 1], k))
              bits = static_cast<std::uint8_t>(bits | (1u << m));
          }
          keys.push_back(k);
          members.push_back(bits);
        }
        ptr.push_back(static_cast<std::int64_t>(keys.size()));
      }
    item_begin_ = allocate<std::int64_t>(ptr.size());
    item_end_ = item_begin_ + 1;
    item_tiles_ = allocate<std::int32_t>(keys.size());
    item_members_ = allocate<std::uint8_t>(members.size());
    detail::upload(item_begin_, ptr.data(), ptr.size() * sizeof(std::int64_t));
    detail::upload(item_tiles_, keys.data(), keys.size() * sizeof(std::int32_t));
    detail::upload(item_members_, members.data(), members.size());
  }
  row_begin_ = allocate<std::int64_t>(mask.row_ptr.size());
  row_end_ = row_begin_ + 1;
  detail::upload(row_begin_, mask.row_ptr.data(), mask.row_ptr.size() * sizeof(std::int64_t));
  tile_slots_ = static_cast<std::int64_t>(mask.tiles.size());
  tiles_ = allocate<std::int32_t>(mask.tiles.size());
  detail::upload(tiles_, mask.tiles.data(), mask.tiles.size() * sizeof(std::int32_t));
  allocate_order();
  if (!detail::measuring()) build_work_order(stream);
}

DeviceTileMask::DeviceTileMask(const MaskShape& shape) : shape_(shape), csr_(false) {
  const std::int64_t rows = shape.num_rows(), tq = shape.num_q_tiles();
  std::vector<std::int64_t> begin(static_cast<std::size_t>(rows));
  std::int64_t total = 0;  // row r holds up to its reachable tiles (a causal mask: about half of num_k_tiles())
  for (std::int64_t r = 0; r < rows; ++r) {
    begin[static_cast<std::size_t>(r)] = total;
    total += shape.reachable_k_tiles(r / (shape.mask_heads * tq), r % tq);
  }
  tile_slots_ = total;
  row_begin_ = allocate<std::int64_t>(begin.size());
  row_end_ = allocate<std::int64_t>(begin.size());
  detail::upload(row_begin_, begin.data(), begin.size() * sizeof(std::int64_t));
  detail::upload(row_end_, begin.data(), begin.size() * sizeof(std::int64_t));
  tiles_ = allocate<std::int32_t>(static_cast<std::size_t>(total));
  allocate_items();
  allocate_order();
}

TileMask DeviceTileMask::download(CUstream_st* stream) const {
  check(cudaStreamSynchronize(stream), "synchronize");
  const std::int64_t rows = shape_.num_rows();
  std::vector<std::int64_t> begin(static_cast<std::size_t>(rows)), end(begin.size());
  if (rows > 0) {
    check(cudaMemcpy(begin.data(), row_begin_, begin.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
    check(cudaMemcpy(end.data(), row_end_, end.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  const std::size_t stored = csr_ ? static_cast<std::size_t>(rows > 0 ? end.back() : 0) : static_cast<std::size_t>(tile_slots_);
  std::vector<std::int32_t> all(stored);
  if (stored > 0) check(cudaMemcpy(all.data(), tiles_, stored * sizeof(std::int32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::vector<std::vector<std::int32_t>> lists(begin.size());
  for (std::size_t r = 0; r < lists.size(); ++r) lists[r].assign(all.begin() + begin[r], all.begin() + end[r]);
  return TileMask::from_rows(shape_, std::move(lists));
}

DeviceTensor::DeviceTensor(const HostTensor& host) : view_(host.view()), bytes_(host.size_bytes()) {
  view_.data = nullptr;
  check(cudaMalloc(&view_.data, std::max<std::size_t>(bytes_, 1)), "cudaMalloc");
  check(cudaMemcpy(view_.data, host.data(), bytes_, cudaMemcpyHostToDevice), "cudaMemcpy");
  view_.memory = Memory::cuda;
}

DeviceTensor::~DeviceTensor() { cudaFree(view_.data); }

void DeviceTensor::download(HostTensor& host) const {
  if (host.size_bytes() != bytes_) fail("cuda backend: DeviceTensor::download: ", host.size_bytes(), " bytes, device holds ", bytes_);
  check(cudaMemcpy(host.data(), view_.data, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

DeviceTileMask::~DeviceTileMask() {
  for (void* p : {static_cast<void*>(row_begin_), static_cast<void*>(tiles_), static_cast<void*>(item_begin_),
                  static_cast<void*>(item_tiles_), static_cast<void*>(item_members_), static_cast<void*>(order_),
                  static_cast<void*>(order_base_), static_cast<void*>(work_next_)})
    detail::device_free(p, owned_);
  if (!csr_) detail::device_free(row_end_, owned_), detail::device_free(item_end_, owned_);
}

}  // namespace spattn::cuda
