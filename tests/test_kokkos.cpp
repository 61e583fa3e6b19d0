// The Kokkos backend beyond the shared conformance table: how the dispatcher picks it and what it says it does not
// cover. (Its outputs and masks are checked against the reference by tests/conformance, which runs every linked
// backend.)
#include <doctest/doctest.h>

#include "common.hpp"
#include "spattn/spattn.hpp"
#include "spattn/tensor.hpp"

namespace spattn::test {
namespace {

struct SmallCall {
  Problem p;
  HostTensor q, k, v, o;
  TileMask mask;
  SmallCall() {
    p.heads_q = 2;
    p.heads_kv = 1;
    p.seqlen_q = p.seqlen_kv = 100;
    p.head_dim = 64;
    p.causal = true;
    p.dtype = DType::bf16;
    q = HostTensor(p.dtype, 1, 2, 100, 64);
    k = HostTensor(p.dtype, 1, 1, 100, 64);
    v = HostTensor(p.dtype, 1, 1, 100, 64);
    o = HostTensor(DType::f32, 1, 2, 100, 64);
    fill_random(q);
    fill_random(k);
    fill_random(v);
    mask = TileMask::dense(MaskShape::of(p, 64, 32));
  }
};

TEST_CASE("kokkos: host tensors run on the reference by default, on Kokkos when asked for by name") {
  SmallCall c;
  AttendOptions options;
  CHECK(attend(c.p, c.q.view(), c.k.view(), c.v.view(), c.mask, c.o.view(), options).backend == "reference");
  options.backend = "kokkos";
  CHECK(attend(c.p, c.q.view(), c.k.view(), c.v.view(), c.mask, c.o.view(), options).backend == "kokkos");
  EstimateOptions eo;
  CHECK(estimate(sparge::Config{}, c.p, c.q.view(), c.k.view(), eo).backend == "reference");
  eo.backend = "kokkos";
  CHECK(estimate(sparge::Config{}, c.p, c.q.view(), c.k.view(), eo).backend == "kokkos");
}

TEST_CASE("kokkos: what it does not cover is said in words, and asking for it fails with those words") {
  SmallCall c;
  AttendOptions options;
  options.backend = "kokkos";
  options.qk_int8 = true;
  const auto attend_call = [&] { attend(c.p, c.q.view(), c.k.view(), c.v.view(), c.mask, c.o.view(), options); };
  CHECK_THROWS_WITH_AS(attend_call(), doctest::Contains("qk_int8"), Error);
  options.qk_int8 = false;
  options.pv_threshold = 5.0f;
  CHECK_THROWS_WITH_AS(attend_call(), doctest::Contains("PV-skip"), Error);
  EstimateOptions eo;
  eo.backend = "kokkos";
  CHECK_THROWS_WITH_AS(estimate(sale::Config{}, c.p, c.q.view(), c.k.view(), eo), doctest::Contains("no sale estimator"),
                       Error);
  for (const auto& be : backends())
    if (be->name() == "kokkos") {
      AttendOptions auto_options;
      const auto why = be->not_supported_reasons(c.p, c.q.view(), c.k.view(), c.v.view(), c.mask, c.o.view(), auto_options);
      REQUIRE(why.size() == 1);
      CHECK(why[0].find("options.backend = \"kokkos\"") != std::string::npos);
    }
}

}  // namespace
}  // namespace spattn::test
