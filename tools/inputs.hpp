// Loading attention inputs from .npy files for `spattn run --q/--k/--v`.
#pragma once

#include <string>

#include "spattn/tensor.hpp"
#include "spattn/workload.hpp"

namespace spattn::cli {

struct FileInputs {
  std::string q, k, v;
  Layout layout = Layout::bhnd;
  bool bf16 = false;  ///< interpret '<u2' arrays as bf16 bit patterns
  bool causal = true;
};

/// One 4-d [B,H,N,D] (in `layout`) or 3-d [H,N,D] array: '<f4', '<f2', or '<u2' as bf16 when `bf16`; with
/// `finite`, NaN or infinity is an error. Errors name `what` and the file.
HostTensor load_tensor(const std::string& path, const char* what, Layout layout, bool bf16, bool finite = true);

/// Reads Q, K, V (4-d [B,H,N,D] in `layout`, or 3-d [H,N,D] with B = 1; '<f4', '<f2', or '<u2' as bf16)
/// and checks their shapes agree and their values are finite. Errors name the file and the problem.
Workload load_inputs(const FileInputs& files);

}  // namespace spattn::cli
