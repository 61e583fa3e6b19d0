// The executor's tensor-core kernel on Kokkos::Cuda (sm_80 and later): the common case of flash_tile.hpp (no PV-skip,
// no int8 mode) for fp16 / bf16 Q, K, V with D = Dv = 64 or 128, where every row starts on a 16-byte boundary.
// A Kokkos team of 128 threads (4 warps) per block of 64 query rows, each warp 16 rows:
//   Q          staged once through team scratch into registers (the m16n8k16 A fragments of all D / 16 steps);
//   S = Q·Kᵀ   mma.sync over a chunk of 64 kept keys, K in team scratch (ldmatrix, XOR-swizzled rows);
//   softmax    on the accumulators: a quad of 4 lanes holds a row; the core's softmax_rescale / softmax_weight
//              (OnlineSoftmax's steps, Exp2Fast as the hand-written kernels), the row max over the quad by shuffles;
//   O += P·V   P rounded to the input dtype straight from the S accumulators (the C layout is the A layout), V in
//              team scratch read transposed (ldmatrix.trans).
// K and V have one buffer each (32 KB at D = 128: Kokkos 4.6 gives a CUDA team at most 40,936 bytes of level-0
// scratch), filled by cp.async half a step ahead of their use, two team barriers a chunk: V of a chunk loads during
// its Q·Kᵀ and softmax, K of the next chunk during this chunk's P·V; Q loads beside the first chunk's K. The keys of a
// chunk come from the mask's kept-tile list (mask_policy::key_at, −1: a zero row), found once a chunk ahead; which keys
// a row sees from RowBlock::row_keys (mask_policy; a chunk the warp's first row sees wholly skips the per-key test),
// the empty-row rule, the final division and LSE from OnlineSoftmax::finalize / finish_rows: the same rules as the
// other two kernels, on tensor cores. Three teams an SM (LaunchBounds<128, 3>: at most 168 registers a thread; the
// kernel wants 197 at D = 64 and 254 at D = 128 unbounded): on the H200 at 32K (llm workload, bench/results/kokkos-h100.md)
// the 11 % block mask runs 3 % faster than with two teams an SM (6.09–6.15 ms against 6.28–6.37), the dense mask 1 %
// slower (42.15–42.24 ms against 41.69–41.76); a team per SM more hides more of each row block's prologue (Q, the
// first K chunk) and epilogue, which a sparse mask's short key lists expose.
// The warp-level primitives (mma.sync, ldmatrix, cp.async, the swizzle) are nvidia/spattn_ptx's, shared with the
// hand-written CUDA backend; this kernel is the Kokkos backend's own (its team, its scratch, its row blocks).
// The code: MmaTeam (the team's buffers, its copies and fragment addresses), MmaRows (a warp's rows: Q·Kᵀ and the
// softmax step, P·V, the end) and FlashMma::run (the chunk loop and its barriers).
// Not bit-identical to the reference (fp32 accumulation in another order; P in the input dtype as every flash
// kernel): outputs within the dtype's tolerance (DESIGN.md §5.4), as the other Kokkos kernels.
#pragma once

#include <Kokkos_Core.hpp>

#include "nvidia_mma.hpp"

#if defined(SPATTN_KOKKOS_MMA)
#include <cstdint>

#include "attend_args.hpp"
#include "kernel_args.hpp"
#include "spattn/mask_policy.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::kokkos::detail {

namespace mma {
inline constexpr int kWarps = 4;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kRows = 16 * kWarps;  ///< query rows per team
inline constexpr int kKeys = 64;           ///< keys per chunk
inline constexpr int kKeySlots = 3;       ///< chunks whose keys are held at once (the statistics pass: c … c + 2)
/// Team scratch: K and V buffers [kKeys][D] (16-bit), kKeySlots chunks' keys, 128 bytes of alignment slack.
template <int D>
KOKKOS_INLINE_FUNCTION constexpr std::size_t scratch_bytes() {
  return 2u * kKeys * D * 2u + kKeySlots * kKeys * sizeof(int) + 128u;
}
}  // namespace mma

