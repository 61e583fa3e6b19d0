// The checker of other kernels (spattn/check.hpp): its float64 attention against the tests' independent fp64
// reference (exact_fp64), the reference's own output passing, planted faults failing at their (batch, head, row),
// the element-mask path agreeing with the tile-mask path, and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "common.hpp"
#include "spattn/check.hpp"
#include "spattn/reference/exact_attention.hpp"
#include "spattn/spattn.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn::test {
namespace {

struct Inputs {
  Problem p;
  HostTensor q, k, v;
  TileMask mask;
};

/// GQA 4:2, Nq < Nkv (bottom-right causal), lengths that are not tile multiples, a random 32×16 mask.
Inputs make_inputs(DType dtype, bool causal = true) {
  Inputs in;
  in.p.batch = 2;
  in.p.heads_q = 4;
  in.p.heads_kv = 2;
  in.p.seqlen_q = 150;
  in.p.seqlen_kv = 200;
  in.p.head_dim = 64;
  in.p.causal = causal;
  in.p.dtype = dtype;
  in.q = HostTensor(dtype, 2, 4, 150, 64);
  in.k = HostTensor(dtype, 2, 2, 200, 64);
  in.v = HostTensor(dtype, 2, 2, 200, 64);
  fill_random(in.q);
  fill_random(in.k);
  fill_random(in.v);
  in.mask = random_mask(MaskShape::of(in.p, 32, 16), 0.6);
  return in;
}

HostTensor reference_output(const Inputs& in) {
  HostTensor o(in.p.dtype, 2, 4, 150, 64);
  AttendOptions options;
  options.backend = "reference";
  attend(in.p, in.q.view(), in.k.view(), in.v.view(), in.mask, o.view(), options);
  return o;
}

TEST_CASE("check: exact_attention is the independent fp64 reference (exact_fp64)") {
  const Inputs in = make_inputs(DType::bf16);
  const std::vector<std::uint8_t> bitmap = in.mask.to_bitmap();
  const MaskAllowed allowed{in.p, in.mask};
  const std::vector<double> got = reference::exact_attention(
      in.p, in.q.view(), in.k.view(), in.v.view(),
      [&](std::int64_t b, std::int64_t h, std::int64_t i, std::uint8_t* keys) {
        for (std::int64_t j = 0; j < in.p.seqlen_kv; ++j) keys[j] = allowed(b, h, i, j);
      });
  const std::vector<double> want = exact_fp64(in.p, in.q, in.k, in.v, allowed);
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (std::size_t e = 0; e < got.size(); ++e) worst = std::max(worst, std::fabs(got[e] - want[e]));
  CHECK(worst < 1e-12);
}

TEST_CASE("check: the reference's output passes; a planted fault fails at its row") {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    CAPTURE(to_string(dtype));
    const Inputs in = make_inputs(dtype);
    HostTensor o = reference_output(in);
    CheckReport r = check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(), in.mask);
    CHECK(r.passed);
    CHECK(r.max_error == r.reference_error);
    CHECK(r.bound == 2 * r.reference_error + default_atol(dtype, dtype));
    CHECK(r.first_failure.batch == -1);
    CHECK(r.text().rfind("spattn check: PASS (tile mask 32x16", 0) == 0);

    o.set(1, 2, 77, 9, o.get(1, 2, 77, 9) + 0.25f);
    r = check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(), in.mask);
    CHECK_FALSE(r.passed);
    CHECK(r.failing_rows == 1);
    CHECK(r.first_failure.batch == 1);
    CHECK(r.first_failure.head == 2);
    CHECK(r.first_failure.row == 77);
    CHECK(r.first_failure.column == 9);
    CHECK(r.head_error[1 * 4 + 2] == r.max_error);
    CHECK(r.text().find("first failing: batch 1, head 2, row 77 (column 9") != std::string::npos);

    o.set(0, 3, 5, 0, NAN);
    r = check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(), in.mask, {1e6, 1e6});
    CHECK_FALSE(r.passed);
    CHECK(r.non_finite == 1);
    CHECK(std::isnan(r.max_error));
    CHECK(r.first_failure.row == 5);
  }
}

TEST_CASE("check: an element mask checks what the same tile mask checks") {
  const Inputs in = make_inputs(DType::bf16);
  const HostTensor o = reference_output(in);
  // The tile mask as elements, per query head, without the causal rule (check_attention applies it).
  const std::int64_t nq = in.p.seqlen_q, nkv = in.p.seqlen_kv;
  std::vector<std::uint8_t> elements(static_cast<std::size_t>(2 * 4 * nq * nkv));
  const std::vector<std::uint8_t> bitmap = in.mask.to_bitmap();
  const std::int64_t tq = in.mask.shape.num_q_tiles(), tk = in.mask.shape.num_k_tiles();
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 4; ++h)
      for (std::int64_t i = 0; i < nq; ++i)
        for (std::int64_t j = 0; j < nkv; ++j)
          elements[((b * 4 + h) * nq + i) * nkv + j] = bitmap[((b * 4 + h) * tq + i / 32) * tk + j / 16];
  const CheckReport tiles = check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(), in.mask);
  const CheckReport each = check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(),
                                           ElementMask{elements.data(), 2, 4});
  CHECK(each.passed);
  CHECK(each.mask_kind == "element mask");
  CHECK(each.head_error == tiles.head_error);  // one ref64
  // ref_low of the element path is the executor over 1-key tiles: the same rule, a different summation grouping
  CHECK(each.reference_error > 0);
  CHECK(each.reference_error < 2 * tiles.reference_error + 1e-4);
}

TEST_CASE("check: bad input") {
  Inputs in = make_inputs(DType::f32);
  const HostTensor o = reference_output(in);
  CHECK_THROWS_WITH_AS(check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(), in.mask, {0.5, {}}),
                       contains("check_attention factor: must be finite and >= 1, got 0.5"), Error);
  CHECK_THROWS_WITH_AS(check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(), in.mask, {2.0, -1.0}),
                       contains("check_attention atol: must be finite and >= 0"), Error);
  std::vector<std::uint8_t> all(static_cast<std::size_t>(150 * 200), 1);
  CHECK_THROWS_WITH_AS(check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(),
                                       ElementMask{all.data(), 1, 3}),
                       contains("check_attention mask: heads 3 is neither 1, Hkv (2) nor Hq (4)"), Error);
  CHECK_THROWS_WITH_AS(check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(), ElementMask{}),
                       contains("check_attention mask: no data"), Error);
  in.p.causal = false;  // the mask is causal
  CHECK_THROWS_AS(check_attention(in.p, in.q.view(), in.k.view(), in.v.view(), o.view(), in.mask), Error);
}

}  // namespace
}  // namespace spattn::test
