// Tile-sparse flash attention for Hopper (sm_90a): WGMMA tensor-core products fed by a producer warpgroup
// through an mbarrier pipeline. Same function as flash_sm80.cu (DESIGN.md §3); chosen for 128-row query
// blocks (mask tile_q a multiple of 128, or merged 16/32/64-row tiles) on compute capability 9.0, head dims 64, 96, 128
// and 256 (96 is stored zero-padded to 128 columns: kStored; 256 streams 64-key chunks through 2 stages: kChunkKeys,
// SmemLayout). Which keys a row sees, the block key end, the kept-key lookup, the PV-skip vote and empty rows are
// spattn/mask_policy.hpp's, as in the reference.
//
// CTA: 3 warpgroups (384 threads); a work item is one 128-row query block of one head: a 128k-row tile's rows, or the
// merged item of 16/32/64-row tiles (DeviceTileMask::item_rows = 128: the union of the member tiles' key tiles, each
// with a membership byte; per stage the producer publishes each member tile's 128-bit set of the chunk's keys, and each
// warp masks the keys its own tile did not keep, so the output is exactly the mask's). The pieces, in file order:
// - SmemLayout, Smem: the shared-memory layout (Q block, kStages K and V stages, the stages' key indices, two work-queue
//   indices, mbarriers) and its addresses at run time; Smem::init_barriers.
// - Scheduler: the work queue (fetch: an atomic counter over DeviceTileMask::order, zeroed by each launch) and
//   work-item decoding (load: order entry and query head → WorkItem, the sequence, heads, mask row, block key end and
//   chunk count). Items run longest first inside each section of mask heads whose K/V fit in L2 together
//   (DeviceTileMask::order), the query heads sharing a mask row next to each other (same K/V under GQA); a persistent
//   grid of one CTA per SM takes them from the queue (launch_kernel).
//   The producer fetches each item's index and publishes it with the item's Q (q_full); both sides decode it.
// - Producer, warpgroup 0 (56 registers after setmaxnreg, 40 at D = 256): per item load_q (cp.async), then load_chunk
//   walks the block's kept key positions (the mask row's tiles concatenated, as in flash_sm80) kBN at a time: writes
//   the chunk's kBN key indices, then fills a stage of a 3-deep (2 at D = 256) mbarrier pipeline with those K and V
//   rows — load_tma when they are kBN consecutive keys, load_tma_fine for whole tiles of 8 … 64 keys with every key
//   valid (one box per tile), and otherwise load_gather, a 16-byte cp.async gather with zero-fill (stripes,
//   causal diagonal, ends), so every tile_k (1 … 128) runs full kBN-key WGMMAs. Completion is signalled on the
//   stage's K and V barriers (TMA transaction bytes, cp.async arrivals); the consumers fence the copies into
//   the async proxy WGMMA reads. A stage's K and V are refilled separately (k_empty after the chunk's softmax,
//   v_empty after its P·V), so the next chunk's K loads while the consumers still hold the previous chunk's V.
// - Consumer, warpgroups 1 and 2 (224 registers, 232 at D = 256): 64 query rows each. Per chunk: issue_s (S = Q·Kᵀ,
//   WGMMA m64nkBNk16, both operands in shared memory); softmax: causal/past-the-end masking only where the chunk
//   reaches past the warpgroup's first row, optional PV-skip (SpargeAttn), the core's base-2 online softmax
//   (Exp2Fast) in registers; pack_p; issue_pv (O += P·V, WGMMA with P from registers, V transposed from shared
//   memory); K is released after the softmax, V after P·V. run_item is the software pipeline: the softmax of chunk j
//   overlaps P·V of chunk j − 1, and the two warpgroups alternate GEMM turns (ping-pong).
// - int8 QKᵀ (kInt8, AttendOptions::qk_int8: SpargeAttn's Sage mode): Q and K arrive as the int8 codes of
//   int8_quant.cuh (code_cols(D) bytes per row, in the same swizzled layout: Q by cp.async, K by TMA boxes of 128 bytes
//   or the gather), each stage also carries its keys' scales δ_k, S is the exact s32 product (s8 WGMMA m64nkBNk32) and
//   the softmax takes acc·δ_k as the raw score with scale_log2·δ_q per row in place of scale_log2; P·V as always.
// - epilogue: per row, normalise by the softmax denominator, store, finish_row (LSE, empty-row count).
// - flash_sm90_kernel: barrier setup and the split into producer and consumers; then the host side (tensor
//   maps, launch_kernel, launch_flash_sm90).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>

#include "flash_helpers.cuh"
#include "host_helpers.cuh"
#include "sm90.cuh"
#include "spattn/error.hpp"
#include "spattn/mask_policy.hpp"

namespace spattn::cuda {
namespace {

using namespace detail;

constexpr int kBM = 128;  // query rows per CTA (2 consumer warpgroups × 64)
constexpr int kThreads = 384;
constexpr int kMaxMembers = kBM / 16;  // member tiles of a merged item (16-row tiles)
/// Columns a head of D is stored with in shared memory: D = 96 is zero-padded to 128 (the copies fill the last 32
/// columns with zeros: they add exact zeros to Q·Kᵀ and give O columns that are not stored), 64, 128, 256 as they are.
template <int D>
constexpr int kStored = D == 96 ? 128 : D;
/// Keys per chunk: 128, or 64 for D = 256 (two stages of 64-key K and V, 128 KB, next to the 64 KB Q block).
template <int D>
constexpr int kChunkKeys = D == 256 ? 64 : 128;
/// The int8 mode: rows of code_cols(D) bytes one pass of a warpgroup's 16-byte copies covers (16 or 8).
template <int D>
constexpr int kCodeRowStep = 128 / (code_cols(D) / 16);

// ----------------------------------------------------------------------------------------------------------
// Shared memory

/// Shared-memory layout (byte offsets from a 1024-aligned base).
template <int D>
struct SmemLayout {
  static constexpr int kD = kStored<D>;
  static constexpr int kBN = kChunkKeys<D>;
  static constexpr int kStages = D == 256 ? 2 : 3;
  static constexpr int kMemWords = kMaxMembers * kBN / 32;  // per stage: each member tile's set of the chunk's keys
  static constexpr int kTile = kBN * kD * 2;  // one K or V stage
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kBM * kD * 2;
  static constexpr int kV = kK + kStages * kTile;
  static constexpr int kKeys = kV + kStages * kTile;  // kStages × kBN key indices
  static constexpr int kMem = kKeys + kStages * kBN * 4;  // kStages × kMemWords membership words (merged items)
  // The int8 mode: a K stage holds kCodeTile bytes of codes, then (when they fit, D ≥ 96) its kBN key scales;
  // otherwise (D = 64) the scales get kStages × kBN floats of their own at kKeyScale.
  static constexpr int kCodeTile = kBN * code_cols(D);
  static constexpr bool kScaleInStage = kCodeTile + kBN * 4 <= kTile;
  static constexpr int kKeyScale = kMem + kStages * kMemWords * 4;
  static constexpr int kQueue = kKeyScale + (kScaleInStage ? 0 : kStages * kBN * 4);  // 2 fetched work indices
  static constexpr int kBars = kQueue + 8;  // q_full, k_full[S], v_full[S], k_empty[S], v_empty[S], q_empty
  static constexpr int kBytes = kBars + (2 + 4 * kStages) * 8 + 1024;  // + slack to align the base
  static_assert(kBytes <= 227 * 1024);
  static_assert(code_cols(D) <= 2 * kD);  // the int8 mode's code tiles fit in the Q block and the K stages
};

// The device pieces below exist in the sm_90a device pass only, the one where the kernel has a body.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// The layout at run time: shared-space addresses of the tiles and barriers, the stages' key indices and the work queue's
/// indices. Barriers: q_full (the item's index is published and its Q has landed),
/// k_full(s) / v_full(s) (stage s's K / V rows have landed; k_full also publishes the stage's key indices),
/// k_empty(s) (the consumers are done with stage s's K, keys, membership words and key scales: after the chunk's
/// softmax), v_empty(s) (done with its V: after the chunk's P·V) and q_empty (the consumers are done with the item's Q).
/// K and V are released separately (FlashAttention-3's two pipelines): the softmax of chunk j overlaps P·V of chunk
/// j − 1, so the consumers hold two stages' V but only one stage's K, and the producer refills a K stage a chunk
/// earlier than a stage released whole would allow (with 2 stages, D = 256: before, no load ran ahead at all).
template <int D>
struct Smem {
  using P = SmemLayout<D>;
  static constexpr int kBN = P::kBN, kStages = P::kStages;
  std::uint32_t base;  // the layout's 1024-aligned base (shared state space)
  int* key_base;       // kStages × kBN key indices (generic pointer)
  std::uint32_t* mem_base;  // per stage, kMemWords membership words of a merged item's keys (generic pointer)
  float* key_scale_base;    // per stage, the int8 mode's scales of its kBN keys (generic pointer)
  int* queue_base;          // 2 fetched work indices (generic pointer)

