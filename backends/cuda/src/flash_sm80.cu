#include "flash_helpers.cuh"
#include "spattn/mask_policy.hpp"

#include <cmath>

namespace spattn::cuda {
namespace {

using namespace detail;

constexpr int kBN = 64;       // keys per chunk
constexpr int kWarps = 4;     // each warp owns MT × 16 query rows
constexpr int kThreads = kWarps * 32;

/// The CTA's shared memory: the Q tile of kBM rows, then two buffers each of K and V (chunk c in buffer c % 2), of the
/// chunks' key indices and of their membership bytes (merged items).
template <class T, int D, int kBM>
struct Smem {
  T* q;
  T* k;       // 2 buffers
  T* v;       // 2 buffers
  int* keys;  // 2 × kBN key indices
  int* mem;   // 2 × kBN membership bytes (merged items)
  __device__ __forceinline__ explicit Smem(unsigned char* raw)
      : q(reinterpret_cast<T*>(raw)),
        k(q + kBM * D),
        v(k + 2 * kBN * D),
        keys(reinterpret_cast<int*>(v + 2 * kBN * D)),
        mem(keys + 2 * kBN) {}
};

/// The CTA's work: batch b, query head h and its KV head hkv; rows row0 … row0 + kBM − 1 of the sequence's nq rows and
/// its nkv keys, which start at rows off_q and off_kv of a packed (variable-length) batch; causal: a row sees only the
/// keys up to its diagonal. Its key list: the kept tiles of its mask row (a merged item's, with a membership byte per
/// tile), the block key end (limit), and the chunks of kBN kept key positions it visits.
struct CtaWork {
  int b, h, hkv, row0, nq, nkv;
  std::int64_t off_q, off_kv;
  bool causal;
  const std::int32_t* tiles;
  const std::uint8_t* members;
  int count, limit, chunks;
};

/// The CTA's work (false: its rows lie past the end of its sequence, and w is left incomplete).
template <int kBM, bool kMerged>
__device__ __forceinline__ bool cta_work(const FlashParams& p, CtaWork& w) {
  w.b = blockIdx.z, w.h = blockIdx.y;
  w.row0 = blockIdx.x * kBM;
  w.nq = p.cu_q ? static_cast<int>(p.cu_q[w.b + 1] - p.cu_q[w.b]) : p.seqlen_q;
  w.nkv = p.cu_kv ? static_cast<int>(p.cu_kv[w.b + 1] - p.cu_kv[w.b]) : p.seqlen_kv;
  if (w.row0 >= w.nq) return false;
  w.off_q = p.cu_q ? p.cu_q[w.b] : 0, w.off_kv = p.cu_kv ? p.cu_kv[w.b] : 0;
  w.hkv = w.h / (p.heads_q / p.heads_kv);
  const int mh = p.mask_heads == p.heads_q ? w.h : w.hkv;
  w.members = nullptr;
  if constexpr (kMerged) {
    // Items of item_rows (64, or 128 where the mask was built for the sm90 kernel: two CTAs per item).
    const std::int64_t per_bh = (p.seqlen_q + p.item_rows - 1) / p.item_rows;
    const std::int64_t item = (static_cast<std::int64_t>(w.b) * p.mask_heads + mh) * per_bh + w.row0 / p.item_rows;
    w.tiles = p.item_tiles + p.item_begin[item];
    w.members = p.item_members + p.item_begin[item];
    w.count = static_cast<int>(p.item_end[item] - p.item_begin[item]);
  } else {
    const std::int64_t mrow = (static_cast<std::int64_t>(w.b) * p.mask_heads + mh) * p.num_q_tiles + w.row0 / p.tile_q;
    w.tiles = p.tiles + p.row_begin[mrow];
    w.count = static_cast<int>(p.row_end[mrow] - p.row_begin[mrow]);
  }
  w.causal = p.causal != 0;
  const int last_row = min(w.row0 + kBM, w.nq) - 1;
  w.limit = mask_policy::block_key_end(last_row, w.nq, w.nkv, w.causal);  // no row of the CTA sees a key past it
  // Tiles ascend: those past the block's key end hold no key it sees (the anchor regions list keys past most rows).
  const int positions = mask_policy::visited_tiles(w.tiles, w.count, p.tile_k, w.limit) * p.tile_k;
  w.chunks = (positions + kBN - 1) / kBN;
  return true;
}

/// Element offset of output row i of the CTA's sequence and head.
__device__ __forceinline__ std::int64_t o_row(const FlashParams& p, const CtaWork& w, int i) {
  return (p.cu_q ? 0 : w.b * p.o_sb) + w.h * p.o_sh + (w.off_q + i) * p.o_sn;
}

/// The first Q, K and V rows of the CTA's head (K and V: of its KV head) in its batch entry.
template <class T>
struct HeadRows {
  const T* q;
  const T* k;
  const T* v;
};

template <class T, bool kState>
__device__ __forceinline__ HeadRows<T> head_rows(const FlashParams& p, const CtaWork& w) {
  return {static_cast<const T*>(p.q) + (p.cu_q ? 0 : w.b * p.q_sb) + w.h * p.q_sh,
          static_cast<const T*>(p.k) + (p.cu_kv ? 0 : w.b * p.k_sb) + w.hkv * p.k_sh,
          kState ? nullptr : static_cast<const T*>(p.v) + (p.cu_kv ? 0 : w.b * p.v_sb) + w.hkv * p.v_sh};
}

/// The Q tile into shared memory (cp.async): rows past the sequence are zero-filled.
template <class T, int D, int kBM>
__device__ __forceinline__ void load_q_tile(const FlashParams& p, const CtaWork& w, const T* qg, T* s_q, int tid) {
  constexpr int kChunksPerRow = D / 8;
  for (int i = tid; i < kBM * kChunksPerRow; i += kThreads) {
    const int r = i / kChunksPerRow, col = (i % kChunksPerRow) * 8;
    const bool ok = w.row0 + r < w.nq;
    const T* src = qg + (ok ? (w.off_q + w.row0 + r) * p.q_sn + col : 0);
    cp_async16(smem_addr(s_q + swz<D>(r, col)), src, ok ? 16 : 0);
  }
}

/// Chunk `chunk` into buffer `buf` (cp.async): its K and V rows (key −1: zero-filled), key indices and membership
/// bytes.
template <class T, int D, int kBM, bool kMerged, bool kState>
__device__ __forceinline__ void load_chunk(const FlashParams& p, const CtaWork& w, const HeadRows<T>& hr,
                                           const Smem<T, D, kBM>& sm, int chunk, int buf, int tid) {
  constexpr int kChunksPerRow = D / 8;
  T* dk = sm.k + buf * kBN * D;
  T* dv = sm.v + buf * kBN * D;
  for (int c = tid; c < kBN * kChunksPerRow; c += kThreads) {
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const int j = mask_policy::key_at<int>(w.tiles, w.count, p.tile_k, chunk * kBN + r, w.limit);
    const bool ok = j >= 0;
    cp_async16(smem_addr(dk + swz<D>(r, col)), hr.k + (ok ? (w.off_kv + j) * p.k_sn + col : 0), ok ? 16 : 0);
    if constexpr (!kState)
      cp_async16(smem_addr(dv + swz<D>(r, col)), hr.v + (ok ? (w.off_kv + j) * p.v_sn + col : 0), ok ? 16 : 0);
  }
  if (tid < kBN)
    sm.keys[buf * kBN + tid] = mask_policy::key_at<int>(w.tiles, w.count, p.tile_k, chunk * kBN + tid, w.limit);
  if constexpr (kMerged) {
    if (tid < kBN) {
      const int slot = (chunk * kBN + tid) / p.tile_k;
      sm.mem[buf * kBN + tid] = slot < w.count ? w.members[slot] : 0;
    }
  }
}

// A thread's rows are rows g and g + 8 (half 0, 1) of each of its warp's MT m-tiles of 16, a quad of 4 threads (t4)
// per row. Their state: the running max m_run, this thread's part of l (l_run), and the output accumulators acc_o
// (column pairs 8·dt + 2·t4).

/// AttendOptions::resume (resume_row) for the thread's rows inside the sequence (the others keep the empty state).
template <int D, int MT, bool kState>
__device__ __forceinline__ void resume_rows(const FlashParams& p, const CtaWork& w, int warp_row, int g, int t4,
                                          float (&acc_o)[MT][D / 8][4], float (&m_run)[MT][2], float (&l_run)[MT][2]) {
  if constexpr (!kState)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = w.row0 + warp_row + mt * 16 + g + 8 * half;
        if (i < w.nq)
          resume_row<D>(p, w.b, w.h, i, o_row(p, w, i), t4, m_run[mt][half], l_run[mt][half],
                        [&](int dt, int e) -> float& { return acc_o[mt][dt][2 * half + e]; });
      }
}

/// S = Q Kᵀ for this warp's MT×16 rows × 64 keys (K in buffer sk; qf: room for Q's A fragments of a k step); each K
/// fragment feeds MT MMAs.
template <class T, int D, int MT>
__device__ __forceinline__ void score_chunk(const T* s_q, const T* sk, int warp_row, int lane,
                                            float (&s)[MT][kBN / 8][4], std::uint32_t (&qf)[MT][4]) {
  using M = MmaType<T>;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < kBN / 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      ldmatrix_x4(qf[mt], smem_addr(s_q + swz<D>(warp_row + mt * 16 + (lane % 16), ks * 16 + (lane / 16) * 8)));
#pragma unroll
    for (int nt = 0; nt < kBN / 16; ++nt) {
      std::uint32_t bfrag[4];
      ldmatrix_x4(bfrag, smem_addr(sk + swz<D>(nt * 16 + (lane / 16) * 8 + (lane % 8), ks * 16 + ((lane / 8) % 2) * 8)));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        M::mma(s[mt][2 * nt], qf[mt], bfrag[0], bfrag[1]);
        M::mma(s[mt][2 * nt + 1], qf[mt], bfrag[2], bfrag[3]);
      }
    }
  }
}

