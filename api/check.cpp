// The checker of other kernels' outputs (definition and rule: api/include/spattn/check.hpp).
#include "spattn/check.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "spattn/error.hpp"
#include "spattn/reference/exact_attention.hpp"
#include "spattn/spattn.hpp"
#include "spattn/tensor.hpp"
#include "spattn/tensor_rows.hpp"

namespace spattn {
namespace {

void validate_call(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                   const TensorView& out, const CheckOptions& options) {
  p.validate(q, k, v, out);
  require(!p.varlen(), "check_attention: variable-length batches are not checked (check each sequence alone)");
  for (const auto& [name, t] : {std::pair{"q", &q}, {"k", &k}, {"v", &v}, {"out", &out}})
    require(t->memory == Memory::host, "check_attention: ", name, " must be in host memory, got ",
            to_string(t->memory), " (copy it to the host; the checker runs on the CPU reference)");
  require(std::isfinite(options.factor) && options.factor >= 1.0, "check_attention factor: must be finite and >= 1, got ",
          options.factor);
  require(!options.atol || (std::isfinite(*options.atol) && *options.atol >= 0.0),
          "check_attention atol: must be finite and >= 0, got ", options.atol.value_or(0.0));
}

/// Row i of a (batch, head) of an element pattern `row_keys` with the causal rule applied on top.
void apply_causal(const Problem& p, std::int64_t i, std::uint8_t* allowed) {
  if (!p.causal) return;
  const std::int64_t last = i + p.causal_offset(0);  // keys j <= last are visible (bottom-right alignment)
  for (std::int64_t j = std::max<std::int64_t>(last + 1, 0); j < p.seqlen_kv; ++j) allowed[j] = 0;
}

reference::RowMask row_mask_of(const Problem& p, const TileMask& mask, const std::vector<std::uint8_t>& bitmap) {
  return [&p, &mask, &bitmap](std::int64_t b, std::int64_t h, std::int64_t i, std::uint8_t* allowed) {
    const std::int64_t tk = mask.shape.num_k_tiles();
    const std::uint8_t* tiles =
        bitmap.data() + mask.row_index(b, mask.mask_head_of(h, p.heads_q), i / mask.shape.tile_q) * tk;
    for (std::int64_t j = 0; j < p.seqlen_kv; ++j) allowed[j] = tiles[j / mask.shape.tile_k] != 0;
    apply_causal(p, i, allowed);
  };
}

reference::RowMask row_mask_of(const Problem& p, const ElementMask& mask) {
  return [&p, mask](std::int64_t b, std::int64_t h, std::int64_t i, std::uint8_t* allowed) {
    const std::int64_t mb = mask.batch == 1 ? 0 : b;
    const std::int64_t mh = mask.heads == 1 ? 0 : mask.heads == p.heads_q ? h : p.kv_head_of(h);
    const std::uint8_t* row = mask.allowed + ((mb * mask.heads + mh) * p.seqlen_q + i) * p.seqlen_kv;
    for (std::int64_t j = 0; j < p.seqlen_kv; ++j) allowed[j] = row[j] != 0;
    apply_causal(p, i, allowed);
  };
}

/// A [B, Hq, Nq, Dv] view's rows as fp32 (its dtype's values exactly), row-major.
std::vector<float> rows_of(const Problem& p, const TensorView& t, std::int64_t row_step = 1) {
  const std::int64_t dv = p.dim_v();
  std::vector<float> out(static_cast<std::size_t>(p.batch * p.heads_q * p.seqlen_q * dv));
  float* dst = out.data();
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i, dst += dv) load_row(t, row_offset(t, p, true, b, h, i * row_step), dv, dst);
  return out;
}

AttendOptions on_reference() {
  AttendOptions options;
  options.backend = "reference";
  return options;
}

/// ref_low of an element mask: every query row repeated over its own tile of MaskShape::kMinTileQ rows whose key
/// tiles (tile_k 1) are the row's visible keys, causality included, so the executor sees exactly that row's set.
std::vector<float> low_precision_rows(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                                      DType out_dtype, const reference::RowMask& allowed) {
  constexpr std::int32_t kRepeat = MaskShape::kMinTileQ;
  Problem wide = p;
  wide.seqlen_q = p.seqlen_q * kRepeat;
  wide.causal = false;
  wide.scale = p.softmax_scale();
  const std::int64_t d = p.head_dim;
  HostTensor wide_q(q.dtype, p.batch, p.heads_q, wide.seqlen_q, d);
  std::vector<float> row(static_cast<std::size_t>(d));
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i) {
        load_row(q, row_offset(q, p, true, b, h, i), d, row.data());
        for (std::int64_t r = 0; r < kRepeat; ++r)
          store_row(wide_q.view(), row_offset(wide_q.view(), wide, true, b, h, i * kRepeat + r), d, row.data());
      }
  MaskShape shape = MaskShape::of(wide, kRepeat, 1);
  std::vector<std::uint8_t> bitmap(static_cast<std::size_t>(shape.num_rows() * shape.num_k_tiles()));
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads_q; ++h)
      for (std::int64_t i = 0; i < p.seqlen_q; ++i)
        allowed(b, h, i, bitmap.data() + ((b * p.heads_q + h) * p.seqlen_q + i) * p.seqlen_kv);
  const TileMask mask = TileMask::from_bitmap(shape, bitmap);
  HostTensor wide_out(out_dtype, p.batch, p.heads_q, wide.seqlen_q, p.dim_v());
  attend(wide, wide_q.view(), k, v, mask, wide_out.view(), on_reference());
  return rows_of(p, wide_out.view(), kRepeat);
}

