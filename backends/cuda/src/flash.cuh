// Tile-sparse flash attention kernels: their shared parameter block and launchers.
//
// flash_sm90.cu (sm_90a: WGMMA, warp-specialised producer/consumers, mbarrier pipeline) runs query blocks of
// 128 rows on a compute-capability-9.0 GPU, head dims 64, 96, 128 and 256: tiles of a multiple of 128 rows, and tiles
// of 16, 32 or 64 rows as merged 128-row work items (DeviceTileMask::item_rows; each row masks the keys its own tile did
// not keep); flash_sm80.cu (mma.sync, sm_80+) runs everything else (other GPUs, SPATTN_CUDA_KERNEL=sm80). Both compute
// the same function; the conformance target (tests/gpu) checks each against the reference.
//
// flash_sm80, what: exactly the reference executor's function (DESIGN.md §3) for fp16/bf16 Q, K, V, head dims 64, 96,
// 128 and 256: each CTA takes 64 query rows of one mask query tile of one head (4 warps × 16 rows), walks the kept
// key tiles of its mask row as one ascending list of key positions, and processes them 64 at a time:
// the 64 K and V rows are GATHERED by index into shared memory (cp.async, 16-byte copies, zero-fill past
// the end), so every tile_k from 1 (stripes) to 128 runs the tensor cores on full 64-key chunks.
// Tile shape: BM = 64 rows (128 for query tiles of 128k rows, D <= 128), BN = 64 keys, D in {64, 96, 128, 256} (D = 256:
// 160 KB of shared memory per CTA); K/V double-buffered; XOR-swizzled rows.
// Softmax: the core's base-2 online softmax (softmax_rescale/softmax_weight with Exp2Fast), fp32 state.
// Query tiles of 16 or 32 rows: a 64-row CTA is (half of) a work item of item_rows / tile_q consecutive tiles in
// EXACT mode (FG-Attn §3): it streams the union of their key tiles and each warp masks the keys its own tile did
// not keep, so the output depends only on the mask.
// Called by: CudaBackend::attend (backend.cu). Measured: see bench/results/cuda-executor.md.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "spattn/online_softmax.hpp"

namespace spattn::cuda {

struct FlashParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // optional [B, Hq, Nq] natural-log LSE
  // Optional: per row (b·Hq + h)·Nq + i its final base-2 online-softmax state (m, l) (AttendOptions::state_out). The
  // statistics pass (launch_flash_sm80_state) writes only this (no V, no O): the anchor passes of SALE and
  // AnchorAttention.
  SoftmaxState* state;
  // Optional: AttendOptions::resume — rows start from this state and l·O (the kernels: detail::resume_row).
  const SoftmaxState* resume;
  std::int64_t q_sb, q_sh, q_sn, k_sb, k_sh, k_sn, v_sb, v_sh, v_sn, o_sb, o_sh, o_sn;
  int o_dtype;  // 0 f32, 1 f16, 2 bf16
  int batch, heads_q, heads_kv, seqlen_q, seqlen_kv;  // max lengths
  const std::int64_t* cu_q;   // device, B+1, or null
  const std::int64_t* cu_kv;  // device, B+1, or null
  int causal;
  float scale_log2;
  // mask (device): mask row r lists tiles[row_begin[r] .. row_end[r]) (DeviceTileMask: row_end = row_begin + 1
  // for an uploaded CSR mask; rows of fixed capacity for a mask an estimator built on the device)
  const std::int64_t* row_begin;
  const std::int64_t* row_end;
  const std::int32_t* tiles;
  int tile_q, tile_k, mask_heads, num_q_tiles;
  // Merged work items (mask tile_q of 16 or 32, and 64 on the sm90 kernel): per (b, mask head, item_rows-row block)
  // the union of its member tiles' key tiles and a membership byte per union tile (bit m: member tile m kept it).
  // Null otherwise (DeviceTileMask::item_rows).
  const std::int64_t* item_begin;  ///< item i lists item_tiles[item_begin[i] .. item_end[i])
  const std::int64_t* item_end;
  const std::int32_t* item_tiles;
  const std::uint8_t* item_members;
  int item_rows;  ///< rows per item: 64 or 128
  int* empty_rows;  // device counter
  // sm90 work order (DeviceTileMask::order): 128-row blocks (b, mask head, block) as
  // (b * mask_heads + mh) * blocks + block, in DeviceTileMask::order's order; each entry is heads_q / mask_heads items.
  const std::int32_t* order;
  int order_blocks;  // 128-row blocks per (b, mask head)
  int order_size;    // entries in order (set by the sm90 launcher)
  int* work_next;    // the work queue: a device counter the sm90 launcher zeroes on the stream (DeviceTileMask::work_next)
  std::int64_t total_kv;  // rows of K and V along N: seqlen_kv, or the packed total of a variable-length batch
  int tma_fine_rows;      // sm90: tile_k when fully valid chunks of such tiles load by TMA (set by the launcher)
  // PV-skip (sm90 only; off when pv_thr is null): per query head thresholds (device), vote rows 16/64/128,
  // exempt last tiles, and the device counter of skipped (vote group, tile) pairs.
  const float* pv_thr;
  int pv_vote, pv_exempt;
  unsigned long long* pv_skipped;
  // int8 QKᵀ (AttendOptions::qk_int8; sm90 only; off when q8 is null): the codes and scales of int8_quant.cuh.
  const std::int8_t* q8;
  const std::int8_t* k8;
  const float* q_scale;  ///< [(b·Hq + h)·q_blocks + i / quant_block_q]
  const float* k_scale;  ///< [(b·Hkv + h)·k_blocks + j / quant_block_k]
  int q_blocks, k_blocks, quant_block_q, quant_block_k;
  std::int64_t total_q;  // rows of Q along N: seqlen_q, or the packed total of a variable-length batch
};

/// The int8 mode's code rows (int8_quant.cuh): code_cols(D) bytes, D rounded up to 128 (zero columns past D add exact
/// zeros), so that a row is whole 128-byte swizzle rows.
constexpr int code_cols(int d) { return (d + 127) / 128 * 128; }

/// Whether the current device runs the sm90 kernel: compute capability 9.0 and SPATTN_CUDA_KERNEL not "sm80"
/// (backend.cu). DeviceTileMask shapes its merged work items by it.
bool use_sm90();

template <class T, int D>
void launch_flash_sm80(const FlashParams& params, cudaStream_t stream);
/// The statistics pass of flash_sm80: S = QKᵀ over the mask's keys and the online softmax, no PV; writes
/// params.state (and the LSE / empty-row count like the executor). The same scores and softmax as the executor.
template <class T, int D>
void launch_flash_sm80_state(const FlashParams& params, cudaStream_t stream);

/// sm_90a only (call when the device is compute capability 9.0 and params.order is set).
template <class T, int D>
void launch_flash_sm90(const FlashParams& params, int order_size, cudaStream_t stream);

}  // namespace spattn::cuda