#if defined(__CUDA_ARCH__)
/// O elements i and i + 1, rounded (RNE) to O's dtype: one 4-byte (16-bit O) or 8-byte (fp32 O) store where aligned.
__device__ inline void store_pair(const DeviceTensor& o, std::int64_t i, float x0, float x1) {
  if (o.dtype == DType::f32) {
    float* p = static_cast<float*>(o.data) + i;
    if (reinterpret_cast<std::uintptr_t>(p) % 8 == 0) *reinterpret_cast<float2*>(p) = make_float2(x0, x1);
    else p[0] = x0, p[1] = x1;
    return;
  }
  std::uint16_t* p = static_cast<std::uint16_t*>(o.data) + i;
  const std::uint16_t b0 = o.dtype == DType::bf16 ? f32_to_bf16_bits(x0) : f32_to_f16_bits(x0);
  const std::uint16_t b1 = o.dtype == DType::bf16 ? f32_to_bf16_bits(x1) : f32_to_f16_bits(x1);
  if (reinterpret_cast<std::uintptr_t>(p) % 4 == 0) *reinterpret_cast<std::uint32_t*>(p) = b0 | (std::uint32_t{b1} << 16);
  else p[0] = b0, p[1] = b1;
}
#endif

/// One team's place in FlashMma: its row block, the thread's lane coordinates, the scratch buffers (K, V, the chunks'
/// keys) and the addresses its copies and fragments use; the kernel's data movement is its member functions.
template <class T, int D, bool kPV>
struct MmaTeam {
  static constexpr int kPieces = D / 8;  // 16-byte pieces of a row
  static constexpr int kSlots = kPV ? 2 : mma::kKeySlots;
  static constexpr std::uint32_t kRowBytes = 2u * D;
  /// load_rows: a thread copies 16-byte piece tid % kPieces of rows tid / kPieces + kPass·i; kPass is a multiple of 8,
  /// so its swizzled piece is the same in each.
  static constexpr int kPass = mma::kThreads / kPieces;

  const AttendArgs& a;
  const RowBlock& blk;
  int tid, warp, lane, g, t4;
  T* sk;       ///< K's buffer [kKeys][D] (the statistics pass: both buffers, 2·kKeys rows)
  T* sv;       ///< V's buffer [kKeys][D]; Q's rows pass through it first
  int* skeys;  ///< [kSlots][kKeys]: the keys of chunk c at slot c % kSlots
  int count, limit, tile_k, chunks;  ///< the block's key list: positions [0, positions) in chunks of kKeys (< 2^31 keys)
  const T* kg;
  const T* vg;
  std::int64_t k_sn, v_sn;
  int my_row, my_piece;  ///< load_rows: this thread's first row and its piece
  std::uint32_t k_lane, k_x, v_lane, v_x, my_dst;

#if defined(__CUDA_ARCH__)
  __device__ MmaTeam(const AttendArgs& args, const RowBlock& block, int thread, void* scratch)
      : a(args), blk(block), tid(thread), warp(thread / 32), lane(thread % 32), g(lane / 4), t4(lane % 4) {
    auto* base = static_cast<unsigned char*>(scratch);
    base += (128u - reinterpret_cast<std::uintptr_t>(base) % 128u) % 128u;
    sk = reinterpret_cast<T*>(base);
    sv = sk + mma::kKeys * D;
    skeys = reinterpret_cast<int*>(sv + mma::kKeys * D);
    count = static_cast<int>(blk.count);
    limit = static_cast<int>(blk.limit);
    tile_k = a.tile_k;
    chunks = static_cast<int>((blk.positions + mma::kKeys - 1) / mma::kKeys);
    kg = static_cast<const T*>(a.k.data) + blk.kv_row(a, a.k, 0);
    vg = static_cast<const T*>(a.v.data) + blk.kv_row(a, a.v, 0);
    k_sn = a.k.stride_n, v_sn = a.v.stride_n;
    // The fragments' 32-bit shared addresses, swz<D> spelled out: a lane's ldmatrix rows are ≡ lane (mod 8), so its
    // 16-byte piece p of a row lies at piece p ^ (lane % 8). K: rows 16·nt + lane % 8 + 8·(lane / 16), pieces
    // 2·ks + (lane / 8) % 2; V (transposed): rows 16·kk + lane % 8 + 8·((lane / 8) % 2), pieces 2·dp + lane / 16.
    const std::uint32_t l7 = lane % 8;
    k_lane = ptx::smem_addr(sk) + (l7 + 8u * (lane / 16)) * kRowBytes, k_x = ((lane / 8) % 2) ^ l7;
    v_lane = ptx::smem_addr(sv) + (l7 + 8u * ((lane / 8) % 2)) * kRowBytes, v_x = (lane / 16) ^ l7;
    my_row = tid / kPieces, my_piece = tid % kPieces;
    my_dst = (my_row * kPieces + (my_piece ^ (my_row % 8))) * 16u;
  }

