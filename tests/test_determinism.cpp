// The reference is deterministic: identical output bits for 1 thread and for all threads, run after run.
#include <doctest/doctest.h>
#include <tbb/global_control.h>

#include <cstring>

#include "common.hpp"
#include "spattn/spattn.hpp"

namespace spattn::test {
namespace {

TEST_CASE("reference output bits do not depend on the thread count") {
  Problem p;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.seqlen_q = p.seqlen_kv = 700;
  p.head_dim = 64;
  p.causal = true;
  p.dtype = DType::bf16;
  HostTensor q(DType::bf16, 1, 4, 700, 64), k(DType::bf16, 1, 2, 700, 64), v(DType::bf16, 1, 2, 700, 64);
  fill_random(q, 2.0);
  fill_random(k, 2.0);
  fill_random(v);
  const TileMask mask = random_mask(MaskShape::of(p, 64, 16), 0.5);
  auto run = [&](int threads) {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    HostTensor o(DType::f32, 1, 4, 700, 64);
    o.poison();
    attend(p, q.view(), k.view(), v.view(), mask, o.view());
    return o;
  };
  const HostTensor one = run(1), all = run(8), again = run(8);
  CHECK(one.all_finite());
  CHECK(std::memcmp(one.data(), all.data(), one.size_bytes()) == 0);
  CHECK(std::memcmp(all.data(), again.data(), all.size_bytes()) == 0);
}

}  // namespace
}  // namespace spattn::test