/// Online softmax on rows g and g + 8 of each m-tile; a quad of 4 threads shares a row. Base-2 scores, −∞ for keys the
/// row does not see (the chunk's key indices in `keys`; merged items: membership bytes in `mem`); s becomes P, the
/// running max and l move, the accumulators are rescaled.
template <int D, int MT, bool kMerged, bool kState>
__device__ __forceinline__ void softmax_chunk(const FlashParams& p, const CtaWork& w, const int* keys,
                                              [[maybe_unused]] const int* mem, int warp_row, int g, int t4,
                                              float (&s)[MT][kBN / 8][4], float (&acc_o)[MT][D / 8][4],
                                              float (&m_run)[MT][2], float (&l_run)[MT][2]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const mask_policy::RowKeys<int> row(w.row0 + warp_row + mt * 16 + g + 8 * half, w.nq, w.nkv, w.causal);
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = keys[nt * 8 + 2 * t4 + e];
          float x = s[mt][nt][2 * half + e] * p.scale_log2;
          if constexpr (kMerged) {  // also masked: keys this warp's own tile did not keep
            const int member = (w.row0 % p.item_rows + warp_row + mt * 16) / p.tile_q;
            if (!row.sees(j) || !((mem[nt * 8 + 2 * t4 + e] >> member) & 1)) x = -INFINITY;
          } else {
            if (!row.sees(j)) x = -INFINITY;
          }
          s[mt][nt][2 * half + e] = x;
          mx = x > mx ? x : mx;
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = mx > m_run[mt][half] ? mx : m_run[mt][half];
      const float alpha = softmax_rescale(m_run[mt][half], m_new, Exp2Fast{});
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float w = softmax_weight(s[mt][nt][2 * half + e], m_new, Exp2Fast{});
          s[mt][nt][2 * half + e] = w;
          sum += w;
        }
      l_run[mt][half] = fma_f32(l_run[mt][half], alpha, sum);
      m_run[mt][half] = m_new;
      if constexpr (!kState) {
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          acc_o[mt][dt][2 * half] *= alpha;
          acc_o[mt][dt][2 * half + 1] *= alpha;
        }
      }
    }
}

