#include "mask_png.hpp"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wshadow"
#endif
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include <algorithm>
#include <vector>

#include "spattn/error.hpp"

namespace spattn::cli {

void write_mask_png(const TileMask& mask, std::int64_t b, std::int64_t h, const std::string& path) {
  const MaskShape& s = mask.shape;
  require(b >= 0 && b < s.batch, "--png-batch: ", b, " outside [0, ", s.batch, ")");
  require(h >= 0 && h < s.mask_heads, "--png-head: ", h, " outside [0, ", s.mask_heads, ")");
  const std::int64_t tq = s.num_q_tiles(), tk = s.num_k_tiles();
  const std::int64_t factor = std::max<std::int64_t>(1, (std::max(tq, tk) + 2047) / 2048);
  const std::int64_t rows = (tq + factor - 1) / factor, cols = (tk + factor - 1) / factor;
  std::vector<float> kept(static_cast<std::size_t>(rows * cols), 0.0f), reach(kept.size(), 0.0f);
  for (std::int64_t t = 0; t < tq; ++t) {
    const std::int64_t r = t / factor;
    const std::int64_t reachable = s.reachable_k_tiles(b, t);
    for (std::int64_t k = 0; k < reachable; ++k) reach[static_cast<std::size_t>(r * cols + k / factor)] += 1;
    for (std::int32_t k : mask.row(b, h, t)) kept[static_cast<std::size_t>(r * cols + k / factor)] += 1;
  }
  std::vector<unsigned char> pixels(kept.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) {
    if (reach[i] == 0) continue;  // black
    const float frac = kept[i] / reach[i];
    pixels[i] = static_cast<unsigned char>(48.0f + 207.0f * frac);
  }
  require(stbi_write_png(path.c_str(), static_cast<int>(cols), static_cast<int>(rows), 1, pixels.data(),
                         static_cast<int>(cols)) != 0,
          "--mask-png: cannot write '", path, "'");
}

void write_rgb_png(const std::string& path, int width, int height, const std::vector<unsigned char>& rgb,
                   const std::string& what) {
  require(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3 == rgb.size(),
          "internal: image of ", width, "×", height, " with ", rgb.size(), " bytes");
  require(stbi_write_png(path.c_str(), width, height, 3, rgb.data(), width * 3) != 0, what, ": cannot write '", path,
          "'");
}

}  // namespace spattn::cli