  __device__ __forceinline__ explicit Smem(unsigned char* raw)
      : base((smem_addr(raw) + 1023u) & ~1023u),
        key_base(reinterpret_cast<int*>(raw + (base - smem_addr(raw)) + P::kKeys)),
        mem_base(reinterpret_cast<std::uint32_t*>(raw + (base - smem_addr(raw)) + P::kMem)),
        key_scale_base(reinterpret_cast<float*>(raw + (base - smem_addr(raw)) +
                                                (P::kScaleInStage ? P::kK + P::kCodeTile : P::kKeyScale))),
        queue_base(reinterpret_cast<int*>(raw + (base - smem_addr(raw)) + P::kQueue)) {}

  __device__ __forceinline__ std::uint32_t q() const { return base + P::kQ; }
  __device__ __forceinline__ std::uint32_t k(int s) const { return base + P::kK + s * P::kTile; }
  __device__ __forceinline__ std::uint32_t v(int s) const { return base + P::kV + s * P::kTile; }
  __device__ __forceinline__ int* keys(int s) const { return key_base + s * kBN; }
  /// Merged items: word (kBN / 32)·m + w holds bit b for the stage's key 32·w + b when member tile m kept that key's
  /// tile.
  __device__ __forceinline__ std::uint32_t* mem(int s) const { return mem_base + s * P::kMemWords; }
  /// int8 mode: the dequantization scale of each of the stage's keys (0 for a −1 entry).
  __device__ __forceinline__ float* key_scale(int s) const {
    return key_scale_base + s * (P::kScaleInStage ? P::kTile / 4 : kBN);
  }
  /// The index of the CTA's n-th work item (Scheduler::fetch; slot n % 2), written by the producer's thread 0.
  __device__ __forceinline__ int* queue(int n) const { return queue_base + (n & 1); }
  __device__ __forceinline__ std::uint32_t q_full() const { return base + P::kBars; }
  __device__ __forceinline__ std::uint32_t k_full(int s) const { return base + P::kBars + 8u * (1 + s); }
  __device__ __forceinline__ std::uint32_t v_full(int s) const { return base + P::kBars + 8u * (1 + kStages + s); }
  __device__ __forceinline__ std::uint32_t k_empty(int s) const { return base + P::kBars + 8u * (1 + 2 * kStages + s); }
  __device__ __forceinline__ std::uint32_t v_empty(int s) const { return base + P::kBars + 8u * (1 + 3 * kStages + s); }
  __device__ __forceinline__ std::uint32_t q_empty() const { return base + P::kBars + 8u * (1 + 4 * kStages); }

  /// One thread, before the CTA's first __syncthreads.
  __device__ __forceinline__ void init_barriers() const {
    mbar_init(q_full(), 129);  // per producer thread its Q copies' arrive, and thread 0's release of the item's index
    for (int s = 0; s < kStages; ++s) {
      mbar_init(k_full(s), 256);  // per producer thread: a release arrive (keys) and its copies' arrive
      mbar_init(v_full(s), 128);
      mbar_init(k_empty(s), 256);  // one arrival per consumer thread (Consumer::release_k / release_v)
      mbar_init(v_empty(s), 256);
    }
    // Every consumer thread is done with the item's Q and has read its index (queue(n)): one arrival per thread, so
    // each thread's read is ordered before the producer's next write by its own release (racecheck: an arrival per
    // warp left the other lanes' reads of queue(n) reported as hazards).
    mbar_init(q_empty(), 256);
  }
};

// ----------------------------------------------------------------------------------------------------------
// Scheduler


/// One work item: a 128-row query block of one query head, with its mask row — or, for 16/32/64-row tiles, its
/// merged item (the union of its tiles' key tiles, with membership bytes).
struct WorkItem {
  int b, h, hkv;               // sequence of the batch, query head, its KV head
  int row0;                    // first query row of the block
  int nq, nkv;                 // the sequence's query and key lengths
  std::int64_t off_q, off_kv;  // the sequence's first row in packed (variable-length) Q/O and K/V, else 0
  const std::int32_t* tiles;   // the mask row's kept key tiles (ascending)
  int count;                   // and their number
  const std::uint8_t* members;  // merged item: per tile, bit m = member tile m (rows m·tile_q …) kept it; else null
  int limit;                   // block key end: no row of the block sees a key at or past it
  int chunks;                  // kBN-key chunks of the kept key positions (count · tile_k)
};

/// The launch's work items: entry w / group of DeviceTileMask::order (a 128-row block of (b, mask head)), for
/// query head w % group of the `group` query heads that share that mask head (adjacent: GQA's K/V reuse).
/// Persistent CTAs, one per SM, take them from a work queue: the producer's `fetch` is an atomic increment of the
/// launch's counter (FlashParams::work_next), so items start in the longest-first order and each CTA takes the next one
/// as soon as it can load it (no static share: a CTA that drew short items takes more). kBN: keys per chunk.
template <int kBN>
struct Scheduler {
  const FlashParams& p;
  int group;  // query heads per mask head
  int total;  // work items

  __device__ __forceinline__ explicit Scheduler(const FlashParams& params)
      : p(params), group(params.heads_q / params.mask_heads), total(params.order_size * group) {}

  /// The next work item's index (>= total: none left). One thread.
  __device__ __forceinline__ int fetch() const { return atomicAdd(p.work_next, 1); }

  __device__ __forceinline__ WorkItem load(int w) const {
    WorkItem it;
    const int item = p.order[w / group];
    const int blk = item % p.order_blocks;
    const int mh = (item / p.order_blocks) % p.mask_heads;
    it.b = item / p.order_blocks / p.mask_heads;
    it.h = mh * group + w % group;
    it.hkv = it.h / (p.heads_q / p.heads_kv);
    it.row0 = blk * kBM;
    it.nq = p.cu_q ? static_cast<int>(p.cu_q[it.b + 1] - p.cu_q[it.b]) : p.seqlen_q;
    it.nkv = p.cu_kv ? static_cast<int>(p.cu_kv[it.b + 1] - p.cu_kv[it.b]) : p.seqlen_kv;
    it.off_q = p.cu_q ? p.cu_q[it.b] : 0;
    it.off_kv = p.cu_kv ? p.cu_kv[it.b] : 0;
    if (p.item_rows == 128) {  // merged: the order entry is the item's index
      it.tiles = p.item_tiles + p.item_begin[item];
      it.members = p.item_members + p.item_begin[item];
      it.count = static_cast<int>(p.item_end[item] - p.item_begin[item]);
    } else {
      const std::int64_t mrow = (static_cast<std::int64_t>(it.b) * p.mask_heads + mh) * p.num_q_tiles + it.row0 / p.tile_q;
      it.tiles = p.tiles + p.row_begin[mrow];
      it.members = nullptr;
      it.count = static_cast<int>(p.row_end[mrow] - p.row_begin[mrow]);
    }
    const int last_row = min(it.row0 + kBM, it.nq) - 1;
    it.limit = mask_policy::block_key_end(last_row, it.nq, it.nkv, p.causal != 0);
    it.chunks = (it.count * p.tile_k + kBN - 1) / kBN;
    return it;
  }
};

// ----------------------------------------------------------------------------------------------------------
// Producer (warpgroup 0)

/// Loads each item's Q block, then its K/V chunks into the stages of the pipeline. Thread t copies the
/// 16-byte chunk c of rows r_first, r_first + kRowStep, … of every tile it fills by cp.async.
/// kInt8 (AttendOptions::qk_int8): Q and K are the int8 codes (FlashParams::q8 / k8, code_cols(D) bytes per row: chunk
/// c8 of rows r8, r8 + kCodeRowStep<D>, …), and each stage also gets its keys' dequantization scales.
template <class T, int D, bool kTma, bool kMerged, bool kInt8>
struct Producer {
  using P = SmemLayout<D>;
  static constexpr int kD = P::kD, kBN = P::kBN, kStages = P::kStages;
  static constexpr int kCols = kD / 8;          // 16-byte chunks per stored row
  static constexpr int kRowStep = 128 / kCols;  // rows covered by one pass of the warpgroup
  static constexpr int kCodeCols = code_cols(D);
  static constexpr int kKBytes = kInt8 ? kBN * kCodeCols : kBN * kD * 2;  // one stage's K tile

