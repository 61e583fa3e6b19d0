// Shared by the harnesses: small workloads (cached) on which a loaded configuration or mask is run end to end,
// so the code after a successful load is exercised too. Every output of a call that succeeds must be finite.
#pragma once

#include <tbb/global_control.h>

#include <cmath>
#include <map>

#include "spattn/spattn.hpp"
#include "spattn/tensor.hpp"
#include "spattn/workload.hpp"

namespace spattn::fuzz {

/// One thread: the harnesses measure coverage, not speed, and the reference's results do not depend on it.
inline void single_thread() { static tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1); }

/// Traps (a crash libFuzzer reports) unless every value of `t` is finite.
inline void require_finite(const HostTensor& t) {
  if (!t.all_finite()) __builtin_trap();
}

/// A 200-token llm workload with `heads` query heads and one KV head (D = 64), built once per head count.
inline const Workload& workload_with(std::int64_t heads) {
  static std::map<std::int64_t, Workload> cache;
  auto it = cache.find(heads);
  if (it == cache.end()) {
    WorkloadSpec s;
    s.seqlen = 200;
    s.heads_q = heads;
    s.heads_kv = 1;
    s.head_dim = 64;
    it = cache.emplace(heads, make_workload(s)).first;
  }
  return it->second;
}

/// sparse_attention() of `config` on the workload with `heads` query heads; throws spattn::Error like the call.
inline void estimate_small(const MethodConfig& config, std::int64_t heads) {
  single_thread();
  const Workload& w = workload_with(heads);
  HostTensor o(DType::f32, 1, heads, w.problem.seqlen_q, w.problem.head_dim);
  sparse_attention(config, w.problem, w.q.view(), w.k.view(), w.v.view(), o.view());
  require_finite(o);
}

}  // namespace spattn::fuzz