/// O += P V: P from the S accumulators (the m16n8 C layout is the m16k16 A layout; a: room for its A fragments of a
/// k step), V (buffer sv) via ldmatrix.trans; each V fragment feeds MT MMAs.
template <class T, int D, int MT>
__device__ __forceinline__ void pv_chunk(const T* sv, int lane, const float (&s)[MT][kBN / 8][4],
                                         float (&acc_o)[MT][D / 8][4], std::uint32_t (&a)[MT][4]) {
  using M = MmaType<T>;
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      a[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
      a[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
      a[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
      a[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      std::uint32_t bfrag[4];
      ldmatrix_x4_trans(bfrag, smem_addr(sv + swz<D>(kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8, dp * 16 + (lane / 16) * 8)));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        M::mma(acc_o[mt][2 * dp], a[mt], bfrag[0], bfrag[1]);
        M::mma(acc_o[mt][2 * dp + 1], a[mt], bfrag[2], bfrag[3]);
      }
    }
  }
}

/// Epilogue: reduce l over the quad, normalise, store (rows past the sequence are not written); the rows' LSE and state
/// (finish_row).
template <int D, int MT, bool kState>
__device__ __forceinline__ void write_rows(const FlashParams& p, const CtaWork& w, int warp_row, int g, int t4,
                                           const float (&acc_o)[MT][D / 8][4], const float (&m_run)[MT][2],
                                           const float (&l_run)[MT][2]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = l_run[mt][half];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int i = w.row0 + warp_row + mt * 16 + g + 8 * half;
      if (i >= w.nq) continue;
      if constexpr (kState) {
        if (t4 == 0) finish_row(p, w.b, w.h, i, m_run[mt][half], l);
        continue;
      }
      const float inv = mask_policy::empty_row(l) ? 0.0f : 1.0f / l;
      const std::int64_t orow = o_row(p, w, i);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        store_pair(p, orow, dt * 8 + 2 * t4, acc_o[mt][dt][2 * half] * inv, acc_o[mt][dt][2 * half + 1] * inv);
      if (t4 == 0) finish_row(p, w.b, w.h, i, m_run[mt][half], l);
    }
}