  const FlashParams& p;
  const Smem<D>& sm;
  const CUtensorMap& tma_k;       // 128-row boxes
  const CUtensorMap& tma_v;
  const CUtensorMap& tma_k_fine;  // tma_fine_rows-row boxes
  const CUtensorMap& tma_v_fine;
  int t, c, r_first;
  int col;     // the first element of this thread's chunk in global memory (0 for a padding chunk)
  int bytes;   // 16, or 0 for a padding chunk (zero-filled)
  std::uint32_t k_row_bytes, v_row_bytes;  // row strides in bytes (< 2^31 elements: checked on the host)
  int c8, r8;      // int8 mode: this thread's 16-byte chunk of a code row, and its first row

  __device__ __forceinline__ Producer(const FlashParams& params, const Smem<D>& smem, const CUtensorMap& k_map,
                                      const CUtensorMap& v_map, const CUtensorMap& k_fine, const CUtensorMap& v_fine)
      : p(params), sm(smem), tma_k(k_map), tma_v(v_map), tma_k_fine(k_fine), tma_v_fine(v_fine),
        t(static_cast<int>(threadIdx.x)), c(t % kCols), r_first(t / kCols), col(c * 8 < D ? c * 8 : 0),
        bytes(c * 8 < D ? 16 : 0), k_row_bytes(static_cast<std::uint32_t>(params.k_sn) * 2u),
        v_row_bytes(static_cast<std::uint32_t>(params.v_sn) * 2u),
        c8(t % (kCodeCols / 16)), r8(t / (kCodeCols / 16)) {}

  /// The CTA's items from the queue: for its n-th item, thread 0 has fetched the index into queue(n) (the next one is
  /// fetched once this one's Q is on its way). Once the consumers are done with item n − 1's Q (so every consumer
  /// thread has read queue(n − 1)), the item's Q is loaded and q_full's phase n publishes the index with it; an index
  /// past the last item is published alone and ends the CTA.
  __device__ __forceinline__ void run(const Scheduler<kBN>& sched) {
    int it = 0;  // chunks loaded over all items: stage it % kStages, phase (it / kStages) & 1
    if (t == 0) *sm.queue(0) = sched.fetch();
    for (int n = 0;; ++n) {
      producer_sync();  // queue(n) written (thread 0); every thread read queue(n − 1) before thread 0 rewrites it
      const int w = *sm.queue(n);
      WorkItem item;
      if (w < sched.total) item = sched.load(w);  // decoded while the consumers finish the previous item
      mbar_wait(sm.q_empty(), (n & 1) ^ 1);  // the previous item's last Q·Kᵀ is done
      if (t == 0) mbar_arrive(sm.q_full());  // releases thread 0's write of queue(n)
      if (w >= sched.total) {
        mbar_arrive(sm.q_full());
        break;
      }
      load_q(item);
      if (t == 0) *sm.queue(n + 1) = sched.fetch();
      const T* kg = static_cast<const T*>(p.k) + (p.cu_kv ? 0 : item.b * p.k_sb) + item.hkv * p.k_sh + item.off_kv * p.k_sn + col;
      const T* vg = static_cast<const T*>(p.v) + (p.cu_kv ? 0 : item.b * p.v_sb) + item.hkv * p.v_sh + item.off_kv * p.v_sn + col;
      const std::int8_t* k8g = nullptr;  // int8 mode: this thread's chunk of the item's K code rows
      if constexpr (kInt8)
        k8g = p.k8 + (((p.cu_kv ? 0 : item.b) * static_cast<std::int64_t>(p.heads_kv) + item.hkv) * p.total_kv + item.off_kv) *
                         kCodeCols + c8 * 16;
      for (int chunk = 0; chunk < item.chunks; ++chunk, ++it) load_chunk(item, chunk, it, kg, vg, k8g);
    }
    cp_async_wait<0>();  // nothing left in flight when the producer exits
  }

  /// The item's Q block (the consumers are done with the previous one's).
  __device__ __forceinline__ void load_q(const WorkItem& item) {
    const T* qg = static_cast<const T*>(p.q) + (p.cu_q ? 0 : item.b * p.q_sb) + item.h * p.q_sh + col;
    if constexpr (kInt8) {
      const std::int8_t* q8g =
          p.q8 + (((p.cu_q ? 0 : item.b) * static_cast<std::int64_t>(p.heads_q) + item.h) * p.total_q + item.off_q) * kCodeCols + c8 * 16;
#pragma unroll 4
      for (int r = r8; r < kBM; r += kCodeRowStep<D>) {
        const bool ok = item.row0 + r < item.nq;
        cp_async16(sm.q() + swizzled_offset(kBM, r, c8), q8g + (ok ? item.row0 + r : 0) * kCodeCols, ok ? 16 : 0);
      }
    } else {
#pragma unroll 4
      for (int r = r_first; r < kBM; r += kRowStep) {
        const bool ok = item.row0 + r < item.nq;
        cp_async16(sm.q() + swizzled_offset(kBM, r, c), qg + (ok ? (item.off_q + item.row0 + r) * p.q_sn : 0), ok ? bytes : 0);
      }
    }
    cp_async_mbar_arrive(sm.q_full());  // no wait: the first K/V chunk's loads follow right behind Q's
  }

  /// Chunk `chunk` of the item into stage it % kStages: its key indices, then its K and V rows by the
  /// cheapest path that applies. kg / vg: this thread's column of the item's K / V head. The K half waits for the
  /// stage's k_empty, the V half for its v_empty (every thread: no arrival on a full barrier before the consumers
  /// have waited for its previous phase).
  __device__ __forceinline__ void load_chunk(const WorkItem& item, int chunk, int it, const T* kg, const T* vg,
                                             const std::int8_t* k8g) {
    const int s = it % kStages;
    mbar_wait(sm.k_empty(s), ((it / kStages) & 1) ^ 1);
    int* keys = sm.keys(s);
    if (t < kBN) {
      const int j = mask_policy::key_at<int>(item.tiles, item.count, p.tile_k, chunk * kBN + t, item.limit);
      keys[t] = j;
      if constexpr (kInt8)  // the key's scale (0 for −1), copied like its row: k_full completes when it has landed
        cp_async4(smem_addr(sm.key_scale(s) + t),
                  p.k_scale + (static_cast<std::int64_t>(item.b) * p.heads_kv + item.hkv) * p.k_blocks +
                      max(j, 0) / p.quant_block_k,
                  j >= 0 ? 4 : 0);
    }
    // The next chunk's kept-tile indices (and membership bytes) into L1 now, so its key_at above reads L1 rather than
    // L2: that load was on the producer's path once per chunk (ncu, version 11). The chunk's slots are consecutive,
    // at most kBN of them: kBN · 4 bytes of indices (5 lines of 128 bytes at most), kBN bytes of members (2 lines).
    if (chunk + 1 < item.chunks) {
      const int first = ((chunk + 1) * kBN) / p.tile_k;
      if (t <= kBN / 32 && first + 32 * t < item.count) prefetch_l1(item.tiles + first + 32 * t);
      if constexpr (kMerged)
        if (t >= 32 && t < 34) prefetch_l1(item.members + min(first + (t - 32) * (kBN - 1), item.count - 1));
    }
    if constexpr (kMerged) {  // the members' key sets, one ballot per member and warp; published with the keys (k_full)
      const int slot = (chunk * kBN + t) / p.tile_k;
      const unsigned bits = slot < item.count ? item.members[slot] : 0u;
      for (int m = 0; m < kBM / p.tile_q; ++m) {
        const unsigned word = __ballot_sync(0xffffffffu, (bits >> m) & 1u);
        if (t % 32 == 0 && t < kBN) sm.mem(s)[(kBN / 32) * m + t / 32] = word;
      }
    }
    producer_sync();
    const int j0 = keys[0];
    const std::uint32_t v_phase = ((it / kStages) & 1) ^ 1;
    if (kTma && j0 >= 0 && keys[kBN - 1] == j0 + kBN - 1) load_tma(item, s, j0, v_phase);
    else if (kTma && p.tma_fine_rows > 0 && keys[kBN - 1] >= 0) load_tma_fine(item, s, keys, v_phase);
    else load_gather(s, keys, kg, vg, k8g, v_phase);
  }

