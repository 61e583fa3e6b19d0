#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "spattn/error.hpp"
#include "spattn/problem.hpp"

namespace spattn {
namespace {

Problem good() {
  Problem p;
  p.batch = 2;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.seqlen_q = 100;
  p.seqlen_kv = 300;
  p.head_dim = 128;
  p.causal = true;
  return p;
}

std::string error_of(const Problem& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("Problem::validate accepts good problems and names every bad argument") {
  CHECK(error_of(good()).empty());
  CHECK(good().softmax_scale() == doctest::Approx(1.0 / std::sqrt(128.0)));
  struct Bad {
    void (*mutate)(Problem&);
    const char* names;
  };
  const Bad bad[] = {
      {[](Problem& p) { p.batch = 0; }, "batch"},
      {[](Problem& p) { p.heads_q = 7; }, "heads_q"},
      {[](Problem& p) { p.heads_kv = 0; }, "heads_kv"},
      {[](Problem& p) { p.seqlen_q = 0; }, "seqlen_q"},
      {[](Problem& p) { p.seqlen_kv = -3; }, "seqlen_kv"},
      {[](Problem& p) { p.head_dim = 16; }, "head_dim"},
      {[](Problem& p) { p.head_dim = 512; }, "head_dim"},
      {[](Problem& p) { p.head_dim = 100; }, "head_dim"},
      {[](Problem& p) { p.head_dim_v = 20; }, "head_dim_v"},
      {[](Problem& p) { p.scale = -1.0f; }, "scale"},
      {[](Problem& p) { p.scale = NAN; }, "scale"},
      {[](Problem& p) { p.seqlen_q = 400; }, "seqlen_q"},  // causal with Nq > Nkv
      {[](Problem& p) { p.cu_seqlens_q = {0, 50, 100}; }, "cu_seqlens"},
      {[](Problem& p) {
         p.cu_seqlens_q = {0, 50, 150};
         p.cu_seqlens_kv = {0, 300};
       },
       "cu_seqlens_kv"},
      {[](Problem& p) {
         p.cu_seqlens_q = {0, 60, 50};
         p.cu_seqlens_kv = {0, 300, 400};
       },
       "cu_seqlens_q"},
      {[](Problem& p) {
         p.cu_seqlens_q = {0, 50, 150};
         p.cu_seqlens_kv = {0, 40, 340};
       },
       "seqlen_q"},  // sequence 0: 50 queries > 40 keys, causal
  };
  for (const Bad& b : bad) {
    Problem p = good();
    b.mutate(p);
    const std::string msg = error_of(p);
    CAPTURE(msg);
    CHECK(msg.find(b.names) != std::string::npos);
  }
  Problem cross = good();
  cross.causal = false;
  cross.seqlen_q = 400;  // non-causal cross-attention may have Nq > Nkv
  CHECK(error_of(cross).empty());
  Problem varlen = good();
  varlen.cu_seqlens_q = {0, 50, 150};
  varlen.cu_seqlens_kv = {0, 60, 360};
  CHECK(error_of(varlen).empty());
  CHECK(varlen.seqlen_q_of(1) == 100);
  CHECK(varlen.causal_offset(1) == 200);
  CHECK(varlen.visible_keys(0, 0) == 11);
}

TEST_CASE("Problem::validate checks the views") {
  Problem p = good();
  float dummy[1];
  const TensorView q = TensorView::dense(dummy, DType::f32, Layout::bhnd, 2, 8, 100, 128);
  const TensorView k = TensorView::dense(dummy, DType::f32, Layout::bnhd, 2, 2, 300, 128);
  CHECK_NOTHROW(p.validate(q, k, k, q));
  TensorView null_q = q;
  null_q.data = nullptr;
  CHECK_THROWS_WITH_AS(p.validate(null_q, k, k, q), doctest::Contains("q: data pointer is null"), Error);
  TensorView half_k = k;
  half_k.dtype = DType::f16;
  CHECK_THROWS_WITH_AS(p.validate(q, half_k, k, q), doctest::Contains("k: dtype f16"), Error);
  TensorView overlapping = k;
  overlapping.stride_n = 64;
  CHECK_THROWS_WITH_AS(p.validate(q, k, overlapping, q), doctest::Contains("v: stride_n"), Error);
  CHECK_THROWS_AS(parse_dtype("f64"), Error);
  CHECK(parse_dtype("bfloat16") == DType::bf16);
}

}  // namespace
}  // namespace spattn
