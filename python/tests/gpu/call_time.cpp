// The C++ side of the Python call-overhead measurement (run_gpu_checks.py): host time of one call
// of spattn::sparse_attention (the public API: synchronous) and of cuda::Plan::run (enqueue only),
// on CUDA tensors of a random causal bf16 problem. Each call is timed alone (the GPU idle before
// it), median of `iters`; the Python side times its calls the same way. Prints one JSON object.
//   spattn_python_call_time METHOD B H N D ITERS
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
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
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
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
  try {
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
    // A call the GPU does not cover prints null (and why on stderr) instead of a time.
    const auto time_or_null = [&](const char* what, auto&& call) -> std::string {
      try {
        call();  // warm-up
        char text[32];
        std::snprintf(text, sizeof text, "%.1f", median_us(iters, call));
        return text;
      } catch (const Error& e) {
        std::fprintf(stderr, "%s: %s\n", what, e.what());
        return "null";
      }
    };
    const std::string public_us = time_or_null("sparse_attention", [&] {
      sparse_attention(config, w.problem, q.view(), k.view(), v.view(), o.view());
    });
    std::unique_ptr<cuda::Plan> plan;
    const std::string plan_us = time_or_null("cuda::Plan", [&] {
      if (!plan) plan = std::make_unique<cuda::Plan>(config, w.problem);
      plan->run(q.view(), k.view(), v.view(), o.view(), nullptr);
    });
    std::printf("{\"method\": \"%s\", \"causal\": %s, \"public_us\": %s, \"plan_us\": %s}\n",
                method.c_str(), w.problem.causal ? "true" : "false", public_us.c_str(),
                plan_us.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spattn_python_call_time: %s\n", e.what());
    return 1;
  }
  return 0;
}
