#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "common.hpp"
#include "spattn/online_softmax.hpp"

namespace spattn::test {
namespace {

/// Runs the online softmax over scores s (natural units) and values v (n × dv) in chunks of `chunk`.
std::vector<float> online(const std::vector<float>& s, const std::vector<float>& v, int dv, int chunk, float* lse2,
                          float scale) {
  SoftmaxState st;
  std::vector<float> acc(static_cast<std::size_t>(dv), 0.0f), x, p, out(static_cast<std::size_t>(dv));
  const int n = static_cast<int>(s.size());
  for (int c0 = 0; c0 < n; c0 += chunk) {
    const int m = std::min(chunk, n - c0);
    x.assign(s.begin() + c0, s.begin() + c0 + m);
    for (float& e : x) e = e == -INFINITY ? e : e * scale_log2(scale);
    p.resize(static_cast<std::size_t>(m));
    const float alpha = OnlineSoftmax::update(st, x.data(), m, p.data());
    for (int d = 0; d < dv; ++d) {
      float a = acc[static_cast<std::size_t>(d)] * alpha;
      for (int k = 0; k < m; ++k) a += p[static_cast<std::size_t>(k)] * v[static_cast<std::size_t>((c0 + k) * dv + d)];
      acc[static_cast<std::size_t>(d)] = a;
    }
  }
  *lse2 = OnlineSoftmax::finalize(st, acc.data(), dv, out.data());
  return out;
}

TEST_CASE("online softmax in chunks equals the fp64 softmax") {
  const int n = 1000, dv = 8;
  const float scale = 0.3f;
  std::vector<float> s(n), v(static_cast<std::size_t>(n * dv));
  for (auto& e : s) e = static_cast<float>(uniform(-20, 20));
  for (auto& e : v) e = static_cast<float>(uniform(-1, 1));
  s[17] = -INFINITY;  // a masked key contributes nothing
  double mx = -INFINITY;
  for (float e : s) mx = std::max(mx, static_cast<double>(e) * scale);
  double l = 0;
  std::vector<double> want(dv, 0.0);
  for (int j = 0; j < n; ++j) {
    if (s[j] == -INFINITY) continue;
    const double w = std::exp(static_cast<double>(s[j]) * scale - mx);
    l += w;
    for (int d = 0; d < dv; ++d) want[d] += w * v[static_cast<std::size_t>(j * dv + d)];
  }
  for (int chunk : {1, 7, 64, 1000}) {
    float lse2 = 0;
    const auto got = online(s, v, dv, chunk, &lse2, scale);
    for (int d = 0; d < dv; ++d) CHECK(got[d] == doctest::Approx(want[d] / l).epsilon(1e-5));
    CHECK(lse2 * kLn2 == doctest::Approx(mx + std::log(l)).epsilon(1e-6));
  }
}

TEST_CASE("merge of two halves equals one pass") {
  const int dv = 4;
  std::vector<float> xa = {1.0f, 5.0f, -3.0f}, xb = {7.5f, 2.0f};
  std::vector<float> va = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, vb = {-1, -2, -3, -4, 0.5f, 0.25f, 0, 1};
  auto fold = [&](const std::vector<float>& x, const std::vector<float>& v, SoftmaxState& st, std::vector<float>& acc) {
    std::vector<float> p(x.size());
    const float alpha = OnlineSoftmax::update(st, x.data(), static_cast<int>(x.size()), p.data());
    for (int d = 0; d < dv; ++d) {
      acc[d] *= alpha;
      for (std::size_t k = 0; k < x.size(); ++k) acc[d] += p[k] * v[k * dv + d];
    }
  };
  SoftmaxState a, b, all;
  std::vector<float> acc_a(dv, 0), acc_b(dv, 0), acc_all(dv, 0), out1(dv), out2(dv);
  fold(xa, va, a, acc_a);
  fold(xb, vb, b, acc_b);
  fold(xa, va, all, acc_all);
  fold(xb, vb, all, acc_all);
  OnlineSoftmax::merge(a, acc_a.data(), b, acc_b.data(), dv);
  CHECK(a.m == all.m);
  CHECK(a.l == doctest::Approx(all.l).epsilon(1e-6));
  const float l1 = OnlineSoftmax::finalize(a, acc_a.data(), dv, out1.data());
  const float l2 = OnlineSoftmax::finalize(all, acc_all.data(), dv, out2.data());
  CHECK(l1 == doctest::Approx(l2).epsilon(1e-6));
  // base-2 weights: max 7.5; row = softmax2([1, 5, -3, 7.5, 2]) · v
  double w[] = {std::exp2(1 - 7.5), std::exp2(5 - 7.5), std::exp2(-3 - 7.5), 1.0, std::exp2(2 - 7.5)};
  double sum = 0, o0 = 0;
  const float v0[] = {1, 5, 9, -1, 0.5f};
  for (int k = 0; k < 5; ++k) sum += w[k], o0 += w[k] * v0[k];
  CHECK(out1[0] == doctest::Approx(o0 / sum).epsilon(1e-6));
  CHECK(out2[0] == doctest::Approx(o0 / sum).epsilon(1e-6));
}

TEST_CASE("a row with no key finalizes to zeros and -inf; NaN propagates") {
  SoftmaxState st;
  float x[3] = {-INFINITY, -INFINITY, -INFINITY}, p[3];
  CHECK(OnlineSoftmax::update(st, x, 3, p) == 1.0f);
  CHECK(p[0] == 0.0f);
  float acc[2] = {0, 0}, out[2] = {9, 9};
  CHECK(OnlineSoftmax::finalize(st, acc, 2, out) == -INFINITY);
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == 0.0f);
  SoftmaxState bad;
  float y[2] = {1.0f, NAN}, q[2];
  OnlineSoftmax::update(bad, y, 2, q);
  float acc2[1] = {1.0f}, out2[1];
  OnlineSoftmax::finalize(bad, acc2, 1, out2);
  CHECK(std::isnan(out2[0]));
}

}  // namespace
}  // namespace spattn::test