  /// Q's rows (rows past the block: zeros) into V's buffer by cp.async, one group; they load while the keys of the
  /// first chunk are found and its K rows load (the loop's first barrier orders the fragment reads before V's first load).
  __device__ void stage_q() const {
    const T* qg = static_cast<const T*>(a.q.data);
    for (int c = tid; c < mma::kRows * kPieces; c += mma::kThreads) {
      const int r = c / kPieces, col = (c % kPieces) * 8;
      const bool ok = r < blk.rows;
      ptx::cp_async16(ptx::smem_addr(sv + ptx::swz<D>(r, col)), qg + (ok ? blk.q_row(a, a.q, r) + col : 0), ok ? 16 : 0);
    }
    ptx::cp_async_commit();
  }
  /// Q's A fragments of the warp's 16 rows from V's buffer (after the barrier that follows Q's cp.async).
  __device__ void load_q_fragments(std::uint32_t (&qf)[D / 16][4]) const {
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
      ptx::ldmatrix_x4(qf[ks], ptx::smem_addr(sv + ptx::swz<D>(warp * 16 + lane % 16, ks * 16 + (lane / 16) * 8)));
  }
  __device__ std::uint32_t k_frag(int nt, int ks) const { return k_lane + 16u * kRowBytes * nt + (((2u * ks) ^ k_x) << 4); }
  __device__ std::uint32_t v_frag(int kk, int dp) const { return v_lane + 16u * kRowBytes * kk + (((2u * dp) ^ v_x) << 4); }
  __device__ const int* keys(int c) const { return skeys + (c % kSlots) * mma::kKeys; }

  /// Slot c % kSlots ← the keys of chunk c (threads < kKeys; mask_policy::key_at, −1: none).
  __device__ void find_keys(int c) const {
    if (tid < mma::kKeys)
      skeys[(c % kSlots) * mma::kKeys + tid] = mask_policy::key_at<int>(blk.kept, count, tile_k, c * mma::kKeys + tid, limit);
  }
  /// The rows of chunk c (keys in skeys, after a barrier) from src (row stride sn) into a buffer, by cp.async.
  __device__ void load_rows(T* buffer, const T* src, std::int64_t sn, int c) const {
    const int* ks = keys(c);
    const std::uint32_t dst = ptx::smem_addr(buffer) + my_dst;
#pragma unroll
    for (int i = 0; i < mma::kKeys / kPass; ++i) {
      const int j = ks[my_row + kPass * i];
      ptx::cp_async16(dst + i * kPass * kRowBytes, src + (j >= 0 ? j * sn + 8 * my_piece : 0), j >= 0 ? 16 : 0);
    }
  }
  __device__ void load_k(T* buffer, int c) const { load_rows(buffer, kg, k_sn, c); }
  __device__ void load_v(int c) const { load_rows(sv, vg, v_sn, c); }
#endif
};