double max_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

CheckReport compare(const Problem& p, const TensorView& out, const std::vector<double>& ref64,
                    const std::vector<float>& low, const CheckOptions& options, DType input_dtype) {
  CheckReport r;
  r.out_dtype = out.dtype;
  r.input_dtype = input_dtype;
  r.batch = p.batch;
  r.heads = p.heads_q;
  r.seqlen_q = p.seqlen_q;
  r.dim_v = p.dim_v();
  r.factor = options.factor;
  r.atol = options.atol.value_or(default_atol(out.dtype, input_dtype));
  const std::vector<float> got = rows_of(p, out);
  const std::int64_t dv = r.dim_v, per_head = p.seqlen_q * dv, heads = p.batch * p.heads_q;
  r.head_error.assign(static_cast<std::size_t>(heads), 0.0);
  r.head_reference_error.assign(static_cast<std::size_t>(heads), 0.0);
  for (std::int64_t bh = 0; bh < heads; ++bh)
    for (std::int64_t e = bh * per_head; e < (bh + 1) * per_head; ++e) {
      r.head_error[bh] = max_nan(r.head_error[bh], std::fabs(static_cast<double>(got[e]) - ref64[e]));
      r.head_reference_error[bh] = max_nan(r.head_reference_error[bh], std::fabs(static_cast<double>(low[e]) - ref64[e]));
      if (!std::isfinite(got[e])) ++r.non_finite;
    }
  for (std::int64_t bh = 0; bh < heads; ++bh) {
    r.max_error = max_nan(r.max_error, r.head_error[bh]);
    r.reference_error = max_nan(r.reference_error, r.head_reference_error[bh]);
  }
  r.bound = r.factor * r.reference_error + r.atol;
  for (std::int64_t row = 0; row < heads * p.seqlen_q; ++row) {
    bool failing = false;
    for (std::int64_t c = 0; c < dv; ++c) {
      const std::int64_t e = row * dv + c;
      if (std::fabs(static_cast<double>(got[e]) - ref64[e]) <= r.bound) continue;  // NaN: not <=, fails
      if (!failing && r.first_failure.batch < 0)
        r.first_failure = {row / (p.heads_q * p.seqlen_q), row / p.seqlen_q % p.heads_q, row % p.seqlen_q, c,
                           static_cast<double>(got[e]), ref64[e]};
      failing = true;
    }
    r.failing_rows += failing;
  }
  r.passed = r.failing_rows == 0;
  return r;
}

}  // namespace

