#include "plot_png.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "mask_png.hpp"

namespace spattn::cli {
namespace {

// 5×7 glyphs, '#' = ink, row 0 at the top. Upper-case letters other than L are drawn as lower case.
struct Glyph {
  char c;
  const char* rows[7];
};
constexpr Glyph kFont[] = {
    {'0', {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."}},
    {'1', {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'2', {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"}},
    {'3', {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."}},
    {'4', {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."}},
    {'5', {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."}},
    {'6', {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."}},
    {'7', {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."}},
    {'8', {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."}},
    {'9', {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."}},
    {'a', {".....", ".....", ".###.", "....#", ".####", "#...#", ".####"}},
    {'b', {"#....", "#....", "#.##.", "##..#", "#...#", "#...#", "####."}},
    {'c', {".....", ".....", ".###.", "#....", "#....", "#...#", ".###."}},
    {'d', {"....#", "....#", ".##.#", "#..##", "#...#", "#...#", ".####"}},
    {'e', {".....", ".....", ".###.", "#...#", "#####", "#....", ".###."}},
    {'f', {"..##.", ".#..#", ".#...", "###..", ".#...", ".#...", ".#..."}},
    {'g', {".....", ".....", ".####", "#...#", ".####", "....#", ".###."}},
    {'h', {"#....", "#....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
    {'i', {"..#..", ".....", ".##..", "..#..", "..#..", "..#..", ".###."}},
    {'j', {"...#.", ".....", "..##.", "...#.", "...#.", "#..#.", ".##.."}},
    {'k', {"#....", "#....", "#..#.", "#.#..", "##...", "#.#..", "#..#."}},
    {'l', {".##..", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'m', {".....", ".....", "##.#.", "#.#.#", "#.#.#", "#...#", "#...#"}},
    {'n', {".....", ".....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
    {'o', {".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."}},
    {'p', {".....", ".....", "####.", "#...#", "####.", "#....", "#...."}},
    {'q', {".....", ".....", ".##.#", "#..##", ".####", "....#", "....#"}},
    {'r', {".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."}},
    {'s', {".....", ".....", ".###.", "#....", ".###.", "....#", "####."}},
    {'t', {".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."}},
    {'u', {".....", ".....", "#...#", "#...#", "#...#", "#..##", ".##.#"}},
    {'v', {".....", ".....", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'w', {".....", ".....", "#...#", "#...#", "#.#.#", "#.#.#", ".#.#."}},
    {'x', {".....", ".....", "#...#", ".#.#.", "..#..", ".#.#.", "#...#"}},
    {'y', {".....", ".....", "#...#", "#...#", ".####", "....#", ".###."}},
    {'z', {".....", ".....", "#####", "...#.", "..#..", ".#...", "#####"}},
    {'L', {"#....", "#....", "#....", "#....", "#....", "#....", "#####"}},
    {'.', {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."}},
    {'-', {".....", ".....", ".....", "#####", ".....", ".....", "....."}},
    {'=', {".....", ".....", "#####", ".....", "#####", ".....", "....."}},
    {'(', {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."}},
    {')', {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."}},
    {'/', {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."}},
    {':', {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."}},
    {',', {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."}},
    {'+', {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."}},
    {'@', {".###.", "#...#", "#.###", "#.#.#", "#.###", "#....", ".###."}},
    {'_', {".....", ".....", ".....", ".....", ".....", ".....", "#####"}},
};

const Glyph* glyph(char c) {
  for (const Glyph& g : kFont)
    if (g.c == c) return &g;
  if (c >= 'A' && c <= 'Z') return glyph(static_cast<char>(c - 'A' + 'a'));
  return nullptr;  // space and anything unknown: blank
}

using Rgb = std::array<unsigned char, 3>;

class Canvas {
 public:
  Canvas(int w, int h) : w_(w), h_(h), px_(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3, 255) {}
  int width() const { return w_; }
  int height() const { return h_; }
  const std::vector<unsigned char>& pixels() const { return px_; }

  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    std::memcpy(&px_[(static_cast<std::size_t>(y) * static_cast<std::size_t>(w_) + static_cast<std::size_t>(x)) * 3],
                c.data(), 3);
  }
  void rect(int x0, int y0, int x1, int y1, Rgb c) {  // filled, inclusive
    for (int y = y0; y <= y1; ++y)
      for (int x = x0; x <= x1; ++x) set(x, y, c);
  }
  /// A line of width ~2 px; dash > 0 draws `dash` px on, dash·0.6 off; clip: inside [cx0, cx1]×[cy0, cy1].
  void line(double x0, double y0, double x1, double y1, Rgb c, int dash, const int clip[4], double& phase) {
    const double len = std::hypot(x1 - x0, y1 - y0);
    const int steps = std::max(1, static_cast<int>(len * 2.0));
    for (int s = 0; s <= steps; ++s) {
      const double t = static_cast<double>(s) / steps;
      const double x = x0 + (x1 - x0) * t, y = y0 + (y1 - y0) * t;
      const double along = phase + len * t;
      if (dash > 0 && std::fmod(along, dash * 1.6) >= dash) continue;
      const int ix = static_cast<int>(std::lround(x)), iy = static_cast<int>(std::lround(y));
      for (int dy = 0; dy <= 1; ++dy)
        for (int dx = 0; dx <= 1; ++dx)
          if (ix + dx >= clip[0] && ix + dx <= clip[2] && iy + dy >= clip[1] && iy + dy <= clip[3])
            set(ix + dx, iy + dy, c);
    }
    phase += len;
  }
  /// Text at (x, y) top-left, glyphs scaled by `scale`, 6·scale px per character.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 2) {
    for (char ch : s) {
      if (const Glyph* g = glyph(ch))
        for (int r = 0; r < 7; ++r)
          for (int col = 0; col < 5; ++col)
            if (g->rows[r][col] == '#') rect(x + col * scale, y + r * scale, x + col * scale + scale - 1, y + r * scale + scale - 1, c);
      x += 6 * scale;
    }
  }
  /// Text written bottom to top (the y-axis label), its first character at the bottom.
  void text_up(int x, int y, const std::string& s, Rgb c, int scale = 2) {
    for (char ch : s) {
      if (const Glyph* g = glyph(ch))
        for (int r = 0; r < 7; ++r)
          for (int col = 0; col < 5; ++col)
            if (g->rows[r][col] == '#') rect(x + r * scale, y - col * scale - scale + 1, x + r * scale + scale - 1, y - col * scale, c);
      y -= 6 * scale;
    }
  }

 private:
  int w_, h_;
  std::vector<unsigned char> px_;
};

std::string decade_label(int e) {
  if (e == 0) return "1";
  if (e == -1) return "0.1";
  if (e == -2) return "0.01";
  return "1e" + std::to_string(e);
}

}  // namespace

void write_plot_png(const Plot& plot, const std::string& path) {
  constexpr int kW = 1000, kH = 600, kLeft = 90, kRight = 700, kTop = 50, kBottom = 530;
  Canvas cv(kW, kH);
  double ymin = INFINITY, ymax = 0.0;
  for (const PlotSeries& s : plot.series)
    for (const auto& [x, y] : s.points)
      if (y > 0) ymin = std::min(ymin, y), ymax = std::max(ymax, y);
  if (!(ymax > 0)) ymin = 1e-3, ymax = 1.0;
  int y_hi = static_cast<int>(std::ceil(std::log10(ymax) - 1e-9));
  // At most 5 decades: smaller values (and 0) sit on the x axis.
  const int y_lo = std::max(static_cast<int>(std::floor(std::log10(ymin) + 1e-9)), y_hi - 5);
  if (y_hi <= y_lo) y_hi = y_lo + 1;
  auto px = [&](double x) { return kLeft + std::clamp(x, 0.0, 1.0) * (kRight - kLeft); };
  auto py = [&](double y) {
    const double ly = y > 0 ? std::max(std::log10(y), static_cast<double>(y_lo)) : y_lo;
    return kBottom - (ly - y_lo) / (y_hi - y_lo) * (kBottom - kTop);
  };
  const Rgb grid{225, 225, 225}, minor{242, 242, 242}, ink{0, 0, 0};
  // Grid: x every 0.1 (linear), y decades with their 2…9 multiples.
  for (int t = 0; t <= 10; ++t) {
    const int x = static_cast<int>(std::lround(px(t / 10.0)));
    cv.rect(x, kTop, x, kBottom, t % 5 == 0 ? grid : minor);
    cv.rect(x, kBottom, x, kBottom + 6, ink);
    const std::string l = t == 0 ? "0" : t == 10 ? "1" : "0." + std::to_string(t);
    cv.text(x - static_cast<int>(l.size()) * 6, kBottom + 12, l, ink);
  }
  for (int e = y_lo; e <= y_hi; ++e) {
    for (int m = 2; m <= 9 && e < y_hi; ++m) {
      const int y = static_cast<int>(std::lround(py(m * std::pow(10.0, e))));
      cv.rect(kLeft, y, kRight, y, minor);
    }
    const int y = static_cast<int>(std::lround(py(std::pow(10.0, e))));
    cv.rect(kLeft, y, kRight, y, grid);
    cv.rect(kLeft - 6, y, kLeft, y, ink);
    const std::string l = decade_label(e);
    cv.text(kLeft - 10 - static_cast<int>(l.size()) * 12, y - 7, l, ink);
  }
  cv.rect(kLeft, kTop, kLeft + 1, kBottom, ink);
  cv.rect(kLeft, kBottom - 1, kRight, kBottom, ink);
  cv.rect(kRight - 1, kTop, kRight, kBottom, ink);
  cv.rect(kLeft, kTop, kRight, kTop + 1, ink);
  cv.text(kLeft, 16, plot.title, ink);
  cv.text((kLeft + kRight) / 2 - static_cast<int>(plot.x_label.size()) * 6, kBottom + 40, plot.x_label, ink);
  cv.text_up(14, (kTop + kBottom) / 2 + static_cast<int>(plot.y_label.size()) * 6, plot.y_label, ink);

  const int clip[4] = {kLeft + 2, kTop + 2, kRight - 2, kBottom - 2};
  int legend_y = kTop + 4;
  for (const PlotSeries& s : plot.series) {
    double phase = 0;
    for (std::size_t i = 1; i < s.points.size(); ++i)
      cv.line(px(s.points[i - 1].first), py(s.points[i - 1].second), px(s.points[i].first), py(s.points[i].second),
              s.color, s.dashed ? 8 : 0, clip, phase);
    if (s.markers)
      for (const auto& [x, y] : s.points) {
        const int ix = static_cast<int>(std::lround(px(x))), iy = static_cast<int>(std::lround(py(y)));
        cv.rect(std::max(ix - 3, clip[0]), std::max(iy - 3, clip[1]), std::min(ix + 3, clip[2]),
                std::min(iy + 3, clip[3]), s.color);
      }
    // Legend entry: a line sample, a marker, the label.
    double lp = 0;
    const int lx = kRight + 20;
    const int whole[4] = {0, 0, kW - 1, kH - 1};
    cv.line(lx, legend_y + 7, lx + 40, legend_y + 7, s.color, s.dashed ? 8 : 0, whole, lp);
    if (s.markers) cv.rect(lx + 17, legend_y + 4, lx + 23, legend_y + 10, s.color);
    cv.text(lx + 50, legend_y, s.label, s.color == Rgb{255, 255, 255} ? ink : s.color);
    legend_y += 24;
  }
  write_rgb_png(path, cv.width(), cv.height(), cv.pixels(), "--plot");
}

}  // namespace spattn::cli
