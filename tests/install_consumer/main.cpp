// The README's usage example. The install test builds it against the installed package
// (find_package(spattn)) and runs it; README.md shows this file verbatim (checked by the readme test).
#include <spattn/spattn.hpp>
#include <spattn/tensor.hpp>

#include <cmath>
#include <cstdio>
#include <random>

int main() {
  spattn::Problem p;
  p.heads_q = 8;
  p.heads_kv = 2;  // GQA: 4 query heads share each KV head
  p.seqlen_q = p.seqlen_kv = 1000;
  p.head_dim = 128;
  p.causal = true;
  p.dtype = spattn::DType::bf16;

  spattn::HostTensor q(p.dtype, 1, 8, 1000, 128), k(p.dtype, 1, 2, 1000, 128), v(p.dtype, 1, 2, 1000, 128);
  std::mt19937 gen(42);
  std::normal_distribution<float> normal;
  for (auto* t : {&q, &k, &v})
    for (std::int64_t h = 0; h < t->heads(); ++h)
      for (std::int64_t n = 0; n < 1000; ++n)
        for (std::int64_t d = 0; d < 128; ++d) t->set(0, h, n, d, normal(gen));

  // A sink + local mask on 128×128 tiles: every query tile keeps key tile 0 and its diagonal tile.
  const auto shape = spattn::MaskShape::of(p, 128, 128);
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(shape.num_rows()));
  for (std::int64_t r = 0; r < shape.num_rows(); ++r)
    rows[static_cast<std::size_t>(r)] = {0, static_cast<std::int32_t>(r % shape.num_q_tiles())};
  const auto mask = spattn::TileMask::from_rows(shape, rows);

  spattn::HostTensor sparse(spattn::DType::f32, 1, 8, 1000, 128), dense(spattn::DType::f32, 1, 8, 1000, 128);
  spattn::attend(p, q.view(), k.view(), v.view(), mask, sparse.view());
  spattn::attend_dense(p, q.view(), k.view(), v.view(), dense.view());

  // Rows of the first two query tiles see only kept keys, so there sparse == dense exactly.
  double max_diff = 0;
  for (std::int64_t n = 0; n < 256; ++n)
    for (std::int64_t d = 0; d < 128; ++d) max_diff = std::fmax(max_diff, std::fabs(sparse.get(0, 3, n, d) - dense.get(0, 3, n, d)));
  std::printf("density %.3f, max |sparse - dense| on rows 0..255: %g\n", mask.stats().density, max_diff);

  // A method end to end: SpargeAttn at its default (the authors' top-k entry point) estimates the mask,
  // then attends over it. estimate() alone gives the same mask; any method's config works the same way.
  spattn::HostTensor out(spattn::DType::f32, 1, 8, 1000, 128);
  const spattn::MethodConfig sparge = spattn::default_config("sparge");
  const spattn::SparseAttentionResult r = spattn::sparse_attention(sparge, p, q.view(), k.view(), v.view(), out.view());
  const spattn::Estimate e = spattn::estimate(sparge, p, q.view(), k.view());
  std::printf("%s on %s: density %.3f\n", r.estimate.method.c_str(), r.attend.backend.c_str(),
              r.estimate.mask.stats().density);
  return max_diff == 0.0 && e.mask.tiles == r.estimate.mask.tiles && r.estimate.mask.stats().density < 1.0 ? 0 : 1;
}