/// kState: the statistics pass (FlashParams::state): no V, no PV, (m, l) written instead of O.
/// Per chunk: the next chunk's K and V load (cp.async, the other buffer) while this one is scored, its online softmax
/// step taken and P·V accumulated.
template <class T, int D, int MT, bool kMerged, bool kState>
__global__ void __launch_bounds__(kThreads) flash_sm80_kernel(const FlashParams p) {
  constexpr int kBM = kWarps * 16 * MT;  // query rows per CTA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const Smem<T, D, kBM> sm(smem_raw);

  CtaWork w;
  if (!cta_work<kBM, kMerged>(p, w)) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const HeadRows<T> hr = head_rows<T, kState>(p, w);

  load_q_tile<T, D, kBM>(p, w, hr.q, sm.q, tid);
  if (w.chunks > 0) load_chunk<T, D, kBM, kMerged, kState>(p, w, hr, sm, 0, 0, tid);
  cp_async_commit();

  float acc_o[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < D / 8; ++i) acc_o[mt][i][0] = acc_o[mt][i][1] = acc_o[mt][i][2] = acc_o[mt][i][3] = 0.0f;
  float m_run[MT][2], l_run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m_run[mt][0] = m_run[mt][1] = -INFINITY, l_run[mt][0] = l_run[mt][1] = 0.0f;
  const int g = lane / 4, t4 = lane % 4;
  const int warp_row = warp * 16 * MT;  // first row of this warp inside the CTA
  resume_rows<D, MT, kState>(p, w, warp_row, g, t4, acc_o, m_run, l_run);

  for (int chunk = 0; chunk < w.chunks; ++chunk) {
    const int buf = chunk & 1;
    if (chunk + 1 < w.chunks) load_chunk<T, D, kBM, kMerged, kState>(p, w, hr, sm, chunk + 1, buf ^ 1, tid);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* sk = sm.k + buf * kBN * D;
    const T* sv = sm.v + buf * kBN * D;
    const int* keys = sm.keys + buf * kBN;
    const int* mem = sm.mem + buf * kBN;
    // The thread's register arrays are the kernel's, the helpers' fragment scratch included: an array declared inside
    // an inlined helper changes the order in which ptxas allocates registers (MT = 2).
    float s[MT][kBN / 8][4];
    std::uint32_t qf[MT][4], pf[MT][4];
    score_chunk<T, D, MT>(sm.q, sk, warp_row, lane, s, qf);
    softmax_chunk<D, MT, kMerged, kState>(p, w, keys, mem, warp_row, g, t4, s, acc_o, m_run, l_run);
    if constexpr (!kState) pv_chunk<T, D, MT>(sv, lane, s, acc_o, pf);
    __syncthreads();  // the buffer is refilled by the next iteration's prefetch
  }
  cp_async_wait<0>();
  write_rows<D, MT, kState>(p, w, warp_row, g, t4, acc_o, m_run, l_run);
}

}  // namespace

