// The methods' option tables (spattn/options.hpp): every option settable by name is documented, its default lies in
// its range, names and aliases set the same member, and values are checked with messages that name them.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "common.hpp"
#include "spattn/error.hpp"
#include "spattn/method_config.hpp"
#include "spattn/params_file.hpp"

namespace spattn::test {
namespace {

MethodConfig configured(std::string_view method, std::vector<NamedValue> values,
                        UnknownOptions unknown = UnknownOptions::error) {
  MethodConfig c = default_config(method);
  set_options(c, values, unknown);
  return c;
}

std::string message_of(std::string_view method, std::vector<NamedValue> values) {
  try {
    configured(method, std::move(values));
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST_CASE("every option in every table: a name, a doc, a unique name, a default inside its range") {
  for (const MethodInfo& m : method_registry()) {
    CAPTURE(m.name);
    const OptionTable& table = option_table(m.defaults);
    CHECK(table.method == m.name);
    CHECK(m.summary.starts_with(table.summary));
    std::set<std::string_view> names;
    for (const Option& o : table.options) {
      CAPTURE(o.name);
      CHECK(!o.name.empty());
      CHECK(!o.doc.empty());
      CHECK(!o.field.member.empty());
      CHECK(names.insert(o.name).second);
      for (std::string_view a : split_names(o.aliases)) CHECK(names.insert(a).second);
      if (o.field.kind == OptionKind::choice) CHECK(!o.choices.empty());
      const void* defaults = std::visit([](const auto& c) -> const void* { return &c; }, m.defaults);
      if (o.by_name) CHECK(m.summary.find(option_setting_text(o, defaults)) != std::string_view::npos);
    }
    CHECK_NOTHROW(validate(m.defaults, Problem{}));
  }
}

TEST_CASE("the registry's summaries state the defaults from the tables") {
  const MethodInfo& fg = method_registry()[1];
  REQUIRE(fg.name == "fgattn");
  CHECK(fg.summary == "FG-Attn: mean-pooled M×N tile scores, top-p (M = 32, N = 32, p = 0.99, size_weighted_tail = false, "
                      "merge = xor, semantics = exact, R·M = 128)");
}

TEST_CASE("an alias sets the member its name sets") {
  const auto by_name = std::get<sparge::Config>(configured("sparge", {{"theta", 0.25}, {"block_q", std::string("64")}}));
  const auto by_alias =
      std::get<sparge::Config>(configured("sparge", {{"sim_threshold", 0.25}, {"tile_q", std::string("64")}}));
  CHECK(by_name.theta == std::vector<float>{0.25f});
  CHECK(by_alias.theta == by_name.theta);
  CHECK(by_alias.block_q == 64);
  CHECK(by_name.block_q == 64);
  const auto bf = std::get<bfla::Config>(configured("bfla", {{"rescue_seed", 7.0}, {"tile_k", 16.0}}));
  CHECK(bf.seed == 7);
  CHECK(bf.tile == 16);
}

TEST_CASE("SpargeAttn: giving tau alone selects TopCdf; with topk given too, topk stays") {
  CHECK(std::get<sparge::Config>(configured("sparge", {{"cdf_threshold", 0.9}})).topk == 0.0f);
  CHECK(std::get<sparge::Config>(configured("sparge", {{"tau", 0.9}, {"topk", 0.3}})).topk == 0.3f);
  CHECK(std::get<sparge::Config>(configured("sparge", {{"theta", 0.1}})).topk == 0.9f);
}

TEST_CASE("values by name: kinds, widths, choices, unknown names and doubles are errors that name them") {
  CHECK(message_of("anchor", {{"step", std::string("4294967296")}}) == "step: 4294967296 does not fit in 32 bits");
  CHECK(message_of("anchor", {{"step", 2.5}}) == "step: expected an integer, got 2.5");
  CHECK(message_of("anchor", {{"step", std::string("two")}}) == "step: expected an integer, got 'two'");
  CHECK(message_of("fgattn", {{"merge", std::string("random")}}) == "merge: unknown 'random' (none, consecutive or xor)");
  CHECK(message_of("fgattn", {{"top_p", std::string("high")}}) == "top_p: expected a number, got 'high'");
  CHECK(message_of("sparge", {{"sink", std::string("yes")}}) == "sink: expected true or false, got 'yes'");
  CHECK(message_of("sparge", {{"tua", 0.5}}) ==
        "method 'sparge': unknown option 'tua' (sparge takes block_q, block_k, theta, tau, topk, attention_sink, qk_int8)");
  CHECK(message_of("sparge", {{"theta", 0.5}, {"sim_threshold", 0.1}}) ==
        "sparge theta: given twice (as 'theta' and 'sim_threshold')");
  CHECK(message_of("sparge", {{"pv_threshold", 1.0}}).find("unknown option 'pv_threshold'") != std::string::npos);
  CHECK(std::get<DenseConfig>(configured("dense", {{"top_p", 0.5}}, UnknownOptions::skip)).tile_q == 128);
  const auto fg = std::get<fg_attn::Config>(configured("fgattn", {{"merge", std::string("none")}, {"semantics", 1.0}}));
  CHECK(fg.merge == fg_attn::Merge::none);
  CHECK(fg.semantics == fg_attn::Semantics::union_keys);
  CHECK(std::get<anchor_attn::Config>(configured("anchor", {{"theta", std::string("-inf")}})).theta == -INFINITY);
}

TEST_CASE("ranges come from the tables: one wording, the method, the member and the value") {
  Problem p;
  p.heads_q = 2;
  auto range_message = [&](const MethodConfig& c) {
    try {
      validate(c, p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  sparge::Config sp;
  sp.block_q = 8;
  CHECK(range_message(sp) == "sparge block_q: must be in [16, 2048], got 8");  // MaskShape's limits, as DenseConfig
  sp = {};
  sp.theta = {0.1f, 0.2f, 0.3f};
  CHECK(range_message(sp) == "sparge theta: give one value or one per query head (2), got 3");
  sale::Config sa;
  sa.local_window = 100;
  CHECK(range_message(sa) == "sale local_window: must be a multiple of 32 in [0, 1099511627776], got 100");
  fg_attn::Config fg;
  fg.top_p = 0.0f;
  CHECK(range_message(fg) == "fgattn top_p: must be in (0, 1] (1 keeps every tile), got 0");
  bfla::Config bf;
  bf.rho = 2.0f;
  CHECK(range_message(bf) == "bfla rho: must be in [0, 1] (0 = off), got 2");
}

TEST_CASE("SpargeAttn's qk_int8 option reaches the executor's options") {
  CHECK(!attend_options_of(default_config("sparge")).qk_int8);
  CHECK(attend_options_of(configured("sparge", {{"qk_int8", 1.0}})).qk_int8);
  AttendOptions base;
  base.qk_int8 = true;  // the caller's (spattn run --int8) stays on
  CHECK(attend_options_of(default_config("sparge"), base).qk_int8);
}

TEST_CASE("the frontier's knobs are the options with a sweep") {
  const std::vector<std::pair<std::string_view, std::string_view>> knobs = {
      {"sparge", "topk"}, {"sale", "tau"}, {"anchor", "theta"}, {"fgattn", "top_p"}, {"bfla", "keep_ratio"}};
  for (const auto& [method, name] : knobs) {
    const Option* knob = main_knob(option_table(method));
    REQUIRE(knob != nullptr);
    CHECK(knob->name == name);
    CHECK(knob->sweep.size() >= 7);
  }
  CHECK(main_knob(option_table("dense")) == nullptr);
}

TEST_CASE("configure_method: a params file for every method but dense") {
  const std::vector<NamedValue> values = {{"params", std::string("p.json")}};
  CHECK_THROWS_WITH_AS(configure_method("dense", values, 2, UnknownOptions::skip),
                       "params: dense takes no parameter file", Error);
  CHECK(takes_params_file("sparge"));
  CHECK(takes_params_file("sale"));
  CHECK(takes_params_file("fgattn"));
  CHECK(!takes_params_file("dense"));
}

TEST_CASE("SALE params files keep the scale groups; files before the option read as thread groups") {
  const TempDir dir("spattn_sale_groups_");
  sale::Params file;
  file.bits = 8;
  file.groups = sale::Groups::block;
  file.tau = {0.05f, 0.2f};
  save_params_json(file, dir.file("sale.json"));
  const sale::Params back = load_sale_params(dir.file("sale.json"));
  CHECK(back.groups == sale::Groups::block);
  CHECK(back.bits == 8);
  CHECK(back.tau == file.tau);
  const std::vector<NamedValue> given = {{"params", dir.file("sale.json")}};
  const MethodConfig c = configure_method("sale", given, 2, UnknownOptions::error);
  CHECK(std::get<sale::Config>(c).groups == sale::Groups::block);
  const char* old_file = R"({"method": "sale", "bits": 4, "local_window": 128, "tau": [0.1]})";
  CHECK(parse_sale_params(old_file, "s.json").groups == sale::Groups::thread);
  CHECK_THROWS_WITH_AS(
      parse_sale_params(R"({"method": "sale", "bits": 8, "groups": "blok", "local_window": 128, "tau": [0.1]})", "s.json"),
      doctest::Contains("unknown 'blok'"), Error);
}

TEST_CASE("configure_method: heads [params_first_head, + heads_q) of a per-head file of params_heads") {
  const TempDir dir("spattn_heads_");
  sale::Params sale_file;
  sale_file.tau = {0.0f, 0.5f, 0.01f, 0.3f, 0.2f, 0.05f};
  save_params_json(sale_file, dir.file("sale.json"));
  sparge::Params sparge_file;
  for (int h = 0; h < 6; ++h) {
    sparge::HeadParams hp;
    hp.theta = -1.0f + 0.25f * static_cast<float>(h);
    hp.tau = 0.5f + 0.05f * static_cast<float>(h);
    hp.dense = h == 3;
    sparge_file.heads.push_back(hp);
  }
  save_params_json(sparge_file, dir.file("sparge.json"));
  const auto run = [&](const char* method, const char* file, std::vector<NamedValue> more, std::int64_t heads_q) {
    more.push_back({"params", dir.file(file)});
    return configure_method(method, more, heads_q, UnknownOptions::error);
  };
  for (std::int64_t first = 0; first + 2 <= 6; first += 2) {
    CAPTURE(first);
    const MethodConfig s = run("sale", "sale.json", {{"params_first_head", std::to_string(first)}, {"params_heads", 6.0}}, 2);
    const auto& tau = std::get<sale::Config>(s).tau;
    REQUIRE(tau.size() == 2);
    CHECK(tau[0] == sale_file.tau[static_cast<std::size_t>(first)]);
    CHECK(tau[1] == sale_file.tau[static_cast<std::size_t>(first + 1)]);
    const MethodConfig p = run("sparge", "sparge.json", {{"params_heads", 6.0}, {"params_first_head", double(first)}}, 2);
    const sparge::Config want = sparge::Params{sparge_file.block_q, sparge_file.block_k, sparge_file.l1, sparge_file.l2,
                                               {sparge_file.heads.begin() + first, sparge_file.heads.begin() + first + 2}}
                                    .config();
    const auto& got = std::get<sparge::Config>(p);
    CHECK(got.theta == want.theta);
    CHECK(got.tau == want.tau);
    CHECK(got.dense_heads == want.dense_heads);
  }
  // The whole file, as without the options; a knob file holds for every head.
  CHECK(std::get<sale::Config>(run("sale", "sale.json", {}, 6)).tau == sale_file.tau);
  CHECK(std::get<sale::Config>(run("sale", "sale.json", {{"params_first_head", 0.0}}, 6)).tau == sale_file.tau);
  // Mismatches are errors, never a silent slice.
  CHECK_THROWS_WITH_AS(run("sale", "sale.json", {{"params_heads", 8.0}}, 2), contains("has 6 heads, the input has 8"), Error);
  CHECK_THROWS_WITH_AS(run("sale", "sale.json", {}, 2), contains("has 6 heads, the input has 2"), Error);
  CHECK_THROWS_WITH_AS(run("sale", "sale.json", {{"params_first_head", 5.0}, {"params_heads", 6.0}}, 2),
                       contains("heads [5, 7)"), Error);
  CHECK_THROWS_WITH_AS(run("sparge", "sparge.json", {{"params_first_head", -1.0}, {"params_heads", 6.0}}, 2),
                       contains("params_first_head: expected a head index >= 0"), Error);
  CHECK_THROWS_WITH_AS(run("sale", "sale.json", {{"params_first_head", 0.5}, {"params_heads", 6.0}}, 2),
                       contains("expected a head index"), Error);
  CHECK_THROWS_WITH_AS(configure_method("sale", std::vector<NamedValue>{{"params_first_head", 0.0}}, 2, UnknownOptions::error),
                       contains("only with params"), Error);
}

}  // namespace
}  // namespace spattn::test
