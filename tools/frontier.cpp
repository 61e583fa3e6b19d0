#include "frontier.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>
#include <array>
#include <functional>
#include <memory>

#include "plot_png.hpp"
#include "run.hpp"
#include "spattn/error.hpp"
#include "spattn/spattn.hpp"

namespace spattn::cli {
namespace {

// The oracle's budget is searched over one variable u, more tiles as u grows:
//   threshold (default): ε = 10^−u, u in [0, 9] (u = 0: each row's heaviest tile, about; 9: every tile heavier
//                        than 1e-9 of a row's mass);
//   mass:                τ = 1 − 10^−u, u in [0.01, 7] (0.01: the heaviest tile of almost every row; at 7 τ rounds
//                        to 0.99999988 in fp32).
//   density:             ρ = 10^(u − 3), u in [0, 3] (the same ⌈ρ·reachable⌉ tiles in every row: the oracle of a
//                        fixed per-row count such as SpargeAttn's top-k, for analysis).
struct BudgetScale {
  OracleBudget::Kind kind = OracleBudget::Kind::threshold;
  double min = 0, max = 9;
  std::vector<double> sweep;  ///< the budgets drawn and printed, besides every one a search evaluated
  OracleBudget at(double u) const {
    switch (kind) {
      case OracleBudget::Kind::threshold: return OracleBudget::threshold(static_cast<float>(std::pow(10.0, -u)));
      case OracleBudget::Kind::mass: return OracleBudget::mass(static_cast<float>(1.0 - std::pow(10.0, -u)));
      case OracleBudget::Kind::density: break;
    }
    return OracleBudget::density(static_cast<float>(std::pow(10.0, u - 3.0)));
  }
  const char* name() const {
    return kind == OracleBudget::Kind::threshold ? "epsilon" : kind == OracleBudget::Kind::mass ? "tau" : "rho";
  }
  static BudgetScale of(const std::string& kind) {
    using K = OracleBudget::Kind;
    if (kind == "threshold") return {K::threshold, 0.0, 9.0, {0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0}};
    if (kind == "density") return {K::density, 0.0, 3.0, {1.0, 1.5, 2.0, 2.3, 2.5, 2.7, 2.85, 2.95}};
    require(kind == "mass", "--oracle: threshold, mass or density, got '", kind, "'");
    return {K::mass, 0.01, 7.0, {0.3, 0.6, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0}};
  }
};

struct Point {
  double setting = 0;  ///< the knob's value (a method) or τ (the oracle)
  double density = 0, rel_l1 = 0, max_abs = 0;
};

/// Density at rel L1 = e on a curve, interpolated: the sparsest point with error <= e and the next sparser one
/// (error > e), linear in density against log10 error (linear in error when the denser point's error is 0).
struct AtError {
  std::optional<double> density;
  std::string how;  ///< "interpolated", "at_most" (the sparsest point already meets e), "not_reached"
};
AtError density_at(std::vector<Point> pts, double e) {
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
    return std::tie(a.density, a.rel_l1) < std::tie(b.density, b.rel_l1);
  });
  for (std::size_t i = 0; i < pts.size(); ++i) {
    if (!(pts[i].rel_l1 <= e)) continue;
    if (i == 0) return {pts[0].density, "at_most"};
    const Point &a = pts[i - 1], &b = pts[i];  // a.rel_l1 > e >= b.rel_l1
    double f;
    if (b.rel_l1 > 0) f = (std::log10(a.rel_l1) - std::log10(e)) / (std::log10(a.rel_l1) - std::log10(b.rel_l1));
    else f = (a.rel_l1 - e) / (a.rel_l1 - b.rel_l1);
    return {a.density + f * (b.density - a.density), "interpolated"};
  }
  return {std::nullopt, "not_reached"};
}