  /// The stage's K barrier for a TMA-loaded chunk: this thread's release arrive (keys) and copy arrival.
  __device__ __forceinline__ void arrive_tma_k(int s) const {
    mbar_arrive(sm.k_full(s));
    cp_async_mbar_arrive(sm.k_full(s));
  }

  /// kBN consecutive keys from j0 (keys ascend strictly): kD/64 TMA boxes of kBN rows × 64 columns each for K
  /// and V, swizzled by the copy engine exactly like the cp.async gather (columns past D are filled with zeros).
  __device__ __forceinline__ void load_tma(const WorkItem& item, int s, int j0, std::uint32_t v_phase) {
    const int row = static_cast<int>(item.off_kv) + j0, bb = p.cu_kv ? 0 : item.b;
    if (t == 0) {
      mbar_expect_tx(sm.k_full(s), kKBytes);
#pragma unroll
      for (int cb = 0; cb < (kInt8 ? kCodeCols / 128 : kD / 64); ++cb)  // 128-byte columns of 64 elements or codes
        tma_load_4d(sm.k(s) + cb * kBN * 128, &tma_k, cb * (kInt8 ? 128 : 64), row, item.hkv, bb, sm.k_full(s));
    }
    arrive_tma_k(s);
    mbar_wait(sm.v_empty(s), v_phase);
    if (t == 0) {
      mbar_expect_tx(sm.v_full(s), kBN * kD * 2);
#pragma unroll
      for (int cb = 0; cb < kD / 64; ++cb)
        tma_load_4d(sm.v(s) + cb * kBN * 128, &tma_v, cb * 64, row, item.hkv, bb, sm.v_full(s));
    }
    cp_async_mbar_arrive(sm.v_full(s));
  }

  /// Every key of the chunk valid, tiles of tile_k = tma_fine_rows (8 … 64) keys: one TMA box of tile_k rows
  /// per tile, column block and tensor, issued by thread t for tile t. The transaction bytes are expected before any
  /// box is issued (a producer barrier in between).
  __device__ __forceinline__ void load_tma_fine(const WorkItem& item, int s, const int* keys, std::uint32_t v_phase) {
    const int rows = p.tma_fine_rows, tiles_here = kBN / rows;
    const bool issuer = t < tiles_here;
    const int row = static_cast<int>(item.off_kv) + keys[issuer ? t * rows : 0], bb = p.cu_kv ? 0 : item.b;
    if (t == 0) mbar_expect_tx(sm.k_full(s), kKBytes);
    producer_sync();
    if (issuer) {
#pragma unroll
      for (int cb = 0; cb < (kInt8 ? kCodeCols / 128 : kD / 64); ++cb)  // 128-byte columns of 64 elements or codes
        tma_load_4d(sm.k(s) + cb * kBN * 128 + t * rows * 128, &tma_k_fine, cb * (kInt8 ? 128 : 64), row, item.hkv,
                    bb, sm.k_full(s));
    }
    arrive_tma_k(s);
    mbar_wait(sm.v_empty(s), v_phase);
    if (t == 0) mbar_expect_tx(sm.v_full(s), kBN * kD * 2);
    producer_sync();
    if (issuer) {
#pragma unroll
      for (int cb = 0; cb < kD / 64; ++cb)
        tma_load_4d(sm.v(s) + cb * kBN * 128 + t * rows * 128, &tma_v_fine, cb * 64, row, item.hkv, bb, sm.v_full(s));
    }
    cp_async_mbar_arrive(sm.v_full(s));
  }

  /// Swizzled offset of this thread's chunk c of row r_first + i·kRowStep in a stage: dst0 + i·kRowStep·128 when
  /// kRowStep is a multiple of 8 (D ≤ 128: r % 8 is the same for all of them), else (D = 256, kRowStep 4) the
  /// swizzle of each row.
  __device__ __forceinline__ std::uint32_t gather_offset(std::uint32_t dst0, int i) const {
    if constexpr (kRowStep % 8 == 0) return dst0 + i * kRowStep * 128;
    else return swizzled_offset(kBN, r_first + i * kRowStep, c);
  }

  /// This thread's n rows of the stage's keys, keys[first + step·i], read before any copy is issued: one shared-memory
  /// latency for all of them (read one at a time, each row's copy waited for its key: ncu, version 11).
  template <int n, int step>
  __device__ __forceinline__ static void read_rows(const int* keys, int first, int (&j)[n]) {
#pragma unroll
    for (int i = 0; i < n; ++i) j[i] = keys[first + step * i];
  }

  /// The address of row j (−1: row 0, copied as zeros) of a tensor whose rows are `row_bytes` apart: an unsigned
  /// 32 × 32 → 64-bit product (0 <= j < 2^31, row_bytes < 2^32), one instruction where the signed 64-bit product of an
  /// int64 index took five.
  __device__ __forceinline__ static const void* row_at(const void* base, int j, std::uint32_t row_bytes) {
    return static_cast<const char*>(base) +
           static_cast<std::uint64_t>(static_cast<std::uint32_t>(max(j, 0))) * row_bytes;
  }

