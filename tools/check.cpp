// `spattn check` (check.hpp): .npy / .npz files read into spattn::check_attention (spattn/check.hpp), its report printed.
#include "check.hpp"

#include <cstdio>

#include "inputs.hpp"
#include "spattn/check.hpp"
#include "spattn/error.hpp"
#include "spattn/mask_file.hpp"
#include "spattn/npy.hpp"

namespace spattn::cli {
namespace {

bool is_npz(const std::string& path) { return path.size() >= 4 && path.compare(path.size() - 4, 4, ".npz") == 0; }

/// A boolean .npy [Nq, Nkv] or [B or 1, H or 1, Nq, Nkv] ('|b1' or '|u1', nonzero = visible) as bytes and extents.
struct ElementFile {
  NpyArray array;
  ElementMask mask;
};

ElementFile load_element_mask(const std::string& path, const Problem& p) {
  ElementFile f{read_npy(path), {}};
  const NpyArray& a = f.array;
  require(a.descr == "|b1" || a.descr == "|u1", "--mask '", path, "': dtype ", a.descr,
          " is not a boolean mask (bool or uint8; a TileMask is a .npz)");
  const auto& s = a.shape;
  require((s.size() == 2 || s.size() == 4) && s[s.size() - 2] == p.seqlen_q && s[s.size() - 1] == p.seqlen_kv,
          "--mask '", path, "': expected [Nq, Nkv] or [B or 1, H or 1, Nq, Nkv] with Nq ", p.seqlen_q, ", Nkv ",
          p.seqlen_kv);
  require(static_cast<std::int64_t>(a.data.size()) == a.numel(), "--mask '", path, "': data size does not match its shape");
  f.mask = {a.data.data(), s.size() == 4 ? s[0] : 1, s.size() == 4 ? s[1] : 1};
  return f;
}

}  // namespace

void add_check_command(CLI::App& app, CheckOptions& o) {
  auto* sub = app.add_subcommand("check", "check another kernel's attention output against a float64 attention over "
                                          "the same mask (FlashAttention's rule: error <= 2x the reference's + atol)");
  sub->add_option("--q", o.q, "query .npy [B,Hq,Nq,D] or [Hq,Nq,D]")->required()->check(CLI::ExistingFile);
  sub->add_option("--k", o.k, "key .npy")->required()->check(CLI::ExistingFile);
  sub->add_option("--v", o.v, "value .npy")->required()->check(CLI::ExistingFile);
  sub->add_option("--out", o.out, "the output to check .npy [B,Hq,Nq,Dv] (float32, float16, bf16 as uint16)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--mask", o.mask, "a TileMask .npz (spattn run --mask-out) or a boolean .npy [Nq,Nkv] or "
                                    "[B|1,H|1,Nq,Nkv] (true = visible); default: every key")
      ->check(CLI::ExistingFile);
  sub->add_flag("--causal", o.causal, "bottom-right causal rule on top of the mask (a TileMask: its own)");
  sub->add_option("--scale", o.scale, "softmax scale (default 1/sqrt(D))");
  sub->add_option("--factor", o.factor, "allowed multiple of the reference's error (default 2)");
  sub->add_option("--atol", o.atol, "absolute term (default 1e-5 for float32, else 1e-4)");
  sub->add_option("--layout", o.layout, "layout of the .npy arrays: bhnd | bnhd");
  sub->add_flag("--bf16", o.bf16, "read uint16 .npy arrays as bfloat16 bit patterns");
}

int run_check(const CheckOptions& o) {
  FileInputs files{o.q, o.k, o.v, Layout::bhnd, o.bf16, o.causal};
  if (o.layout == "bnhd") files.layout = Layout::bnhd;
  else require(o.layout == "bhnd", "--layout: unknown layout '", o.layout, "' (bhnd or bnhd)");
  std::optional<TileMask> tiles;
  if (!o.mask.empty() && is_npz(o.mask)) {
    tiles = load_mask_npz(o.mask);
    require(!o.causal || tiles->shape.causal, "--causal: the mask '", o.mask, "' is not causal (a TileMask has its own)");
    files.causal = tiles->shape.causal;
  }
  Workload w = load_inputs(files);
  Problem& p = w.problem;
  p.scale = o.scale;
  p.validate();
  const HostTensor out = load_tensor(o.out, "--out", files.layout, o.bf16, /*finite=*/false);
  require(out.batch() == p.batch && out.heads() == p.heads_q && out.seqlen() == p.seqlen_q && out.dim() == p.dim_v(),
          "--out '", o.out, "': shape [B,Hq,Nq,Dv] = [", out.batch(), ",", out.heads(), ",", out.seqlen(), ",",
          out.dim(), "], the inputs give [", p.batch, ",", p.heads_q, ",", p.seqlen_q, ",", p.dim_v(), "]");
  const spattn::CheckOptions options{o.factor, o.atol};
  CheckReport r;
  if (tiles) {
    r = check_attention(p, w.q.view(), w.k.view(), w.v.view(), out.view(), *tiles, options);
  } else if (!o.mask.empty()) {
    const ElementFile f = load_element_mask(o.mask, p);
    r = check_attention(p, w.q.view(), w.k.view(), w.v.view(), out.view(), f.mask, options);
  } else {
    r = check_attention(p, w.q.view(), w.k.view(), w.v.view(), out.view(), TileMask::dense(MaskShape::of(p, 128, 128)),
                        options);
  }
  std::fputs(r.text().c_str(), stdout);
  return r.passed ? 0 : 1;
}

}  // namespace spattn::cli