/// The oracle at one tile shape: its masses (computed once) and every budget evaluated so far.
class OracleCurve {
 public:
  OracleCurve(const Workload& w, const MaskShape& shape, const std::vector<float>& dense, BudgetScale scale,
              std::function<void()> tick)
      : w_(w), dense_(dense), scale_(std::move(scale)), tick_(std::move(tick)),
        mass_(oracle_tile_mass(w.problem, w.q.view(), w.k.view(), shape)) {}

  const Point& eval(double nines) {
    nines = std::clamp(nines, scale_.min, scale_.max);
    auto it = points_.find(nines);
    if (it != points_.end()) return it->second;
    const OracleBudget budget = scale_.at(nines);
    const float tau = budget.value;
    const TileMask mask = oracle_mask(mass_, budget);
    const ErrorStats err = mask_error(w_, mask, dense_);
    ++evaluations_;
    if (tick_) tick_();
    return points_[nines] = Point{tau, mask.stats().density, err.rel_l1, err.max_abs};
  }

  /// The smallest density the oracle needs for rel L1 <= e: bisection over u between the densest budget
  /// with error > e and the sparsest with error <= e, until their densities differ by at most `tol` (relative) or
  /// the budgets by 1e-3 in u; the denser end is returned (so within tol above the crossing). Assumes the error
  /// falls as u grows (it does on every curve we measured; a non-monotone step only moves the bracket). 1 (dense)
  /// when no budget up to the scale's end meets e.
  double density_for(double e, double tol) {
    if (!(e > 0)) return 1.0;
    for (int step = 0; step < 40; ++step) {
      std::optional<double> hi, lo;
      for (const auto& [u, p] : points_)
        if (p.rel_l1 <= e) {
          hi = u;
          break;
        }
      if (!hi) {
        const double top = points_.empty() ? 1.0 : points_.rbegin()->first;
        if (top >= scale_.max) return 1.0;
        eval(std::min(top + 1.0, scale_.max));
        continue;
      }
      for (const auto& [u, p] : points_)
        if (u < *hi && p.rel_l1 > e) lo = u;
      if (!lo) {
        if (points_.count(scale_.min) == 0) {
          eval(scale_.min);
          continue;
        }
        return points_.at(*hi).density;
      }
      const double dh = points_.at(*hi).density, dl = points_.at(*lo).density;
      if (dh - dl <= tol * dh || *hi - *lo < 1e-3) return dh;
      eval((*lo + *hi) / 2);
    }
    return 1.0;
  }

  std::vector<Point> points() const {
    std::vector<Point> out;
    for (const auto& [u, p] : points_) out.push_back(p);
    return out;
  }
  /// The curve with the dense end (τ = 1: every tile, error 0).
  std::vector<Point> curve() const {
    std::vector<Point> out = points();
    out.push_back({1.0, 1.0, 0.0, 0.0});
    return out;
  }
  int evaluations() const { return evaluations_; }

 private:
  const Workload& w_;
  const std::vector<float>& dense_;
  BudgetScale scale_;
  std::function<void()> tick_;
  OracleMass mass_;
  std::map<double, Point> points_;
  int evaluations_ = 0;
};

/// The base options with the method's knob at `value` (a base value for the knob, under any of its names, gives way).
std::vector<NamedValue> with_knob(std::vector<NamedValue> options, const std::string& method, double value) {
  const OptionTable& table = option_table(method);
  const Option* knob = spattn::main_knob(table);
  require(knob != nullptr, "internal: no knob for ", method);
  std::erase_if(options, [&](const NamedValue& v) { return find_option(table, v.name) == knob; });
  options.push_back({std::string(knob->name), static_cast<double>(static_cast<float>(value))});
  return options;
}

