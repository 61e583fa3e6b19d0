// INT8 quantization (core/include/spattn/quant.hpp) and the executor's quantized compute mode, checked
// against integer arithmetic done independently in the test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "common.hpp"
#include "spattn/online_softmax.hpp"
#include "spattn/quant.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace spattn::test {
namespace {

TEST_CASE("int8 codes: round half away from zero, clamp, exact near .5, NaN to 0") {
  CHECK(int8_code(2.5f, 1.0f) == 3);
  CHECK(int8_code(-2.5f, 1.0f) == -3);
  CHECK(int8_code(0.49999997f, 1.0f) == 0);  // floor(t + 0.5) would give 1
  CHECK(int8_code(1000.0f, 1.0f) == 127);
  CHECK(int8_code(-1000.0f, 1.0f) == -127);
  CHECK(int8_code(NAN, 1.0f) == 0);
  const float delta = int8_block_scale(2.54f);  // 0.02 + 1e-7
  CHECK(delta == 2.54f / 127.0f + 1e-7f);
  CHECK(int8_code(2.54f, delta) == 127);  // |x / δ| < 127 thanks to the 1e-7
  CHECK(int8_code(-2.54f, delta) == -127);
  CHECK(int8_code(1.27f, delta) == 63);   // 63.4997…
  CHECK(int8_code(0.0f, int8_block_scale(0.0f)) == 0);
}

TEST_CASE("int8 mode = softmax of the exactly dequantized integer scores (fp64 reference)") {
  Problem p;
  p.heads_q = 2;
  p.heads_kv = 1;
  p.seqlen_q = 150;
  p.seqlen_kv = 200;
  p.head_dim = 64;
  p.causal = true;
  HostTensor q(DType::f32, 1, 2, 150, 64), k(DType::f32, 1, 1, 200, 64), v(DType::f32, 1, 1, 200, 64);
  fill_random(q, 2.0);
  fill_random(k, 2.0);
  fill_random(v);
  for (std::int64_t j = 0; j < 200; ++j) k.set(0, 0, j, 5, k.get(0, 0, j, 5) + 3.0f);  // a mean to smooth away
  AttendOptions opt;
  opt.qk_int8 = true;
  opt.quant_block_q = 64;
  opt.quant_block_k = 32;
  HostTensor o(DType::f32, 1, 2, 150, 64);
  o.poison();
  const TileMask mask = TileMask::dense(MaskShape::of(p, 64, 32));
  attend(p, q.view(), k.view(), v.view(), mask, o.view(), opt);

  // Independent construction: K' = K − mean (f32), block amax scales, codes, int64 dot products.
  std::vector<float> mean(64, 0.0f);
  for (std::int64_t j = 0; j < 200; ++j)
    for (int e = 0; e < 64; ++e) mean[static_cast<std::size_t>(e)] += k.get(0, 0, j, e);
  for (auto& m : mean) m /= 200.0f;
  std::vector<float> ks(200 * 64);
  for (std::int64_t j = 0; j < 200; ++j)
    for (int e = 0; e < 64; ++e) ks[static_cast<std::size_t>(j * 64 + e)] = k.get(0, 0, j, e) - mean[static_cast<std::size_t>(e)];
  auto block_scale = [](auto get, std::int64_t first, std::int64_t last) {
    float amax = 0;
    for (std::int64_t r = first; r < last; ++r)
      for (int e = 0; e < 64; ++e) amax = std::max(amax, std::fabs(get(r, e)));
    return int8_block_scale(amax);
  };
  const double c0 = double(scale_log2(p.softmax_scale()));
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 150; i += 7) {
      const float dq = block_scale([&](std::int64_t r, int e) { return q.get(0, h, r, e); }, i / 64 * 64, std::min<std::int64_t>(i / 64 * 64 + 64, 150));
      std::vector<double> x;
      const std::int64_t visible = i + 50 + 1;
      for (std::int64_t j = 0; j < visible; ++j) {
        const float dk = block_scale([&](std::int64_t r, int e) { return ks[static_cast<std::size_t>(r * 64 + e)]; }, j / 32 * 32, std::min<std::int64_t>(j / 32 * 32 + 32, 200));
        std::int64_t acc = 0;
        for (int e = 0; e < 64; ++e) acc += std::int64_t{int8_code(q.get(0, h, i, e), dq)} * int8_code(ks[static_cast<std::size_t>(j * 64 + e)], dk);
        x.push_back(double(acc) * double(float(c0) * (dq * dk)));
      }
      const double mx = *std::max_element(x.begin(), x.end());
      double l = 0;
      std::vector<double> out(64, 0.0);
      for (std::int64_t j = 0; j < visible; ++j) {
        const double w = std::exp2(x[static_cast<std::size_t>(j)] - mx);
        l += w;
        for (int e = 0; e < 64; ++e) out[static_cast<std::size_t>(e)] += w * v.get(0, 0, j, e);
      }
      for (int e = 0; e < 64; ++e) REQUIRE(std::fabs(o.get(0, h, i, e) - out[static_cast<std::size_t>(e)] / l) < 2e-5);
    }
}

TEST_CASE("int8 mode stays close to exact attention on the llm workload") {
  WorkloadSpec s;
  s.seqlen = 700;
  s.heads_q = 2;
  s.heads_kv = 1;
  s.head_dim = 128;
  s.seed = test_seed();
  const Workload w = make_workload(s);
  HostTensor exact(DType::f32, 1, 2, 700, 128), quant = exact;
  attend_dense(w.problem, w.q.view(), w.k.view(), w.v.view(), exact.view());
  AttendOptions opt;
  opt.qk_int8 = true;
  attend_dense(w.problem, w.q.view(), w.k.view(), w.v.view(), quant.view(), opt);
  double diff = 0, norm = 0;
  const auto a = quant.to_float(), b = exact.to_float();
  for (std::size_t i = 0; i < a.size(); ++i) diff += std::fabs(double(a[i]) - b[i]), norm += std::fabs(double(b[i]));
  CAPTURE(diff / norm);
  CHECK(diff / norm < 3e-2);
  CHECK(diff / norm > 0);  // it really ran the quantized path
}

}  // namespace
}  // namespace spattn::test