double default_atol(DType out, DType inputs) {
  return out == DType::f32 && inputs == DType::f32 ? 1e-5 : 1e-4;
}

std::string CheckReport::text() const {
  std::ostringstream s;
  s << std::setprecision(3) << std::scientific;
  s << "spattn check: " << (passed ? "PASS" : "FAIL") << " (" << mask_kind << ", " << to_string(input_dtype)
    << " inputs, " << to_string(out_dtype) << " output, B " << batch << ", Hq " << heads << ", Nq " << seqlen_q
    << ", Dv " << dim_v << ")\n";
  s << "rule: max|out - ref64| <= " << std::defaultfloat << factor << std::scientific
    << " * max|ref_low - ref64| + atol = " << std::defaultfloat << factor << std::scientific << " * "
    << reference_error << " + " << atol << " = " << bound << "\n";
  s << "max|out - ref64| = " << max_error << "; " << failing_rows << " failing row" << (failing_rows == 1 ? "" : "s")
    << "; " << non_finite << " non-finite output element" << (non_finite == 1 ? "" : "s") << "\n";
  if (first_failure.batch >= 0)
    s << "first failing: batch " << first_failure.batch << ", head " << first_failure.head << ", row "
      << first_failure.row << " (column " << first_failure.column << ": out " << first_failure.got << ", ref64 "
      << first_failure.want << ")\n";
  s << "per (batch, head): max|out - ref64| (max|ref_low - ref64|)\n";
  for (std::int64_t b = 0; b < batch; ++b) {
    s << "  batch " << b << ":";
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::size_t i = static_cast<std::size_t>(b * heads + h);
      s << (h % 4 == 0 && h > 0 ? "\n          " : "") << "  h" << h << " " << head_error[i] << " ("
        << head_reference_error[i] << ")";
    }
    s << "\n";
  }
  return s.str();
}

CheckReport check_attention(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                            const TensorView& out, const TileMask& mask, const CheckOptions& options) {
  validate_call(p, q, k, v, out, options);
  mask.validate_for(p);
  HostTensor low(out.dtype, p.batch, p.heads_q, p.seqlen_q, p.dim_v());
  attend(p, q, k, v, mask, low.view(), on_reference());
  const std::vector<std::uint8_t> bitmap = mask.to_bitmap();
  const std::vector<double> ref64 = reference::exact_attention(p, q, k, v, row_mask_of(p, mask, bitmap));
  CheckReport r = compare(p, out, ref64, rows_of(p, low.view()), options, q.dtype);
  r.mask_kind = "tile mask " + std::to_string(mask.shape.tile_q) + "x" + std::to_string(mask.shape.tile_k);
  return r;
}

CheckReport check_attention(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v,
                            const TensorView& out, const ElementMask& mask, const CheckOptions& options) {
  validate_call(p, q, k, v, out, options);
  require(mask.allowed != nullptr, "check_attention mask: no data");
  require(mask.batch == 1 || mask.batch == p.batch, "check_attention mask: batch ", mask.batch, " is neither 1 nor B (",
          p.batch, ")");
  require(mask.heads == 1 || mask.heads == p.heads_kv || mask.heads == p.heads_q, "check_attention mask: heads ",
          mask.heads, " is neither 1, Hkv (", p.heads_kv, ") nor Hq (", p.heads_q, ")");
  const reference::RowMask allowed = row_mask_of(p, mask);
  const std::vector<float> low = low_precision_rows(p, q, k, v, out.dtype, allowed);
  CheckReport r = compare(p, out, reference::exact_attention(p, q, k, v, allowed), low, options, q.dtype);
  r.mask_kind = "element mask";
  return r;
}

}  // namespace spattn