std::vector<std::string> split_methods(const std::string& list) {
  std::vector<std::string> out;
  if (list == "all") return {"sparge", "sale", "anchor", "fgattn", "bfla"};
  std::stringstream in(list);
  for (std::string m; std::getline(in, m, ',');) {
    require(m == "sparge" || m == "sale" || m == "anchor" || m == "fgattn" || m == "bfla",
            "--method: frontier takes sparge, sale, anchor, fgattn, bfla or all, got '", m, "'");
    require(std::find(out.begin(), out.end(), m) == out.end(), "--method: '", m, "' given twice");
    out.push_back(m);
  }
  require(!out.empty(), "--method: empty list");
  return out;
}

struct MethodResult {
  std::string method, knob;
  MaskShape shape;
  std::vector<Point> points;
  std::vector<double> point_oracle;  ///< the oracle's density at each point's error
  struct Target {
    double rel_l1;
    AtError method;
    double oracle;
  };
  std::vector<Target> targets;
  OracleCurve* oracle = nullptr;
};

std::string shape_label(const MaskShape& s, const Problem& p) {
  std::ostringstream o;
  o << s.tile_q << "x" << s.tile_k;
  if (s.mask_heads != p.heads_q) o << "/kv";
  return o.str();
}

/// The progress bar on stderr: `done` of `total` units, the time since the start and what runs now.
struct Progress {
  bool on;
  std::size_t total, done = 0;
  std::string what;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  Progress(bool on_, std::size_t total_) : on(on_), total(total_) {}
  void show() const {
    if (!on) return;
    const double frac = total ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
    const int filled = static_cast<int>(frac * 30.0);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\r[%-30s] %3d%% %6.0fs %-40.40s", std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 static_cast<int>(frac * 100.0), s, what.c_str());
    std::fflush(stderr);
  }
  void finish() {
    done = total;
    what = "done";
    show();
    if (on) std::fprintf(stderr, "\n");
  }
};

/// Every method's results and the oracle curves they point to (one per tile shape and mask heads).
struct Measured {
  std::map<std::tuple<std::int32_t, std::int32_t, std::int64_t>, std::unique_ptr<OracleCurve>> oracles;
  std::vector<MethodResult> results;
};

/// One method: a point per setting of its knob, then the oracle at its tiles (swept once per tile shape, kept in
/// `measured`) searched at each target error.
MethodResult measure_method(const std::string& m, const std::vector<NamedValue>& base, const FrontierOptions& opt,
                            const Workload& w, const std::string& workload_name, const std::vector<float>& dense,
                            const BudgetScale& scale, Measured& measured, Progress& progress) {
  const Problem& p = w.problem;
  MethodResult mr;
  mr.method = m;
  const Knob knob = main_knob(m);
  mr.knob = knob.name;
  for (double s : opt.settings.empty() ? knob.defaults : opt.settings) {
    RunOptions ro;
    ro.method = m;
    ro.method_options = with_knob(base, m, s);
    std::ostringstream label;
    label << m << " " << knob.name << " " << s;
    progress.what = label.str();
    progress.show();
    TileMask mask;
    const RunResult r = run_method(ro, w, workload_name, &dense, &mask);
    mr.shape = mask.shape;
    mr.points.push_back({s, r.density, r.rel_l1, r.max_abs});
    ++progress.done;
  }
  auto key = std::make_tuple(mr.shape.tile_q, mr.shape.tile_k, mr.shape.mask_heads);
  auto& curve = measured.oracles[key];
  if (!curve) {
    progress.what = "oracle masses " + shape_label(mr.shape, p);
    progress.show();
    curve = std::make_unique<OracleCurve>(w, mr.shape, dense, scale, [&progress]() { progress.show(); });
    for (double u : scale.sweep) {
      progress.what = "oracle " + shape_label(mr.shape, p) + " sweep";
      curve->eval(u);
      ++progress.done;
    }
  } else {
    progress.done += scale.sweep.size();
  }
  ++progress.done;
  mr.oracle = curve.get();
  for (double e : opt.targets) {
    progress.what = "oracle " + shape_label(mr.shape, p) + " search";
    const double od = curve->density_for(e, opt.tolerance);
    mr.targets.push_back({e, density_at(mr.points, e), od});
  }
  return mr;
}

