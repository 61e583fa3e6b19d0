// Writes the harnesses' seed corpora with the library itself (no third-party files): valid .npy arrays, .npz
// archives and TileMask files of every method's estimate, and the JSON parameter files of SpargeAttn and SALE,
// so fuzzing starts from inputs that load and reaches the code after a successful load.
//   fuzz_make_seeds DIR   → DIR/npy, DIR/npz, DIR/mask, DIR/params (DIR/api is left to the fuzzer)
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "spattn/mask_file.hpp"
#include "spattn/npy.hpp"
#include "spattn/params_file.hpp"
#include "spattn/spattn.hpp"
#include "spattn/workload.hpp"

namespace fs = std::filesystem;
using namespace spattn;

namespace {

void write_bytes(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1];
  for (const char* sub : {"npy", "npz", "mask", "params", "api"}) fs::create_directories(dir / sub);

  const std::vector<std::pair<const char*, NpyArray>> arrays = {
      {"f32", NpyArray::from_vector(std::vector<float>{1.0f, -2.5f, 3.0f, 0.0f, 5.0f, 6.0f}, {2, 3})},
      {"f16", NpyArray::from_vector(std::vector<std::uint16_t>(32, 0x3c00), {1, 1, 1, 32})},
      {"i64", NpyArray::scalar<std::int64_t>(128)},
      {"i32", NpyArray::from_vector(std::vector<std::int32_t>{0, 1, 2}, {3})},
      {"u8", NpyArray::from_vector(std::vector<std::uint8_t>{}, {0, 4})},
      {"f64", NpyArray::from_vector(std::vector<double>{1e300}, {1, 1})},
  };
  std::map<std::string, NpyArray> archive;
  for (const auto& [name, a] : arrays) {
    write_bytes(dir / "npy" / (std::string(name) + ".npy"), serialize_npy(a));
    archive.emplace(name, a);
  }
  write_npz((dir / "npz" / "arrays.npz").string(), archive);

  // Masks: every method's estimate on a small causal input (one per query head and per KV head), a
  // non-causal chunk, a variable-length batch.
  WorkloadSpec s;
  s.seqlen = 300;
  s.seqlen_q = 200;
  s.heads_q = 2;
  s.heads_kv = 1;
  s.head_dim = 32;
  const Workload w = make_workload(s);
  for (const MethodInfo& m : method_registry()) {
    const Estimate e = estimate(m.defaults, w.problem, w.q.view(), w.k.view());
    save_mask_npz(e.mask, (dir / "mask" / (std::string(m.name) + ".npz")).string());
    save_mask_npz(e.mask, (dir / "npz" / (std::string(m.name) + ".npz")).string());
  }
  save_mask_npz(TileMask::dense(MaskShape::of(w.problem, 16, 8, true)), (dir / "mask" / "dense_per_kv.npz").string());
  MaskShape varlen;
  varlen.tile_q = 16;
  varlen.tile_k = 16;
  varlen.batch = 2;
  varlen.seqlen_q = 40;
  varlen.seqlen_kv = 50;
  varlen.causal = true;
  varlen.seqlens_q = {40, 7};
  varlen.seqlens_kv = {50, 7};
  save_mask_npz(TileMask::dense(varlen), (dir / "mask" / "varlen.npz").string());
  varlen.causal = false;
  varlen.seqlens_kv.clear();
  save_mask_npz(TileMask::dense(varlen), (dir / "mask" / "varlen_q_only.npz").string());

  sparge::Params sp;
  sp.heads = {{-0.1f, 0.9f, INFINITY, false, 0.5, 0.05}, {0.2f, 1.0f, 6.0f, true, 0.0, 0.0}};
  save_params_json(sp, (dir / "params" / "sparge.json").string());
  sale::Params sa;
  sa.tau = {0.004f, 0.0f};
  save_params_json(sa, (dir / "params" / "sale.json").string());
  KnobParams fg;
  fg.method = "fgattn";
  fg.option = "top_p";
  fg.value = 0.95;
  fg.base = {{"tile_q", 64.0}, {"merge", 1.0}};
  save_params_json(fg, (dir / "params" / "fgattn.json").string());
  KnobParams bf;
  bf.method = "bfla";
  bf.option = "keep_ratio";
  bf.dense = true;
  save_params_json(bf, (dir / "params" / "bfla_dense.json").string());
  return 0;
}