template <class T, int D, int MT, bool kMerged, bool kState = false>
void launch(const FlashParams& params, cudaStream_t stream) {
  constexpr int kBM = kWarps * 16 * MT;
  const int smem = (kBM * D + 4 * kBN * D) * static_cast<int>(sizeof(T)) + 4 * kBN * static_cast<int>(sizeof(int));
  cudaFuncSetAttribute(flash_sm80_kernel<T, D, MT, kMerged, kState>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  const dim3 grid((params.seqlen_q + kBM - 1) / kBM, params.heads_q, params.batch);
  flash_sm80_kernel<T, D, MT, kMerged, kState><<<grid, kThreads, smem, stream>>>(params);
}

/// 128-row CTAs (32 rows per warp: each K/V fragment feeds two MMAs) when the mask's query tiles allow,
/// 64-row CTAs otherwise.
template <class T, int D>
void launch_flash_sm80(const FlashParams& params, cudaStream_t stream) {
  // Merged items for 16/32-row tiles; 64-row tiles run one CTA per tile (their items are the sm90 kernel's).
  if (params.item_begin != nullptr && params.tile_q < 64) launch<T, D, 1, true>(params, stream);
  else if (params.tile_q % 128 == 0 && D <= 128) launch<T, D, 2, false>(params, stream);  // D = 256: 64-row CTAs
  else launch<T, D, 1, false>(params, stream);
}

template <class T, int D>
void launch_flash_sm80_state(const FlashParams& params, cudaStream_t stream) {
  if (params.item_begin != nullptr && params.tile_q < 64) launch<T, D, 1, true, true>(params, stream);
  else if (params.tile_q % 128 == 0) launch<T, D, 2, false, true>(params, stream);
  else launch<T, D, 1, false, true>(params, stream);
}

template void launch_flash_sm80_state<__half, 64>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80_state<__half, 96>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80_state<__half, 128>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80_state<__half, 256>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80_state<__nv_bfloat16, 64>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80_state<__nv_bfloat16, 96>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80_state<__nv_bfloat16, 128>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80_state<__nv_bfloat16, 256>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__half, 64>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__half, 96>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__half, 128>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__half, 256>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__nv_bfloat16, 64>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__nv_bfloat16, 96>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__nv_bfloat16, 128>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__nv_bfloat16, 256>(const FlashParams&, cudaStream_t);

}  // namespace spattn::cuda