  /// Any chunk (stripes, the causal diagonal, the end of the list): 16-byte cp.async copies of the keys' rows,
  /// zero-filled for the −1 entries. This thread copies chunk c of rows r_first + kRowStep·i.
  __device__ __forceinline__ void load_gather(int s, const int* keys, const T* kg, const T* vg, const std::int8_t* k8g,
                                              std::uint32_t v_phase) {
    const std::uint32_t dst0 = swizzled_offset(kBN, r_first, c);
    constexpr int kRows = kBN / kRowStep;
    int j[kRows];
    if constexpr (kInt8) {  // code rows: chunk c8 of rows r8 + kCodeRowStep<D>·i (a multiple of 8: one swizzle phase)
      constexpr int kCodeRows = kBN / kCodeRowStep<D>;
      const std::uint32_t dst8 = swizzled_offset(kBN, r8, c8);
      int j8[kCodeRows];
      read_rows<kCodeRows, kCodeRowStep<D>>(keys, r8, j8);
#pragma unroll
      for (int i = 0; i < kCodeRows; ++i)
        cp_async16(sm.k(s) + dst8 + i * kCodeRowStep<D> * 128, row_at(k8g, j8[i], std::uint32_t{kCodeCols}),
                   j8[i] >= 0 ? 16 : 0);
    } else {
      read_rows<kRows, kRowStep>(keys, r_first, j);
#pragma unroll
      for (int i = 0; i < kRows; ++i)
        cp_async16(sm.k(s) + gather_offset(dst0, i), row_at(kg, j[i], k_row_bytes), j[i] >= 0 ? bytes : 0);
    }
    mbar_arrive(sm.k_full(s));           // publishes keys[t] (release)
    cp_async_mbar_arrive(sm.k_full(s));  // completes when this thread's K copies have landed
    mbar_wait(sm.v_empty(s), v_phase);
    read_rows<kRows, kRowStep>(keys, r_first, j);  // the stage's keys stay until this producer rewrites them
#pragma unroll
    for (int i = 0; i < kRows; ++i)
      cp_async16(sm.v(s) + gather_offset(dst0, i), row_at(vg, j[i], v_row_bytes), j[i] >= 0 ? bytes : 0);
    cp_async_mbar_arrive(sm.v_full(s));
  }
};

// ----------------------------------------------------------------------------------------------------------
// Epilogue

/// One consumer thread's two rows (first_row and first_row + 8, with the quad's other three threads):
/// reduces l over the quad, normalises and stores the output (rows past the sequence are not written), and
/// records the row statistics (finish_row). D: the head dim (acc_o holds its kStored<D> stored columns).
template <int D>
__device__ __forceinline__ void epilogue(const FlashParams& p, const WorkItem& item, int first_row, int t4,
                                         const float (&acc_o)[kStored<D> / 2], const float (&m_run)[2],
                                         const float (&l_run)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float l = l_run[half];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int i = first_row + 8 * half;
    if (i >= item.nq) continue;
    const float inv = mask_policy::empty_row(l) ? 0.0f : 1.0f / l;
    const std::int64_t orow = (p.cu_q ? 0 : item.b * p.o_sb) + item.h * p.o_sh + (item.off_q + i) * p.o_sn;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      store_pair(p, orow, dt * 8 + 2 * t4, acc_o[4 * dt + 2 * half] * inv, acc_o[4 * dt + 2 * half + 1] * inv);
    if (t4 == 0) finish_row(p, item.b, item.h, i, m_run[half], l);
  }
}

// ----------------------------------------------------------------------------------------------------------
// Consumers (warpgroups 1 and 2)

/// One consumer thread: 64 query rows per warpgroup (rows g and g + 8 of its warp's 16, in the m64nN
/// accumulator layout), the online-softmax state and the output accumulators of the current item.
/// kMerged: the items are merged 16/32/64-row tiles (DeviceTileMask::item_rows = 128): every chunk is masked by the
/// rows' membership too (a separate instantiation, so the other paths' softmax stays as tight as it was).
/// kInt8 (AttendOptions::qk_int8): S is the exact s32 product of the codes (s8 WGMMA, k32 steps), scored as
/// (acc · δ_k) · (scale_log2 · δ_q) — the reference's acc · (scale_log2 · (δ_q · δ_k)) up to the order of the two
/// roundings (≤ 2 ulp of a score; the products themselves are exact on both).
template <class T, int D, bool kPingpong, bool kPvSkip, bool kMerged, bool kInt8>
struct Consumer {
  using P = SmemLayout<D>;
  // The products run over the stored columns (D = 96: 128, zero-padded), kBN keys per chunk.
  static constexpr int kD = P::kD, kBN = P::kBN, kStages = P::kStages;
  static_assert(!kPvSkip || kBN == 128, "PV-skip decides 64- or 128-key tiles inside 128-key chunks");
  static constexpr bool kHalf = std::is_same_v<T, __half>;

  const FlashParams& p;
  const Smem<D>& sm;
  int cw, tw, warp, lane, g, t4;  // warpgroup (0, 1), thread in it, warp in it, lane, row and column in the quad
  std::uint32_t q_base;           // this warpgroup's 64 rows of the Q block
  int wg_row0 = 0;                // first query row of this warpgroup in the current item
  mask_policy::RowKeys<int> wg_keys;      // the keys that row sees
  mask_policy::RowKeys<int> row_keys[2];  // the keys this thread's rows (g and g + 8 of its warp's 16) see
  int member = 0;  // merged items: the member tile of this warp's 16 rows (tile_q is 16, 32 or 64)
  float row_scale[2] = {0.0f, 0.0f};  // int8 mode: scale_log2 · δ_q of this thread's two rows
  float acc_o[kD / 2];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // reset per item
  float acc_s[kBN / 2];            // S of the current chunk, then its weights
  std::uint32_t pf[kBN / 16][4];  // P of the previous chunk (A fragments of P·V), in flight with S
  // PV-skip state: the threshold of this head, the first tile slot that may not be skipped (visited tiles —
  // those with a key before the block key end — minus the exempt last ones), this thread's share of the count.
  float pv_thr = 0.0f;
  int pv_skippable = 0;
  unsigned long long pv_count = 0, pv_leader = 0;
  bool skip_pv = false;  // PV-skip: the previous chunk's P is all zero for this warpgroup

  __device__ __forceinline__ Consumer(const FlashParams& params, const Smem<D>& smem)
      : p(params), sm(smem) {
    const int tid = static_cast<int>(threadIdx.x), wg = tid / 128;
    cw = wg - 1, tw = tid - 128 * wg, warp = tw / 32, lane = tw % 32, g = lane / 4, t4 = lane % 4;
    q_base = sm.q() + cw * 64 * 128;
  }

  // Ping-pong (FlashAttention-3): the two warpgroups take turns issuing their GEMMs, so one's softmax runs
  // while the other's GEMMs use the tensor cores. Named barrier 2 + cw is "warpgroup cw may issue"; the
  // other warpgroup arrives on it after issuing its own. Warpgroup 0 goes first; both run the same number
  // of turns per item, so the alternation carries over from item to item.
  __device__ __forceinline__ void run(const Scheduler<kBN>& sched) {
    if (kPingpong && cw == 1) named_arrive(2, 256);
    int it = 0;  // chunks consumed over all items
    for (int n = 0;; ++n) {
      mbar_wait(sm.q_full(), n & 1);  // the producer's n-th item index, and its Q (Producer::run)
      const int w = *sm.queue(n);
      if (w >= sched.total) break;
      const WorkItem item = sched.load(w);
      start_item(item);
      resume(item);
      run_item(item, it);
      epilogue<D>(p, item, wg_row0 + warp * 16 + g, t4, acc_o, m_run, l_run);
      it += item.chunks;
    }
    if (kPvSkip && pv_count > 0) atomicAdd(p.pv_skipped, pv_count);
  }

