// A small line plot written as a PNG (spattn frontier): linear x in [0, 1], logarithmic y, ticks and labels, one coloured
// curve per series (solid or dashed, optional point markers), a legend at the right. Drawn pixel by pixel with a
// 5×7 bitmap font of our own; stb writes the file.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace spattn::cli {

struct PlotSeries {
  std::string label;
  std::array<unsigned char, 3> color{0, 0, 0};
  bool dashed = false;
  bool markers = true;
  std::vector<std::pair<double, double>> points;  ///< (x, y), drawn in the order given; y <= 0 sits on the x axis
};

struct Plot {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;
};

/// x linear over [0, 1] (a density); y logarithmic over the decades of the positive y values (at most 5, the top
/// ones; smaller values and 0 are drawn on the x axis). Throws spattn::Error when the file cannot be written.
void write_plot_png(const Plot& plot, const std::string& path);

}  // namespace spattn::cli
