// The C++ side of the Python call-overhead measurement (run_gpu_checks.py): host time of one call of
// spattn::sparse_attention (the public API: synchronous) and of cuda::Plan::run (enqueue only), on CUDA tensors of
// a random causal bf16 problem. Each call is timed alone (the GPU idle before it), median of `iters`; the Python
// side times its calls the same way. Prints one JSON object.
//   spattn_python_call_time METHOD B H N D ITERS
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "spattn/cuda/backend.hpp"
#include "spattn/cuda/plan.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

using namespace spattn;

namespace {

template <class F>
double median_us(int iters, F&& call) {
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    if (cudaDeviceSynchronize() != cudaSuccess) std::abort();
    const auto t0 = std::chrono::steady_clock::now();
    call();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s METHOD B H N D ITERS\n", argv[0]);
    return 2;
  }
  const std::string method = argv[1];
  WorkloadSpec spec;
  spec.kind = WorkloadKind::llm;  // causal
  spec.batch = std::atoll(argv[2]);
  spec.heads_q = spec.heads_kv = std::atoll(argv[3]);
  spec.seqlen = std::atoll(argv[4]);
  spec.head_dim = std::atoll(argv[5]);
  const int iters = std::atoi(argv[6]);
  const Workload w = make_workload(spec);
  cuda::DeviceTensor q(w.q), k(w.k), v(w.v), o(w.q);
  const MethodConfig config = default_config(method);
  const auto run_public = [&] { sparse_attention(config, w.problem, q.view(), k.view(), v.view(), o.view()); };
  run_public();  // warm-up
  const double public_us = median_us(iters, run_public);
  cuda::Plan plan(config, w.problem);
  const auto run_plan = [&] { plan.run(q.view(), k.view(), v.view(), o.view(), nullptr); };
  run_plan();
  const double plan_us = median_us(iters, run_plan);
  std::printf("{\"method\": \"%s\", \"causal\": %s, \"public_us\": %.1f, \"plan_us\": %.1f}\n", method.c_str(),
              w.problem.causal ? "true" : "false", public_us, plan_us);
  return 0;
}