  /// Per item: the keys the warpgroup's first row and this thread's two rows see (mask_policy::row_key_end,
  /// once per item rather than per chunk), the softmax state and accumulators reset; PV-skip: the vote
  /// leader, threshold and skippable tiles.
  __device__ __forceinline__ void start_item(const WorkItem& item) {
    wg_row0 = item.row0 + 64 * cw;
    wg_keys = mask_policy::RowKeys<int>(wg_row0, item.nq, item.nkv, p.causal != 0);
#pragma unroll
    for (int half = 0; half < 2; ++half)
      row_keys[half] =
          mask_policy::RowKeys<int>(wg_row0 + warp * 16 + g + 8 * half, item.nq, item.nkv, p.causal != 0);
    if constexpr (kMerged) member = (64 * cw + warp * 16) / p.tile_q;
    // (Braces around a pragma'd loop under an `if`: without them nvcc 13 took the next loop into the branch too.)
    if constexpr (kInt8) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // rows past the sequence read the last row's scale (never stored)
        const int i = min(wg_row0 + warp * 16 + g + 8 * half, item.nq - 1);
        row_scale[half] =
            p.scale_log2 * p.q_scale[(static_cast<std::int64_t>(item.b) * p.heads_q + item.h) * p.q_blocks + i / p.quant_block_q];
      }
    }
#pragma unroll
    for (int i = 0; i < kD / 2; ++i) acc_o[i] = 0.0f;
    m_run[0] = m_run[1] = -INFINITY;
    l_run[0] = l_run[1] = 0.0f;
    skip_pv = false;
    if constexpr (kPvSkip) {
      // One thread counts for its vote group, and only groups with a real row exist (a warp or warpgroup of
      // padding rows past the sequence votes "skip" but is not in the reference's groups).
      pv_leader = p.pv_vote == 16   ? (lane == 0 && wg_row0 + warp * 16 < item.nq)
                  : p.pv_vote == 64 ? (tw == 0 && wg_row0 < item.nq)
                                    : (tw == 0 && cw == 0);
      pv_thr = p.pv_thr[item.h];
      pv_skippable = mask_policy::pv_skippable_tiles(
          mask_policy::visited_tiles(item.tiles, item.count, p.tile_k, item.limit), p.pv_exempt);
    }
  }

  /// AttendOptions::resume: this thread's rows start from the given state and l·O (detail::resume_row).
  __device__ __forceinline__ void resume(const WorkItem& item) {
    if (p.resume == nullptr) return;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = wg_row0 + warp * 16 + g + 8 * half;
      if (i >= item.nq) continue;
      const std::int64_t orow = (p.cu_q ? 0 : item.b * p.o_sb) + item.h * p.o_sh + (item.off_q + i) * p.o_sn;
      resume_row<D>(p, item.b, item.h, i, orow, t4, m_run[half], l_run[half],
                    [&](int dt, int e) -> float& { return acc_o[4 * dt + 2 * half + e]; });
    }
  }

  /// Software pipeline (FlashAttention-3's intra-warpgroup overlap) over the item's chunks, it: the chunks
  /// consumed before this item (stage it % kStages, phase (it / kStages) & 1); its Q has landed (run). While
  /// P_{j-1}·V_{j-1} runs on the tensor cores, this warpgroup computes the softmax of S_j. Q is released to the
  /// producer (next item) as soon as the item's last Q·Kᵀ is done.
  __device__ __forceinline__ void run_item(const WorkItem& item, int it) {
    const int chunks = item.chunks;
    fence_async_shared();  // Q's cp.async writes (q_full, waited for in run) before WGMMA reads them
    if (chunks == 0) mbar_arrive(sm.q_empty());
    if (chunks > 0) {
      float alpha[2];
      wait_full(sm.k_full(it % kStages), it);
      wgmma_fence();
      issue_s(it % kStages);
      wgmma_wait<0>();
      if (chunks == 1) mbar_arrive(sm.q_empty());
      skip_pv = softmax(item, it % kStages, 0, alpha);
      release_k(it % kStages);
      rescale_o(alpha);  // a resumed row's l·O (otherwise zeros) follows the first chunk's max
      pack_p();
    }
    for (int chunk = 1; chunk < chunks; ++chunk) {
      const int gi = it + chunk, s = gi % kStages, prev = (gi - 1) % kStages;
      float alpha[2];
      wait_full(sm.k_full(s), gi);
      if (kPingpong) named_sync(2 + cw, 256);
      wgmma_fence();
      issue_s(s);
      wait_full(sm.v_full(prev), gi - 1);
      wgmma_fence();
      issue_pv(prev);
      if (kPingpong) named_arrive(2 + (cw ^ 1), 256);
      wgmma_wait<1>();  // S_j done; P_{j-1}·V_{j-1} may still run
      if (chunk == chunks - 1) mbar_arrive(sm.q_empty());
      const bool skip_next = softmax(item, s, chunk, alpha);
      release_k(s);
      wgmma_wait<0>();
      skip_pv = skip_next;
      release_v(prev);
      rescale_o(alpha);
      pack_p();
    }
    if (chunks > 0) {
      const int gi = it + chunks - 1, last = gi % kStages;
      wait_full(sm.v_full(last), gi);
      wgmma_fence();
      issue_pv(last);
      wgmma_wait<0>();
      release_v(last);
    }
  }

  /// This thread is done with stage s's K (after the chunk's softmax: its key indices, membership words and key
  /// scales included) / V (after its P·V): it arrives on the stage's k_empty / v_empty barrier itself, so each
  /// thread's reads are ordered before the producer's next writes by its own release (one arrival per warp, after a
  /// __syncwarp, left compute-sanitizer racecheck reporting hazards on the key indices with 2 stages).
  __device__ __forceinline__ void release_k(int s) const { mbar_arrive(sm.k_empty(s)); }
  __device__ __forceinline__ void release_v(int s) const { mbar_arrive(sm.v_empty(s)); }

  /// Waits for a stage barrier of global chunk gi (chunk index over all items).
  __device__ __forceinline__ void wait_full(std::uint32_t bar, int gi) const {
    mbar_wait(bar, (gi / kStages) & 1);
    fence_async_shared();  // the cp.async writes (generic proxy) before WGMMA reads them (async proxy)
  }

  /// S = Q·Kᵀ for the chunk in stage s: 64 rows × kBN keys, kD/16 k16 steps (32 bytes each inside the
  /// 128-byte swizzled rows, then the next 64-column block).
  __device__ __forceinline__ void issue_s(int s) {
    // Descriptor low words of the Q block and the K stage; step ks adds its offset in 16-byte units.
    const std::uint32_t q_lo = smem_desc_lo(q_base, 16), k_lo = smem_desc_lo(sm.k(s), 16);
    if constexpr (kInt8) {  // code_cols(D) / 32 k32 steps of s8 codes, 32 bytes each, like the k16 steps below
#pragma unroll
      for (int ks = 0; ks < code_cols(D) / 32; ++ks) {
        const std::uint32_t col = (ks % 4) * 32u;
        wgmma_ss_s8<kBN>(acc_s, smem_desc_at(q_lo + ((ks / 4) * kBM * 128 + col) / 16, 1024),
                         smem_desc_at(k_lo + ((ks / 4) * kBN * 128 + col) / 16, 1024), ks > 0);
      }
    } else {
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) {
        const std::uint32_t col = (ks % 4) * 32u;
        wgmma_ss<kHalf, kBN>(acc_s, smem_desc_at(q_lo + ((ks / 4) * kBM * 128 + col) / 16, 1024),
                             smem_desc_at(k_lo + ((ks / 4) * kBN * 128 + col) / 16, 1024), ks > 0);
      }
    }
    wgmma_commit();
  }

  /// O += P·V for the chunk in stage s, with V transposed from the stage (LBO: the next 64 stored columns).
  __device__ __forceinline__ void issue_pv(int s) {
    const std::uint32_t v_lo = smem_desc_lo(sm.v(s), kBN * 128);  // step kk: 16 rows of 128 bytes further
    if (!(kPvSkip && skip_pv))
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk)
        wgmma_rs<kHalf, kD>(acc_o, pf[kk], smem_desc_at(v_lo + kk * 16 * 128 / 16, 1024), 1);
    wgmma_commit();
  }

  /// Online softmax of acc_s (raw scores) for the chunk in stage s: masks the keys a row does not see
  /// (mask_policy::RowKeys: past the end or, if causal, past the row); folds the chunk
  /// into (m, l) and leaves the weights 2^(x·scale − m) in acc_s. Returns the factor for O per row half. Same
  /// function as softmax_rescale/softmax_weight with Exp2Fast: the max is taken on raw scores (scaling is
  /// monotonic), and a row whose max is still −∞ uses 0 so masked scores give 2^−∞ = 0.
  ///
  /// PV-skip (kPvSkip, SpargeAttn Stage 2 as the reference executor defines it): the chunk's key tiles
  /// (1 of 128 or 2 of 64 keys) are decided in order; a vote group (16 rows: a warp, 64: this warpgroup,
  /// 128: the CTA) skips a tile when each of its rows votes mask_policy::pv_row_votes_skip, (tile max −
  /// running max) < −threshold, the max including the tiles before it in the chunk that were not skipped. A
  /// skipped tile's scores become −∞: no max update, no weight, nothing added by P·V. The last pv_exempt
  /// visited tiles are never skipped (pv_skippable). Returns true when this warpgroup skipped every tile of
  /// the chunk (only used for votes of ≥ 64 rows).
  ///
  /// Keys ascend with −1 only at the end, and a later row sees at least the keys of an earlier one: when the
  /// warpgroup's first row sees the chunk's last key, every row sees every key of the chunk, and softmax_chunk<false>
  /// runs without the per-key checks. Two instantiations, so this is a branch per chunk: one body with a uniform flag
  /// was if-converted by nvcc, and every chunk issued the checks predicated off (about 200 of the loop's 743
  /// instructions per chunk and warp: ncu, cuda-executor.md version 11).
  __device__ __forceinline__ bool softmax(const WorkItem& item, int s, int chunk, float (&alpha)[2]) {
    if (wg_keys.sees(sm.keys(s)[kBN - 1])) return softmax_chunk<false>(item, s, chunk, alpha);
    return softmax_chunk<true>(item, s, chunk, alpha);
  }

  /// softmax for a chunk whose keys every row sees (kMask = false) or not (true: past the end, or causal).
  template <bool kMask>
  __device__ __forceinline__ bool softmax_chunk(const WorkItem& item, int s, int chunk, float (&alpha)[2]) {
    const int* keys = sm.keys(s);
    if constexpr (kInt8) dequantize(s);
    if constexpr (kMerged) mask_members(s);  // a merged item's rows: keys of tiles their member tile did not keep
    float mx[2], tm[2][2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      tm[half][0] = tm[half][1] = -INFINITY;  // PV-skip: the maxima of the chunk's two 64-key halves
      // The max in 4 independent chains rather than one of kBN / 4 dependent maxima (exact in any order; neutral on
      // its own in version 11's runs, kept as the shorter dependency chain).
      float mx4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = acc_s[4 * nt + 2 * half + e];
          if (kMask && !row_keys[half].sees(keys[nt * 8 + 2 * t4 + e])) x = -INFINITY;
          if constexpr (kPvSkip) tm[half][nt / 8] = fmaxf(tm[half][nt / 8], x);
          else mx4[2 * (nt % 2) + e] = fmaxf(mx4[2 * (nt % 2) + e], x);
        }
      mx[half] = fmaxf(fmaxf(mx4[0], mx4[1]), fmaxf(mx4[2], mx4[3]));
      if constexpr (kPvSkip) {
#pragma unroll
        for (int t2 = 0; t2 < 2; ++t2) {
          tm[half][t2] = fmaxf(tm[half][t2], __shfl_xor_sync(0xffffffffu, tm[half][t2], 1));
          tm[half][t2] = fmaxf(tm[half][t2], __shfl_xor_sync(0xffffffffu, tm[half][t2], 2));
        }
        mx[half] = fmaxf(tm[half][0], tm[half][1]);
      } else {
        mx[half] = fmaxf(mx[half], __shfl_xor_sync(0xffffffffu, mx[half], 1));
        mx[half] = fmaxf(mx[half], __shfl_xor_sync(0xffffffffu, mx[half], 2));
      }
    }
    float m_new[2] = {fmaxf(mx[0] * scale(0), m_run[0]), fmaxf(mx[1] * scale(1), m_run[1])};
    bool all_skipped = false;
    if constexpr (kPvSkip) {
      const int per = kBN / p.tile_k;  // tiles in a chunk: 1 (tile_k = 128) or 2 (64)
      if (per == 1) tm[0][0] = mx[0], tm[1][0] = mx[1];
      float m_cur[2] = {m_run[0], m_run[1]};
      bool skip_t[2] = {false, false};
      all_skipped = true;
#pragma unroll
      for (int tt = 0; tt < 2; ++tt) {
        if (tt >= per) break;
        if (chunk * per + tt < pv_skippable) {  // uniform over the CTA
          // Rows past the sequence (padding of the last block) agree, as they are not in the reference's group.
          const int i0 = wg_row0 + warp * 16 + g;
          const bool mine =
              (i0 >= item.nq || mask_policy::pv_row_votes_skip(tm[0][tt] * scale(0), m_cur[0], pv_thr)) &&
              (i0 + 8 >= item.nq || mask_policy::pv_row_votes_skip(tm[1][tt] * scale(1), m_cur[1], pv_thr));
          skip_t[tt] = p.pv_vote == 16    ? __all_sync(0xffffffffu, mine)
                       : p.pv_vote == 64 ? bar_red_and(4 + cw, 128, mine)
                                         : bar_red_and(6, 256, mine);
        }
        if (skip_t[tt]) {
          pv_count += pv_leader;
        } else {
          all_skipped = false;
          m_cur[0] = fmaxf(m_cur[0], tm[0][tt] * scale(0));
          m_cur[1] = fmaxf(m_cur[1], tm[1][tt] * scale(1));
        }
      }
      m_new[0] = m_cur[0], m_new[1] = m_cur[1];
      if (skip_t[0] || skip_t[1])
#pragma unroll
        for (int nt = 0; nt < kBN / 8; ++nt)
          if (per == 1 || nt < 8 ? skip_t[0] : skip_t[1])
#pragma unroll
            for (int r = 0; r < 4; ++r) acc_s[4 * nt + r] = -INFINITY;
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      alpha[half] = softmax_rescale(m_run[half], m_new[half], Exp2Fast{});
      const float m_use = m_new[half] == -INFINITY ? 0.0f : m_new[half];
      // The sum in 4 independent chains, like the max (the quad's four row sums are added in the epilogue).
      float sum4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = acc_s[4 * nt + 2 * half + e];
          x = exp2_fast(x * scale(half) - m_use);
          sum4[2 * (nt % 2) + e] += x;
        }
      l_run[half] = fma_f32(l_run[half], alpha[half], (sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
      m_run[half] = m_new[half];
    }
    return kPvSkip && all_skipped && p.pv_vote >= 64;
  }

  /// The factor from a chunk's raw scores to base-2 logits for row half `half`: scale_log2, or in the int8 mode
  /// scale_log2 · δ_q of the row (the raw scores are then acc · δ_k: dequantize).
  __device__ __forceinline__ float scale(int half) const { return kInt8 ? row_scale[half] : p.scale_log2; }

  /// int8 mode: the chunk's s32 products (acc_s's bits) as raw scores acc · δ_k, δ_k the key's scale from the stage.
  /// Score (nt, e) of this thread is key 8·nt + 2·t4 + e. The conversion is exact (|acc| ≤ 127²·256 < 2²⁴); a
  /// conversion without I2F (adding and subtracting 1.5·2²³) measured the same (cuda-executor.md version 9).
  __device__ __forceinline__ void dequantize(int s) {
    const float* dk = sm.key_scale(s);
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt) {
      const float2 d2 = *reinterpret_cast<const float2*>(dk + nt * 8 + 2 * t4);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        float& x = acc_s[4 * nt + r];
        x = static_cast<float>(__float_as_int(x)) * (r % 2 == 0 ? d2.x : d2.y);
      }
    }
  }

  /// Merged items: the scores of keys whose tile this warp's member tile did not keep become −∞. The warp reads its
  /// member's 128-bit key set of the stage; nothing to do (a warp-uniform branch) when the member kept every key.
  /// Score (nt, e) of this thread is key c = 8·nt + 2·t4 + e: bit (nt % 4)·8 + e of word nt / 4 shifted by 2·t4.
  __device__ __forceinline__ void mask_members(int s) {
    std::uint32_t word[kBN / 32];
    if constexpr (kBN == 128) {
      const uint4 w = *reinterpret_cast<const uint4*>(sm.mem(s) + 4 * member);
      if ((w.x & w.y & w.z & w.w) == 0xffffffffu) return;
      word[0] = w.x, word[1] = w.y, word[2] = w.z, word[3] = w.w;
    } else {
      const uint2 w = *reinterpret_cast<const uint2*>(sm.mem(s) + 2 * member);
      if ((w.x & w.y) == 0xffffffffu) return;
      word[0] = w.x, word[1] = w.y;
    }
#pragma unroll
    for (int i = 0; i < kBN / 32; ++i) word[i] >>= 2 * t4;
#pragma unroll
    for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (((word[nt / 4] >> ((nt % 4) * 8 + e)) & 1u) == 0)
          acc_s[4 * nt + e] = acc_s[4 * nt + 2 + e] = -INFINITY;
  }

  /// The weights in acc_s rounded to T: the A fragments of the next P·V.
  __device__ __forceinline__ void pack_p() {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pf[kk][r] = pack2<T>(acc_s[8 * kk + 2 * r], acc_s[8 * kk + 2 * r + 1]);
  }

  /// O *= alpha per row half (the running max moved). alpha is exactly 1 where a row's max did not move
  /// (softmax_rescale), and O · 1 is O: a warp none of whose rows' max moved skips the kD / 2 multiplies (a
  /// warp-uniform branch; the result is the same bit for bit). After a row's first chunks its max rarely moves.
  __device__ __forceinline__ void rescale_o(const float (&alpha)[2]) {
    if (!__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) return;
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      acc_o[4 * dt] *= alpha[0];
      acc_o[4 * dt + 1] *= alpha[0];
      acc_o[4 * dt + 2] *= alpha[1];
      acc_o[4 * dt + 3] *= alpha[1];
    }
  }
};