/// Each point's oracle density, once every search of its curve has run (interpolation then sees them all).
void add_point_oracle(std::vector<MethodResult>& results, const FrontierOptions& opt, const Problem& p,
                      Progress& progress) {
  for (MethodResult& mr : results)
    for (const Point& pt : mr.points) {
      progress.what = "oracle " + shape_label(mr.shape, p) + " at each point";
      double od;
      if (pt.rel_l1 <= 0) od = 1.0;
      else if (opt.interpolate_points) od = density_at(mr.oracle->curve(), pt.rel_l1).density.value_or(1.0);
      else od = mr.oracle->density_for(pt.rel_l1, opt.tolerance);
      mr.point_oracle.push_back(od);
    }
}

/// The three tables on stdout: every point, the density at each target error, every oracle curve.
void print_tables(const std::vector<MethodResult>& results, const Problem& p, const std::string& workload_name,
                  const BudgetScale& scale) {
  std::printf("frontier on %s (%s)\n", workload_name.c_str(), p.describe().c_str());
  std::printf("%-8s %-7s %-10s %-9s %10s %10s %10s %14s %8s\n", "method", "knob", "setting", "tiles", "density",
              "rel_l1", "max_abs", "oracle_density", "ratio");
  for (const MethodResult& mr : results)
    for (std::size_t i = 0; i < mr.points.size(); ++i) {
      const Point& pt = mr.points[i];
      std::printf("%-8s %-7s %-10g %-9s %10.6f %10.3e %10.3e %14.6f %7.2fx\n", mr.method.c_str(), mr.knob.c_str(),
                  pt.setting, shape_label(mr.shape, p).c_str(), pt.density, pt.rel_l1, pt.max_abs, mr.point_oracle[i],
                  pt.density / mr.point_oracle[i]);
    }
  std::printf("\n%-8s %-9s %10s %-13s %14s %8s\n", "method", "tiles", "at rel_l1", "density", "oracle_density",
              "ratio");
  for (const MethodResult& mr : results)
    for (const auto& t : mr.targets) {
      char d[32] = "not reached", ratio[32] = "-";
      if (t.method.density) {
        std::snprintf(d, sizeof d, "%s%.4f", t.method.how == "at_most" ? "<=" : "", *t.method.density);
        std::snprintf(ratio, sizeof ratio, "%.2fx", *t.method.density / t.oracle);
      }
      std::printf("%-8s %-9s %10.0e %-13s %14.4f %8s\n", mr.method.c_str(), shape_label(mr.shape, p).c_str(),
                  t.rel_l1, d, t.oracle, ratio);
    }
  std::printf("\n%-9s %10s %10s %10s %10s\n", "oracle", scale.name(), "density", "rel_l1",
              "max_abs");
  std::vector<const OracleCurve*> printed;
  for (const MethodResult& mr : results) {
    if (std::find(printed.begin(), printed.end(), mr.oracle) != printed.end()) continue;
    printed.push_back(mr.oracle);
    for (const Point& pt : mr.oracle->points())
      std::printf("%-9s %10.3e %10.6f %10.3e %10.3e\n", shape_label(mr.shape, p).c_str(), pt.setting, pt.density,
                  pt.rel_l1, pt.max_abs);
  }
}

