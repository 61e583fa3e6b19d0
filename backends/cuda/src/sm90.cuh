// Hopper (sm_90a) building blocks of flash_sm90.cu and SALE's candidate kernel (sale.cu): mbarrier waits and
// arrivals, the async-proxy fence, and the warpgroup MMA (wgmma) with the shared-memory matrix descriptors it reads,
// for the flash kernel's two products: S = Q·Kᵀ (both operands in shared memory, K-major) and O += P·V (P in registers,
// V in shared memory, MN-major, i.e. transposed), and the integer Q·Kᵀ of s8 codes (k32 steps: also 32 bytes) of SALE's
// candidates and of the executor's int8 mode. Accumulators are fp32 (s32 for the codes) in the m64nN register layout,
// which per warp is the mma.sync m16n8 layout repeated over N/8 column blocks.
//
// Shared-memory layout of every tile (the 128-byte swizzle of the descriptor's layout type 1): the D columns
// are split into blocks of 64 elements (128 bytes); each block holds all rows, 128 bytes per row, and the
// 16-byte chunk c of row r is stored at chunk c ^ (r % 8). Tiles start 1024-byte aligned.
#pragma once

#include <cstdint>

namespace spattn::cuda::detail {

/// Byte offset of 16-byte chunk `c` (of D / 8) of row `r` in a swizzled tile of `rows` rows.
__device__ __forceinline__ std::uint32_t swizzled_offset(int rows, int r, int c) {
  return static_cast<std::uint32_t>((c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

/// A matrix descriptor's low word: start address and leading byte offset, in 16-byte units. Adding n to it moves the
/// start address by 16·n bytes: shared-memory addresses stay below 256 KB, so the 14-bit address field never carries
/// into the LBO field. Kernels compute it once per buffer and add each k step's offset (one integer add per WGMMA,
/// where building every descriptor took five).
__device__ __forceinline__ std::uint32_t smem_desc_lo(std::uint32_t addr, std::uint32_t lbo) {
  return ((addr & 0x3FFFFu) >> 4) | (((lbo & 0x3FFFFu) >> 4) << 16);
}
/// The descriptor of low word `lo` (smem_desc_lo): stride byte offset and the 128-byte swizzle in the high word.
__device__ __forceinline__ std::uint64_t smem_desc_at(std::uint32_t lo, std::uint32_t sbo) {
  return static_cast<std::uint64_t>(lo) | (static_cast<std::uint64_t>((sbo & 0x3FFFFu) >> 4) << 32) |
         (std::uint64_t{1} << 62);
}
/// Matrix descriptor: start address, leading and stride byte offsets, 128-byte swizzle.
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t addr, std::uint32_t lbo, std::uint32_t sbo) {
  return smem_desc_at(smem_desc_lo(addr, lbo), sbo);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// The fp32 accumulator operands d[0 … N/2 − 1] of an m64nNk16 wgmma, 8 at a time.
#define SPATTN_WGMMA_D8(i)                                                                                         \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),  \
      "+f"(d[i + 7])
#define SPATTN_WGMMA_D32(i) SPATTN_WGMMA_D8(i), SPATTN_WGMMA_D8(i + 8), SPATTN_WGMMA_D8(i + 16), SPATTN_WGMMA_D8(i + 24)
#define SPATTN_WGMMA_D64 SPATTN_WGMMA_D32(0), SPATTN_WGMMA_D32(32)
// The same for s32 accumulators u[0 … N/2 − 1] (the integer products of s8 codes).
#define SPATTN_WGMMA_U8(i)                                                                                         \
  "+r"(u[i]), "+r"(u[i + 1]), "+r"(u[i + 2]), "+r"(u[i + 3]), "+r"(u[i + 4]), "+r"(u[i + 5]), "+r"(u[i + 6]),  \
      "+r"(u[i + 7])
#define SPATTN_WGMMA_U32(i) SPATTN_WGMMA_U8(i), SPATTN_WGMMA_U8(i + 8), SPATTN_WGMMA_U8(i + 16), SPATTN_WGMMA_U8(i + 24)
#define SPATTN_WGMMA_D128 SPATTN_WGMMA_D64, SPATTN_WGMMA_D32(64), SPATTN_WGMMA_D32(96)
// A and B from shared memory (descriptors a, b; "ss"), or A from registers (a[4]; "rs"); the accumulate predicate last.
#define SPATTN_WGMMA_SS_N128(TYPE)                                                                              \
  asm volatile("{.reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE \
               " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;}\n"                                                      \
               : SPATTN_WGMMA_D64                                                                               \
               : "l"(a), "l"(b), "r"(accumulate))
#define SPATTN_WGMMA_RS_N128(TYPE)                                                                              \
  asm volatile("{.reg .pred p; setp.ne.b32 p, %69, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE \
               " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;}\n"                                        \
               : SPATTN_WGMMA_D64                                                                               \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate))
#define SPATTN_WGMMA_RS_N64(TYPE)                                                                               \
  asm volatile("{.reg .pred p; setp.ne.b32 p, %37, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE \
               " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;}\n"                                        \
               : SPATTN_WGMMA_D32(0)                                                                            \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate))
#define SPATTN_WGMMA_SS_N64(TYPE)                                                                               \
  asm volatile("{.reg .pred p; setp.ne.b32 p, %34, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE \
               " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;}\n"                                                      \
               : SPATTN_WGMMA_D32(0)                                                                            \
               : "l"(a), "l"(b), "r"(accumulate))
#define SPATTN_WGMMA_RS_N256(TYPE)                                                                              \
  asm volatile("{.reg .pred p; setp.ne.b32 p, %133, 0; wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE \
               " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;}\n"                                 \
               : SPATTN_WGMMA_D128                                                                              \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate))

/// d[N/2] (+)= A·Bᵀ for a 64×16 A and an N×16 B (N = 64 or 128), both K-major in shared memory (accumulate = 0:
/// d = A·Bᵀ).
template <bool kHalf, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], std::uint64_t a, std::uint64_t b, int accumulate) {
  static_assert(N == 64 || N == 128);
  if constexpr (N == 128) {
    if constexpr (kHalf) SPATTN_WGMMA_SS_N128("f16");
    else SPATTN_WGMMA_SS_N128("bf16");
  } else {
    if constexpr (kHalf) SPATTN_WGMMA_SS_N64("f16");
    else SPATTN_WGMMA_SS_N64("bf16");
  }
}

/// d[N/2] += A·B for a 64×16 A in registers (the m16k16 fragment of each warp) and a 16×N B stored MN-major
/// (rows of N contiguous elements) in shared memory.
template <bool kHalf, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const std::uint32_t (&a)[4], std::uint64_t b, int accumulate) {
  static_assert(N == 64 || N == 128 || N == 256);
  if constexpr (N == 256) {
    if constexpr (kHalf) SPATTN_WGMMA_RS_N256("f16");
    else SPATTN_WGMMA_RS_N256("bf16");
  } else if constexpr (N == 128) {
    if constexpr (kHalf) SPATTN_WGMMA_RS_N128("f16");
    else SPATTN_WGMMA_RS_N128("bf16");
  } else {
    if constexpr (kHalf) SPATTN_WGMMA_RS_N64("f16");
    else SPATTN_WGMMA_RS_N64("bf16");
  }
}

/// d (+)= A·Bᵀ for a 64×32 A and a 64×32 B of s8 codes, both K-major in shared memory: the exact s32 products
/// (accumulate = 0: d = A·Bᵀ, so no register is written before the first k step — an initialization in registers
/// makes ptxas serialize the wgmma). d[0..31] in the m64n64 layout, passed as the accumulators of its two 32-column
/// halves lo (columns 0…31) and hi (32…63): per warp, the mma.sync m16n8 layout of columns 8a + ….
__device__ __forceinline__ void wgmma_ss_s8_n64(int (&lo)[16], int (&hi)[16], std::uint64_t a, std::uint64_t b,
                                                int accumulate) {
  asm volatile(
      "{.reg .pred p; setp.ne.b32 p, %34, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, "
      "%6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31}, %32, %33, p;}\n"
      : "+r"(lo[0]), "+r"(lo[1]), "+r"(lo[2]), "+r"(lo[3]), "+r"(lo[4]), "+r"(lo[5]), "+r"(lo[6]), "+r"(lo[7]), "+r"(lo[8]),
        "+r"(lo[9]), "+r"(lo[10]), "+r"(lo[11]), "+r"(lo[12]), "+r"(lo[13]), "+r"(lo[14]), "+r"(lo[15]), "+r"(hi[0]),
        "+r"(hi[1]), "+r"(hi[2]), "+r"(hi[3]), "+r"(hi[4]), "+r"(hi[5]), "+r"(hi[6]), "+r"(hi[7]), "+r"(hi[8]), "+r"(hi[9]),
        "+r"(hi[10]), "+r"(hi[11]), "+r"(hi[12]), "+r"(hi[13]), "+r"(hi[14]), "+r"(hi[15])
      : "l"(a), "l"(b), "r"(accumulate));
}

/// d[N/2] (+)= A·Bᵀ for a 64×32 A and an N×32 B of s8 codes (N = 64 or 128), both K-major in shared memory
/// (accumulate = 0: d = A·Bᵀ): the exact s32 products, left in d's registers as integer bits (read them with
/// __float_as_int), so one accumulator array serves the integer products and then their fp32 scores.
template <int N>
__device__ __forceinline__ void wgmma_ss_s8(float (&d)[N / 2], std::uint64_t a, std::uint64_t b, int accumulate) {
  static_assert(N == 64 || N == 128);
  std::uint32_t(&u)[N / 2] = reinterpret_cast<std::uint32_t(&)[N / 2]>(d);
  if constexpr (N == 128)
    asm volatile("{.reg .pred p; setp.ne.b32 p, %66, 0; wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8"
                 " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p;}\n"
                 : SPATTN_WGMMA_U32(0), SPATTN_WGMMA_U32(32)
                 : "l"(a), "l"(b), "r"(accumulate));
  else
    asm volatile("{.reg .pred p; setp.ne.b32 p, %34, 0; wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8"
                 " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;}\n"
                 : SPATTN_WGMMA_U32(0)
                 : "l"(a), "l"(b), "r"(accumulate));
}

#undef SPATTN_WGMMA_SS_N128
#undef SPATTN_WGMMA_SS_N64
#undef SPATTN_WGMMA_RS_N256
#undef SPATTN_WGMMA_RS_N128
#undef SPATTN_WGMMA_RS_N64
#undef SPATTN_WGMMA_D128
#undef SPATTN_WGMMA_D64
#undef SPATTN_WGMMA_D32
#undef SPATTN_WGMMA_D8
#undef SPATTN_WGMMA_U32
#undef SPATTN_WGMMA_U8

__device__ __forceinline__ void mbar_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{.reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p;}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
/// Arrives on `bar` when all of this thread's earlier cp.async copies have completed (the barrier's expected
/// count includes this arrival: .noinc).
__device__ __forceinline__ void cp_async_mbar_arrive(std::uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/// Makes this thread's completed shared-memory writes (cp.async included) visible to the async proxy (WGMMA).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/// Brings the line holding `p` into this SM's L1 (no register written, nothing waited for).
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p)); }
__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 1, 128;\n" ::: "memory"); }
/// Adds `bytes` to the transaction count the barrier's current phase waits for (no arrival).
__device__ __forceinline__ void mbar_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/// Tensor-memory-accelerator (TMA) copy of one box of a 4-D tensor map into shared memory at `dst`,
/// completing `bytes` of the barrier's transaction count; coordinates innermost first.
__device__ __forceinline__ void tma_load_4d(std::uint32_t dst, const void* map, int c0, int c1, int c2, int c3,
                                            std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
/// Named barrier `id` over `threads` threads that also ANDs `value` over them (every thread gets the result).
__device__ __forceinline__ bool bar_red_and(int id, int threads, bool value) {
  std::uint32_t out;
  asm volatile("{.reg .pred pi, po; setp.ne.u32 pi, %1, 0; bar.red.and.pred po, %2, %3, pi; selp.u32 %0, 1, 0, po;}\n"
               : "=r"(out)
               : "r"(static_cast<std::uint32_t>(value)), "r"(id), "r"(threads)
               : "memory");
  return out != 0;
}
/// Named barrier `id` (1…15; 0 is __syncthreads) over `threads` threads: wait for it / only arrive.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace spattn::cuda::detail
