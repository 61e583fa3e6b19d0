#pragma once

#include <string>
#include <vector>

#include "spattn/mask.hpp"

namespace spattn::cli {

/// Draws the mask of (batch b, mask head h) as a PNG: one pixel per (query tile, key tile) — white kept,
/// dark grey reachable but dropped, black unreachable (causal future or past the sequence). Masks larger
/// than 2048 tiles on a side are reduced by an integer factor, a pixel showing the fraction kept.
void write_mask_png(const TileMask& mask, std::int64_t b, std::int64_t h, const std::string& path);

/// Writes an RGB image (3 bytes per pixel, rows top to bottom) as a PNG; `what` names the option in the error.
void write_rgb_png(const std::string& path, int width, int height, const std::vector<unsigned char>& rgb,
                   const std::string& what);

}  // namespace spattn::cli
