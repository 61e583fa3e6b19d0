#include "flash_helpers.cuh"
#include "spattn/mask_policy.hpp"

#include <cmath>

namespace spattn::cuda {
namespace {

using namespace detail;

constexpr int kBN = 64;       // keys per chunk
constexpr int kWarps = 4;     // each warp owns MT × 16 query rows
constexpr int kThreads = kWarps * 32;

/// kState: the statistics pass (FlashParams::state): no V, no PV, (m, l) written instead of O.
template <class T, int D, int MT, bool kMerged, bool kState>
__global__ void __launch_bounds__(kThreads) flash_sm80_kernel(const FlashParams p) {
  constexpr int kBM = kWarps * 16 * MT;  // query rows per CTA
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* s_q = reinterpret_cast<T*>(smem_raw);
  T* s_k = s_q + kBM * D;        // 2 buffers
  T* s_v = s_k + 2 * kBN * D;    // 2 buffers
  int* s_key = reinterpret_cast<int*>(s_v + 2 * kBN * D);  // 2 × kBN key indices
  int* s_mem = s_key + 2 * kBN;                             // 2 × kBN membership bytes (merged items)

  const int b = blockIdx.z, h = blockIdx.y;
  const int row0 = blockIdx.x * kBM;
  const int nq = p.cu_q ? static_cast<int>(p.cu_q[b + 1] - p.cu_q[b]) : p.seqlen_q;
  const int nkv = p.cu_kv ? static_cast<int>(p.cu_kv[b + 1] - p.cu_kv[b]) : p.seqlen_kv;
  if (row0 >= nq) return;
  const std::int64_t off_q = p.cu_q ? p.cu_q[b] : 0, off_kv = p.cu_kv ? p.cu_kv[b] : 0;
  const int hkv = h / (p.heads_q / p.heads_kv);
  const int mh = p.mask_heads == p.heads_q ? h : hkv;
  const std::int32_t* tiles;
  const std::uint8_t* members = nullptr;
  int count;
  if constexpr (kMerged) {
    // Items of item_rows (64, or 128 where the mask was built for the sm90 kernel: two CTAs per item).
    const std::int64_t per_bh = (p.seqlen_q + p.item_rows - 1) / p.item_rows;
    const std::int64_t item = (static_cast<std::int64_t>(b) * p.mask_heads + mh) * per_bh + row0 / p.item_rows;
    tiles = p.item_tiles + p.item_begin[item];
    members = p.item_members + p.item_begin[item];
    count = static_cast<int>(p.item_end[item] - p.item_begin[item]);
  } else {
    const std::int64_t mrow = (static_cast<std::int64_t>(b) * p.mask_heads + mh) * p.num_q_tiles + row0 / p.tile_q;
    tiles = p.tiles + p.row_begin[mrow];
    count = static_cast<int>(p.row_end[mrow] - p.row_begin[mrow]);
  }
  const bool causal = p.causal != 0;
  const int last_row = min(row0 + kBM, nq) - 1;
  const int limit = mask_policy::block_key_end(last_row, nq, nkv, causal);  // no row of the CTA sees a key past it
  // Tiles ascend: those past the block's key end hold no key it sees (the anchor regions list keys past most rows).
  const int positions = mask_policy::visited_tiles(tiles, count, p.tile_k, limit) * p.tile_k;
  const int chunks = (positions + kBN - 1) / kBN;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const T* qg = static_cast<const T*>(p.q) + (p.cu_q ? 0 : b * p.q_sb) + h * p.q_sh;
  const T* kg = static_cast<const T*>(p.k) + (p.cu_kv ? 0 : b * p.k_sb) + hkv * p.k_sh;
  const T* vg = kState ? nullptr : static_cast<const T*>(p.v) + (p.cu_kv ? 0 : b * p.v_sb) + hkv * p.v_sh;

  // Q tile: rows past the sequence are zero-filled.
  constexpr int kChunksPerRow = D / 8;
  for (int c = tid; c < kBM * kChunksPerRow; c += kThreads) {
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const bool ok = row0 + r < nq;
    const T* src = qg + (ok ? (off_q + row0 + r) * p.q_sn + col : 0);
    cp_async16(smem_addr(s_q + swz<D>(r, col)), src, ok ? 16 : 0);
  }
  auto load_kv = [&](int chunk, int buf) {
    T* dk = s_k + buf * kBN * D;
    T* dv = s_v + buf * kBN * D;
    for (int c = tid; c < kBN * kChunksPerRow; c += kThreads) {
      const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      const int j = mask_policy::key_at<int>(tiles, count, p.tile_k, chunk * kBN + r, limit);
      const bool ok = j >= 0;
      cp_async16(smem_addr(dk + swz<D>(r, col)), kg + (ok ? (off_kv + j) * p.k_sn + col : 0), ok ? 16 : 0);
      if constexpr (!kState)
        cp_async16(smem_addr(dv + swz<D>(r, col)), vg + (ok ? (off_kv + j) * p.v_sn + col : 0), ok ? 16 : 0);
    }
    if (tid < kBN) s_key[buf * kBN + tid] = mask_policy::key_at<int>(tiles, count, p.tile_k, chunk * kBN + tid, limit);
    if constexpr (kMerged) {
      if (tid < kBN) {
        const int slot = (chunk * kBN + tid) / p.tile_k;
        s_mem[buf * kBN + tid] = slot < count ? members[slot] : 0;
      }
    }
  };
  if (chunks > 0) load_kv(0, 0);
  cp_async_commit();

  using M = MmaType<T>;
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
  const auto o_row = [&](int i) { return (p.cu_q ? 0 : b * p.o_sb) + h * p.o_sh + (off_q + i) * p.o_sn; };
  if constexpr (!kState)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int i = row0 + warp_row + mt * 16 + g + 8 * half;
        if (i < nq)
          resume_row<D>(p, b, h, i, o_row(i), t4, m_run[mt][half], l_run[mt][half],
                        [&](int dt, int e) -> float& { return acc_o[mt][dt][2 * half + e]; });
      }

  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int buf = chunk & 1;
    if (chunk + 1 < chunks) load_kv(chunk + 1, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* sk = s_k + buf * kBN * D;
    const T* sv = s_v + buf * kBN * D;
    const int* keys = s_key + buf * kBN;
    [[maybe_unused]] const int* mem = s_mem + buf * kBN;

    // S = Q Kᵀ for this warp's MT×16 rows × 64 keys; each K fragment feeds MT MMAs.
    float s[MT][kBN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < kBN / 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      std::uint32_t qf[MT][4];
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

    // Online softmax on rows g and g + 8 of each m-tile; a quad of 4 threads shares a row.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const mask_policy::RowKeys<int> row(row0 + warp_row + mt * 16 + g + 8 * half, nq, nkv, causal);
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < kBN / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int j = keys[nt * 8 + 2 * t4 + e];
            float x = s[mt][nt][2 * half + e] * p.scale_log2;
            if constexpr (kMerged) {  // also masked: keys this warp's own tile did not keep
              const int member = (row0 % p.item_rows + warp_row + mt * 16) / p.tile_q;
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

    // O += P V: P from the S accumulators (the m16n8 C layout is the m16k16 A layout), V via ldmatrix.trans;
    // each V fragment feeds MT MMAs.
    if constexpr (!kState) {
#pragma unroll
      for (int kk = 0; kk < kBN / 16; ++kk) {
        std::uint32_t a[MT][4];
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
    __syncthreads();  // the buffer is refilled by the next iteration's prefetch
  }
  cp_async_wait<0>();

  // Epilogue: reduce l over the quad, normalise, store (rows past the sequence are not written).
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = l_run[mt][half];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int i = row0 + warp_row + mt * 16 + g + 8 * half;
      if (i >= nq) continue;
      if constexpr (kState) {
        if (t4 == 0) finish_row(p, b, h, i, m_run[mt][half], l);
        continue;
      }
      const float inv = mask_policy::empty_row(l) ? 0.0f : 1.0f / l;
      const std::int64_t orow = o_row(i);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        store_pair(p, orow, dt * 8 + 2 * t4, acc_o[mt][dt][2 * half] * inv, acc_o[mt][dt][2 * half + 1] * inv);
      if (t4 == 0) finish_row(p, b, h, i, m_run[mt][half], l);
    }
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
template void launch_flash_sm80_state<__half, 128>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80_state<__nv_bfloat16, 64>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80_state<__nv_bfloat16, 128>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__half, 64>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__half, 96>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__half, 128>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__half, 256>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__nv_bfloat16, 64>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__nv_bfloat16, 96>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__nv_bfloat16, 128>(const FlashParams&, cudaStream_t);
template void launch_flash_sm80<__nv_bfloat16, 256>(const FlashParams&, cudaStream_t);

}  // namespace spattn::cuda