/// The --json document (also what the plot is drawn from).
nlohmann::json frontier_json(const std::vector<MethodResult>& results, const FrontierOptions& opt, const Problem& p,
                             const std::string& workload_name, const BudgetScale& scale) {
  nlohmann::json j;
  j["workload"] = workload_name;
  j["shape"] = p.describe();
  j["targets"] = opt.targets;
  j["tolerance"] = opt.tolerance;
  j["oracle_budget"] = opt.oracle;
  j["methods"] = nlohmann::json::array();
  for (const MethodResult& mr : results) {
    nlohmann::json jm = {{"method", mr.method},        {"knob", mr.knob}, {"tiles", shape_label(mr.shape, p)},
                         {"tile_q", mr.shape.tile_q},  {"tile_k", mr.shape.tile_k},
                         {"mask_heads", mr.shape.mask_heads}};
    for (std::size_t i = 0; i < mr.points.size(); ++i) {
      const Point& pt = mr.points[i];
      jm["points"].push_back({{"setting", pt.setting}, {"density", pt.density}, {"rel_l1", pt.rel_l1},
                              {"max_abs", pt.max_abs}, {"oracle_density", mr.point_oracle[i]},
                              {"ratio", pt.density / mr.point_oracle[i]}});
    }
    for (const auto& t : mr.targets) {
      nlohmann::json jt = {{"rel_l1", t.rel_l1}, {"how", t.method.how}, {"oracle_density", t.oracle}};
      jt["density"] = t.method.density ? nlohmann::json(*t.method.density) : nlohmann::json(nullptr);
      jt["ratio"] = t.method.density ? nlohmann::json(*t.method.density / t.oracle) : nlohmann::json(nullptr);
      jm["at_targets"].push_back(jt);
    }
    for (const Point& pt : mr.oracle->points())
      jm["oracle"].push_back(
          {{scale.name(), pt.setting}, {"density", pt.density}, {"rel_l1", pt.rel_l1}, {"max_abs", pt.max_abs}});
    j["methods"].push_back(jm);
  }
  return j;
}

/// The --csv file: one row per point, target and oracle budget.
void write_csv(const std::vector<MethodResult>& results, const std::string& path, const Problem& p,
               const BudgetScale& scale) {
  std::ofstream f(path);
  f << "kind,method,tiles,knob,setting,density,rel_l1,max_abs,oracle_density,ratio\n";
  f.precision(17);
  for (const MethodResult& mr : results) {
    const std::string tiles = shape_label(mr.shape, p);
    for (std::size_t i = 0; i < mr.points.size(); ++i) {
      const Point& pt = mr.points[i];
      f << "point," << mr.method << "," << tiles << "," << mr.knob << "," << pt.setting << "," << pt.density << ","
        << pt.rel_l1 << "," << pt.max_abs << "," << mr.point_oracle[i] << "," << pt.density / mr.point_oracle[i]
        << "\n";
    }
    for (const auto& t : mr.targets) {
      f << "target," << mr.method << "," << tiles << ",rel_l1," << t.rel_l1 << ",";
      if (t.method.density) f << *t.method.density;
      f << "," << t.rel_l1 << ",," << t.oracle << ",";
      if (t.method.density) f << *t.method.density / t.oracle;
      f << "\n";
    }
    for (const Point& pt : mr.oracle->points())
      f << "oracle," << mr.method << "," << tiles << "," << scale.name() << "," << pt.setting << "," << pt.density << "," << pt.rel_l1
        << "," << pt.max_abs << ",,\n";
  }
  require(static_cast<bool>(f), "--csv: cannot write '", path, "'");
}

constexpr std::array<std::array<unsigned char, 3>, 5> kColors = {
    {{31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {148, 103, 189}, {255, 127, 14}}};

}  // namespace

std::string knobs_text() {
  std::string s;
  for (const std::string& m : split_methods("all")) s += (s.empty() ? "" : ", ") + m + " " + main_knob(m).name;
  return s;
}

Knob main_knob(const std::string& method) {
  const Option* knob = spattn::main_knob(option_table(method));
  require(knob != nullptr, "--method: frontier has no knob for '", method, "'");
  return {std::string(knob->name), {knob->sweep.begin(), knob->sweep.end()}};
}