/// The warp's rows g and g + 8 of its 16: the running max, this lane's part of l, the accumulators (the quad's lanes
/// hold column pairs 8·dt + 2·t4), which keys each row sees; the kernel's arithmetic is its member functions.
template <class T, int D, bool kPV>
struct MmaRows {
  using Team = MmaTeam<T, D, kPV>;
  float acc[D / 8][4];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  mask_policy::RowKeys<int> sees[2];
  int warp_end;  ///< the warp's first row's key end: row ends do not decrease down a block

#if defined(__CUDA_ARCH__)
  /// Zero state, or AttendOptions::resume's (m, l) and l·O (l on lane t4 = 0); the rows' key ends.
  __device__ explicit MmaRows(const Team& t) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.0f;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = t.warp * 16 + t.g + 8 * half;
      if (!kPV || !t.blk.resumed(t.a, r)) continue;
      const SoftmaxState st = t.a.resume[t.blk.state_row0 + r];
      m_run[half] = st.m;
      l_run[half] = t.t4 == 0 ? st.l : 0.0f;
      const std::int64_t orow = t.blk.q_row(t.a, t.a.o, r);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        for (int e = 0; e < 2; ++e) acc[dt][2 * half + e] = st.l * t.a.o.load(orow + 8 * dt + 2 * t.t4 + e);
    }
    const auto row_end = [&](int r) { return static_cast<int>(t.blk.row_keys(t.a, r).end); };
    sees[0].end = row_end(t.warp * 16 + t.g);
    sees[1].end = row_end(t.warp * 16 + t.g + 8);
    warp_end = row_end(t.warp * 16);
  }

  /// S = Q·Kᵀ of chunk c (K rows at byte offset k_off of K's buffer), then the online softmax step of both rows on it:
  /// s becomes P, m_run and l_run move, acc is rescaled. Base-2 scores, −∞ where the row does not see the key. Keys
  /// ascend along the list, −1 (none) only at its end: a chunk whose last key is one the warp's first row sees is seen
  /// wholly by every row of the warp (no per-key test).
  __device__ void score(const Team& t, const std::uint32_t (&qf)[D / 16][4], int c, std::uint32_t k_off,
                        float (&s)[mma::kKeys / 8][4]) {
    using M = ptx::MmaType<T>;
#pragma unroll
    for (int nt = 0; nt < mma::kKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
      for (int nt = 0; nt < mma::kKeys / 16; ++nt) {
        std::uint32_t bf[4];
        ptx::ldmatrix_x4(bf, t.k_frag(nt, ks) + k_off);
        M::mma(s[2 * nt], qf[ks], bf[0], bf[1]);
        M::mma(s[2 * nt + 1], qf[ks], bf[2], bf[3]);
      }
    const int* keys = t.keys(c);
    const int last = keys[mma::kKeys - 1];
    const bool whole = last >= 0 && last < warp_end;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < mma::kKeys / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float x = s[nt][2 * half + e] * t.a.s.scale_log2;
          if (!whole && !sees[half].sees(keys[nt * 8 + 2 * t.t4 + e])) x = -INFINITY;
          s[nt][2 * half + e] = x;
          mx = x > mx ? x : mx;
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = mx > m_run[half] ? mx : m_run[half];
      const float alpha = softmax_rescale(m_run[half], m_new, Exp2Fast{});
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < mma::kKeys / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float w = softmax_weight(s[nt][2 * half + e], m_new, Exp2Fast{});
          s[nt][2 * half + e] = w;
          sum += w;
        }
      l_run[half] = fma_f32(l_run[half], alpha, sum);
      m_run[half] = m_new;
      if (kPV && alpha != 1.0f)  // the running max moved (a multiply by 1 changes nothing: skipped)
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) acc[dt][2 * half] *= alpha, acc[dt][2 * half + 1] *= alpha;
    }
  }

  /// O += P·V: P rounded to T straight from the S accumulators (the C layout is the A layout), V read transposed.
  __device__ void add_pv(const Team& t, const float (&s)[mma::kKeys / 8][4]) {
    using M = ptx::MmaType<T>;
#pragma unroll
    for (int kk = 0; kk < mma::kKeys / 16; ++kk) {
      const std::uint32_t p[4] = {ptx::pack2<T>(s[2 * kk][0], s[2 * kk][1]), ptx::pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                  ptx::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  ptx::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t bf[4];
        ptx::ldmatrix_x4_trans(bf, t.v_frag(kk, dp));
        M::mma(acc[2 * dp], p, bf[0], bf[1]);
        M::mma(acc[2 * dp + 1], p, bf[2], bf[3]);
      }
    }
  }

  /// l summed over the quad; O = acc / l (OnlineSoftmax::finalize: zeros for an empty row) stored; the rows' final
  /// states into `states` (team scratch) for finish_rows.
  __device__ void finish(const Team& t, SoftmaxState* states) const {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float l = l_run[half];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int r = t.warp * 16 + t.g + 8 * half;
      const SoftmaxState st{m_run[half], l};
      if (t.t4 == 0) states[r] = st;
      if (!kPV || r >= t.blk.rows) continue;
      const std::int64_t orow = t.blk.q_row(t.a, t.a.o, r);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        const float pair[2] = {acc[dt][2 * half], acc[dt][2 * half + 1]};
        float out[2];
        OnlineSoftmax::finalize(st, pair, 2, out);
        store_pair(t.a.o, orow + 8 * dt + 2 * t.t4, out[0], out[1]);
      }
    }
  }