#endif  // sm_90a device pass

// ----------------------------------------------------------------------------------------------------------
// Kernel

template <class T, int D, bool kPingpong, bool kTma, bool kPvSkip, bool kMerged, bool kInt8>
__global__ void __launch_bounds__(kThreads, 1)
    flash_sm90_kernel(const __grid_constant__ FlashParams p, const __grid_constant__ CUtensorMap tma_k,
                      const __grid_constant__ CUtensorMap tma_v, const __grid_constant__ CUtensorMap tma_k_fine,
                      const __grid_constant__ CUtensorMap tma_v_fine) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const Smem<D> sm(smem_raw);
  const Scheduler<kChunkKeys<D>> sched(p);
  if (threadIdx.x == 0) sm.init_barriers();
  __syncthreads();

  if (threadIdx.x / 128 == 0) {
    // D = 256: the consumers' 128 output accumulators need more (128 × 40 + 256 × 232 ≤ 65536, like 56 / 224).
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(D == 256 ? 40 : 56));
    Producer<T, D, kTma, kMerged, kInt8> producer(p, sm, tma_k, tma_v, tma_k_fine, tma_v_fine);
    producer.run(sched);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(D == 256 ? 232 : 224));
    Consumer<T, D, kPingpong, kPvSkip, kMerged, kInt8> consumer(p, sm);
    consumer.run(sched);
  }
