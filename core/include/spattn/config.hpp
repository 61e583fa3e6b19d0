// Host/device qualifiers: everything in core/ compiles for the host and for CUDA/HIP devices.
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define SPATTN_HD __host__ __device__
#else
#define SPATTN_HD
#endif

#define SPATTN_INLINE SPATTN_HD inline