#endif
};

/// T: __half or __nv_bfloat16 (Q, K and V all of it); D = Dv. kPV = false: the statistics pass — each row's (m, l)
/// over its keys to state_out / LSE and nothing else (no V, no O: AnchorAttention's anchor pass, as the hand-written
/// backend's state pass). Its loop double-buffers K in the two buffers, finds keys two chunks ahead and has one team
/// barrier a chunk.
template <class T, int D, bool kPV = true>
struct FlashMma {
  using Policy = Kokkos::TeamPolicy<Kokkos::Cuda, Kokkos::LaunchBounds<mma::kThreads, 3>>;  // three teams an SM (above)
  using Member = typename Policy::member_type;

  AttendArgs a;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team, std::int64_t& empty_rows) const {
#if defined(__CUDA_ARCH__)
    run(team, empty_rows);
#else
    (void)team, (void)empty_rows;
    Kokkos::abort("spattn: the tensor-core executor runs on a CUDA device only");
#endif
  }

#if defined(__CUDA_ARCH__)
  __device__ void run(const Member& team, std::int64_t& empty_rows) const {
    const RowBlock blk(a, team.league_rank(), mma::kRows, a.s.causal);
    if (blk.rows == 0) return;
    const MmaTeam<T, D, kPV> t(a, blk, team.team_rank(), team.team_scratch(0).get_shmem(mma::scratch_bytes<D>()));
    t.stage_q();
    MmaRows<T, D, kPV> rows(t);

    // The keys of chunk 0 (and 1: the statistics pass finds them two ahead), K of chunk 0, Q into registers.
    t.find_keys(0);
    if constexpr (!kPV) t.find_keys(1);
    team.team_barrier();
    if (t.chunks > 0) t.load_k(t.sk, 0);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();  // Q (K of chunk 0 may still be in flight)
    team.team_barrier();
    std::uint32_t qf[D / 16][4];
    t.load_q_fragments(qf);
    if constexpr (kPV) {
      // Per chunk c: barrier 1 (K of c loaded; V of c − 1 and the keys of c − 1 no longer read), V of c loads, the keys
      // of c + 1 are found, Q·Kᵀ and the softmax step; barrier 2 (V of c loaded; K of c no longer read), K of c + 1
      // loads, P·V.
      for (int c = 0; c < t.chunks; ++c) {
        ptx::cp_async_wait<0>();
        team.team_barrier();
        t.load_v(c);
        ptx::cp_async_commit();
        if (c + 1 < t.chunks) t.find_keys(c + 1);
        float s[mma::kKeys / 8][4];
        rows.score(t, qf, c, 0u, s);
        ptx::cp_async_wait<0>();
        team.team_barrier();
        if (c + 1 < t.chunks) t.load_k(t.sk, c + 1);
        ptx::cp_async_commit();
        rows.add_pv(t, s);
      }
    } else {
      // The statistics pass, per chunk c: one barrier (K of c loaded; every warp done with chunk c − 1, so K's other
      // buffer and the key slot of c + 2 are free), K of c + 1 loads into the other buffer, the keys of c + 2 are
      // found, Q·Kᵀ and the softmax step on buffer c % 2 (sk, then sv: one block of 2 · kKeys rows).
      for (int c = 0; c < t.chunks; ++c) {
        ptx::cp_async_wait<0>();
        team.team_barrier();
        if (c + 1 < t.chunks) t.load_k(t.sk + ((c + 1) % 2) * mma::kKeys * D, c + 1);
        ptx::cp_async_commit();
        if (c + 2 < t.chunks) t.find_keys(c + 2);
        float s[mma::kKeys / 8][4];
        rows.score(t, qf, c, (c % 2) * mma::kKeys * t.kRowBytes, s);
      }
    }
    ptx::cp_async_wait<0>();  // (nothing is in flight: the last chunk loaded no K)
    team.team_barrier();      // every warp is done with V and K (the states below reuse K's buffer)
    auto* states = reinterpret_cast<SoftmaxState*>(t.sk);  // [kRows], K's buffer (its last reader passed a barrier)
    rows.finish(t, states);
    team.team_barrier();
    finish_rows(team, a, blk, [&](int r) { return states[r]; }, 0, nullptr, empty_rows);
  }