Plot frontier_plot(const nlohmann::json& j) {
  Plot plot;
  plot.title = j.at("workload").get<std::string>() + ", " + j.at("shape").get<std::string>();
  plot.x_label = "density (kept / reachable tiles)";
  plot.y_label = "rel L1 error vs dense";
  std::size_t i = 0;
  for (const auto& m : j.at("methods")) {
    const std::string tiles = m.contains("tiles") ? m.at("tiles").get<std::string>()
                                                  : std::to_string(m.at("tile_q").get<int>()) + "x" +
                                                        std::to_string(m.at("tile_k").get<int>());
    PlotSeries s;
    s.label = m.at("method").get<std::string>() + " " + tiles;
    s.color = kColors[i++ % kColors.size()];
    for (const auto& pt : m.at("points")) s.points.emplace_back(pt.at("density").get<double>(), pt.at("rel_l1").get<double>());
    std::sort(s.points.begin(), s.points.end());
    PlotSeries o;
    o.label = "oracle " + tiles;
    o.color = s.color;
    o.dashed = true;
    o.markers = false;
    for (const auto& pt : m.at("oracle")) o.points.emplace_back(pt.at("density").get<double>(), pt.at("rel_l1").get<double>());
    o.points.emplace_back(1.0, 0.0);  // τ = 1 / ε = 0: every tile, no error
    std::sort(o.points.begin(), o.points.end());
    plot.series.push_back(std::move(s));
    plot.series.push_back(std::move(o));
  }
  return plot;
}

int replot_frontier(const std::string& json_path, const std::string& png_path) {
  std::ifstream f(json_path);
  require(static_cast<bool>(f), "--replot: cannot read '", json_path, "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
    write_plot_png(frontier_plot(j), png_path);
  } catch (const nlohmann::json::exception& e) {
    fail("--replot: '", json_path, "' is not a frontier JSON file (", e.what(), ")");
  }
  return 0;
}

int run_frontier(const FrontierOptions& opt, const Workload& w, const std::string& workload_name) {
  const std::vector<std::string> methods = split_methods(opt.methods);
  require(opt.settings.empty() || methods.size() == 1, "--settings: give one --method with --settings (got ",
          methods.size(), " methods)");
  for (double e : opt.targets) require_in("--targets", e, Interval<double>{0.0, INFINITY, true, true});
  require_in("--tolerance", opt.tolerance, Interval<double>{0.0, 1.0, true, false});
  std::map<std::string, std::vector<NamedValue>> base;  // before any work: a flag a method refuses fails here
  for (const auto& m : methods) base[m] = opt.base ? opt.base(m) : std::vector<NamedValue>{};

  // Progress: one unit per method setting and per oracle sweep budget; searches show their evaluations.
  const BudgetScale scale = BudgetScale::of(opt.oracle);
  std::size_t total = 0;
  for (const auto& m : methods) total += (opt.settings.empty() ? main_knob(m).defaults.size() : opt.settings.size());
  total += methods.size() * (scale.sweep.size() + 1);
  Progress progress(opt.progress, total);

  progress.what = "dense attention";
  progress.show();
  const std::vector<float> dense = dense_output(w);
  Measured measured;
  for (const std::string& m : methods)
    measured.results.push_back(measure_method(m, base.at(m), opt, w, workload_name, dense, scale, measured, progress));
  add_point_oracle(measured.results, opt, w.problem, progress);
  progress.finish();

  print_tables(measured.results, w.problem, workload_name, scale);
  const nlohmann::json j = frontier_json(measured.results, opt, w.problem, workload_name, scale);
  if (!opt.json.empty()) {
    std::ofstream f(opt.json);
    f << j.dump(1) << "\n";
    require(static_cast<bool>(f), "--json: cannot write '", opt.json, "'");
  }
  if (!opt.csv.empty()) write_csv(measured.results, opt.csv, w.problem, scale);
  if (!opt.plot.empty()) write_plot_png(frontier_plot(j), opt.plot);
  return 0;
}

}  // namespace spattn::cli