#else
  __trap();  // built without sm_90a: the dispatcher never launches this kernel there
#endif
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/// cuTensorMapEncodeTiled from the driver, found once through the runtime (no link to libcuda); null if absent.
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return EncodeTiled{nullptr};
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

/// A 4-D tensor map (D, rows, heads_kv, batch) over K or V with box_rows × 64 boxes and the 128-byte swizzle; with
/// `codes`, over the int8 mode's K codes ([B', Hkv, total_kv, code_cols(d)] bytes) with box_rows × 128 boxes.
bool make_map(CUtensorMap& map, bool half, const void* data, const FlashParams& p, std::int64_t sn, std::int64_t sh,
              std::int64_t sb, int d, int box_rows, bool codes = false) {
  const EncodeTiled encode = encode_tiled();
  if (encode == nullptr) return false;
  const bool varlen = p.cu_kv != nullptr;
  const cuuint64_t elem = codes ? 1 : 2, cols = codes ? code_cols(d) : d;
  if (codes) sn = cols, sh = cols * p.total_kv, sb = sh * p.heads_kv;
  const cuuint64_t dims[4] = {cols, static_cast<cuuint64_t>(p.total_kv), static_cast<cuuint64_t>(p.heads_kv),
                              varlen ? 1u : static_cast<cuuint64_t>(p.batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(sn) * elem, static_cast<cuuint64_t>(sh) * elem,
                                 static_cast<cuuint64_t>(varlen || sb == 0 ? 16 : sb * elem)};
  const cuuint32_t box[4] = {codes ? 128u : 64u, static_cast<cuuint32_t>(box_rows), 1, 1}, unit[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type =
      codes ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : half ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return encode(&map, type, 4, const_cast<void*>(data), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class T, int D, bool kTma, bool kPvSkip, bool kMerged, bool kInt8>
void launch_kernel(const FlashParams& params, const CUtensorMap (&maps)[4], int order_size, cudaStream_t stream) {
  using P = SmemLayout<D>;
  auto kernel = flash_sm90_kernel<T, D, true, kTma, kPvSkip, kMerged, kInt8>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, P::kBytes);
  const int items = order_size * (params.heads_q / params.mask_heads);
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  // Persistent: one CTA per SM (the stages fill shared memory), drawing items from the work queue (Scheduler), so a
  // CTA's fixed costs (Q load, first Q·Kᵀ, epilogue) overlap the next item's loads, and the longest-first order is
  // kept by whichever CTA is free first. SPATTN_CUDA_GRID=n caps the grid (the GPU tests: many items per CTA).
  int grid = std::min(items, std::max(sms, 1));
  if (const char* cap = std::getenv("SPATTN_CUDA_GRID"); cap != nullptr && std::atoi(cap) > 0)
    grid = std::min(grid, std::atoi(cap));
  FlashParams f = params;
  f.order_size = order_size;
  if (grid <= 0) return;
  if (f.work_next == nullptr) fail("cuda backend: the sm90 kernel needs the mask's work queue (DeviceTileMask::work_next)");
  detail::check(cudaMemsetAsync(f.work_next, 0, sizeof(int), stream), "cudaMemsetAsync");
  kernel<<<grid, kThreads, P::kBytes, stream>>>(f, maps[0], maps[1], maps[2], maps[3]);
}

/// The kernel for the paths `f` asks for (merged items, PV-skip; int8: kInt8), TMA or not.
template <class T, int D, bool kInt8>
void launch_paths(const FlashParams& f, bool tma, const CUtensorMap (&maps)[4], int order_size, cudaStream_t stream) {
  if (f.item_rows == 128) {  // merged 16/32/64-row tiles (no PV-skip: it needs 128k-row tiles)
    tma ? launch_kernel<T, D, true, false, true, kInt8>(f, maps, order_size, stream)
        : launch_kernel<T, D, false, false, true, kInt8>(f, maps, order_size, stream);
  } else if (f.pv_thr != nullptr) {
    if constexpr (kChunkKeys<D> == 128)
      tma ? launch_kernel<T, D, true, true, false, kInt8>(f, maps, order_size, stream)
          : launch_kernel<T, D, false, true, false, kInt8>(f, maps, order_size, stream);
    else  // the backend refuses PV-skip at D = 256 before this; never launch nothing silently
      fail("cuda backend: PV-skip needs 128-key chunks (head_dim 64, 96 or 128)");
  } else {
    tma ? launch_kernel<T, D, true, false, false, kInt8>(f, maps, order_size, stream)
        : launch_kernel<T, D, false, false, false, kInt8>(f, maps, order_size, stream);
  }
}

}  // namespace

/// Chunks of 128 consecutive keys are copied by TMA when the driver encodes tensor maps for K and V (it refuses
/// strides that are not multiples of 16 bytes, for one); so are fully valid chunks of 8-, 16-, 32- or 64-key tiles (one
/// box per tile). Other chunks (stripes, the causal diagonal, the end) take the cp.async gather: a TMA box per key for
/// stripes measured 1.8× slower than the gather (cuda-executor.md, version 10).
/// SPATTN_CUDA_NO_TMA=1 forces cp.async everywhere (A/B runs, conformance of both paths). In the int8 mode the K maps
/// are over the codes (f.k8).
template <class T, int D>
void launch_flash_sm90(const FlashParams& params, int order_size, cudaStream_t stream) {
  constexpr bool kHalf = std::is_same_v<T, __half>;
  CUtensorMap maps[4] = {};
  FlashParams f = params;
  const int fine = params.tile_k;
  const bool int8 = f.q8 != nullptr;
  const void* k_data = int8 ? static_cast<const void*>(f.k8) : f.k;
  const bool tma = std::getenv("SPATTN_CUDA_NO_TMA") == nullptr &&
                   make_map(maps[0], kHalf, k_data, f, f.k_sn, f.k_sh, f.k_sb, D, kChunkKeys<D>, int8) &&
                   make_map(maps[1], kHalf, f.v, f, f.v_sn, f.v_sh, f.v_sb, D, kChunkKeys<D>);
  f.tma_fine_rows = 0;
  if (tma && fine >= 8 && fine <= 64 && (fine & (fine - 1)) == 0 && kChunkKeys<D> % fine == 0 &&
      make_map(maps[2], kHalf, k_data, f, f.k_sn, f.k_sh, f.k_sb, D, fine, int8) &&
      make_map(maps[3], kHalf, f.v, f, f.v_sn, f.v_sh, f.v_sb, D, fine))
    f.tma_fine_rows = fine;
  if (int8) launch_paths<T, D, true>(f, tma, maps, order_size, stream);
  else launch_paths<T, D, false>(f, tma, maps, order_size, stream);
}

template void launch_flash_sm90<__half, 64>(const FlashParams&, int, cudaStream_t);
template void launch_flash_sm90<__half, 96>(const FlashParams&, int, cudaStream_t);
template void launch_flash_sm90<__half, 128>(const FlashParams&, int, cudaStream_t);
template void launch_flash_sm90<__half, 256>(const FlashParams&, int, cudaStream_t);
template void launch_flash_sm90<__nv_bfloat16, 64>(const FlashParams&, int, cudaStream_t);
template void launch_flash_sm90<__nv_bfloat16, 96>(const FlashParams&, int, cudaStream_t);
template void launch_flash_sm90<__nv_bfloat16, 128>(const FlashParams&, int, cudaStream_t);
template void launch_flash_sm90<__nv_bfloat16, 256>(const FlashParams&, int, cudaStream_t);

}  // namespace spattn::cuda