#endif
};

/// Whether Q and K suit the statistics pass (kPV = false): D = 64 or 128, Q and K mma_rows_fit.
inline bool mma_qk_fit(const Problem& p, const TensorView& q, const TensorView& k) {
  return (p.head_dim == 64 || p.head_dim == 128) && mma_rows_fit({&q, &k});
}

/// Whether the call's tensors suit the tensor-core kernel: D = Dv = 64 or 128, Q, K, V mma_rows_fit.
inline bool mma_tensors_fit(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v) {
  return p.head_dim == p.dim_v() && mma_qk_fit(p, q, k) && mma_rows_fit({&q, &k, &v});
}

/// Runs the tensor-core kernel; returns the empty rows.
template <class T, int D, bool kPV>
std::int64_t run_mma_kernel(const AttendArgs& a) {
  return run_row_blocks<FlashMma<T, D, kPV>>(kPV ? "spattn::kokkos::attend_mma" : "spattn::kokkos::statistics_mma", a,
                                             mma::kRows, mma::kThreads, mma::scratch_bytes<D>());
}

/// run_mma_kernel for the call's dtype and head dimension (mma_tensors_fit holds; the statistics pass, kPV = false:
/// mma_qk_fit, V and O unread).
template <bool kPV = true>
std::int64_t run_mma_kernel(const AttendArgs& a, DType dtype, std::int64_t d) {
  if (dtype == DType::f16) return d == 64 ? run_mma_kernel<__half, 64, kPV>(a) : run_mma_kernel<__half, 128, kPV>(a);
  return d == 64 ? run_mma_kernel<__nv_bfloat16, 64, kPV>(a) : run_mma_kernel<__nv_bfloat16, 128, kPV>(a);
}

}  // namespace spattn::kokkos::detail
#endif  // SPATTN_KOKKOS_MMA
