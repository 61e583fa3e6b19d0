// FG-Attn query-tile merging and work ordering (research/fgattn.md §3–4); the estimator is in reference/.
#include <algorithm>
#include <numeric>

#include "spattn/error.hpp"
#include "spattn/methods/fg_attn.hpp"

namespace spattn::fg_attn {

std::string_view to_string(Merge merge) {
  switch (merge) {
    case Merge::none: return "none";
    case Merge::consecutive: return "consecutive";
    case Merge::xor_greedy: return "xor";
  }
  return "?";
}

Merge parse_merge(std::string_view name) {
  if (name == "none") return Merge::none;
  if (name == "consecutive") return Merge::consecutive;
  if (name == "xor") return Merge::xor_greedy;
  fail("--merge: unknown strategy '", name, "' (none, consecutive or xor)");
}

void Config::validate() const {
  validate_options(kOptionTable, this, -1);
  require(work_rows >= tile_q && work_rows % tile_q == 0 && work_rows / tile_q <= 32,
          "fgattn work_rows: must be a multiple of tile_q with at most 32 tiles, got ", work_rows);
}

namespace {

/// Bitset rows of one (batch, head): words [Tq][W].
struct Bits {
  std::int64_t words = 0;
  std::vector<std::uint64_t> data;
  const std::uint64_t* row(std::int64_t t) const { return data.data() + t * words; }
};

Bits bits_of(const TileMask& m, std::int64_t b, std::int64_t h) {
  Bits bits;
  const std::int64_t tq = m.shape.num_q_tiles();
  bits.words = bitset_words(m.shape.num_k_tiles());
  bits.data.assign(static_cast<std::size_t>(tq * bits.words), 0);
  for (std::int64_t t = 0; t < tq; ++t)
    for (std::int32_t k : m.row(b, h, t)) bits.data[static_cast<std::size_t>(t * bits.words + k / 64)] |= std::uint64_t{1} << (k % 64);
  return bits;
}

std::vector<std::vector<std::int32_t>> groups_of(const TileMask& m, std::int64_t b, std::int64_t h, Merge merge,
                                                 std::int64_t r) {
  // Query tiles past a short (variable-length) sequence take no part.
  std::int64_t tq = 0;
  while (tq < m.shape.num_q_tiles() && tq * m.shape.tile_q < m.shape.seqlen_q_of(b)) ++tq;
  std::vector<std::vector<std::int32_t>> groups;
  if (merge == Merge::none) r = 1;
  if (merge != Merge::xor_greedy) {
    for (std::int64_t t = 0; t < tq; t += r) {
      groups.emplace_back();
      for (std::int64_t i = t; i < std::min(t + r, tq); ++i) groups.back().push_back(static_cast<std::int32_t>(i));
    }
    return groups;
  }
  const Bits bits = bits_of(m, b, h);
  std::vector<bool> used(static_cast<std::size_t>(tq), false);
  std::vector<std::uint64_t> candidates;
  for (std::int64_t anchor = 0; anchor < tq; ++anchor) {
    if (used[static_cast<std::size_t>(anchor)]) continue;
    used[static_cast<std::size_t>(anchor)] = true;
    groups.push_back({static_cast<std::int32_t>(anchor)});
    candidates.clear();
    for (std::int64_t i = anchor + 1; i < tq; ++i)
      if (!used[static_cast<std::size_t>(i)])
        candidates.push_back(merge_key(xor_distance(bits.row(anchor), bits.row(i), bits.words), static_cast<std::int32_t>(i)));
    const auto take = std::min<std::size_t>(candidates.size(), static_cast<std::size_t>(r - 1));
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(take), candidates.end());
    for (std::size_t c = 0; c < take; ++c) {
      groups.back().push_back(merge_key_index(candidates[c]));
      used[static_cast<std::size_t>(merge_key_index(candidates[c]))] = true;
    }
  }
  return groups;
}

}  // namespace

MergePlan merge_plan(const TileMask& mask, const Config& config) {
  config.validate();
  mask.validate();
  require(mask.shape.tile_q == config.tile_q && mask.shape.tile_k == config.tile_k, "fgattn plan: the mask's tiles ",
          mask.shape.tile_q, "×", mask.shape.tile_k, " differ from the config's ", config.tile_q, "×", config.tile_k);
  const std::int64_t r = config.work_rows / config.tile_q;
  MergePlan p;
  double own = 0, waste = 0, reachable = 0;
  for (std::int64_t b = 0; b < mask.shape.batch; ++b) {
    const std::int64_t nkv = mask.shape.seqlen_kv_of(b);
    for (std::int64_t h = 0; h < mask.shape.mask_heads; ++h)
      for (auto& members : groups_of(mask, b, h, config.merge, r)) {
        WorkItem item;
        item.batch = b;
        item.head = h;
        for (std::int32_t t : members) {
          const auto row = mask.row(b, h, t);
          item.keys.insert(item.keys.end(), row.begin(), row.end());
          own += static_cast<double>(row.size());
          reachable += static_cast<double>(mask.shape.reachable_k_tiles(b, t));
        }
        std::sort(item.keys.begin(), item.keys.end());
        item.keys.erase(std::unique(item.keys.begin(), item.keys.end()), item.keys.end());
        item.membership.assign(item.keys.size(), 0);
        for (std::size_t m = 0; m < members.size(); ++m) {
          const auto row = mask.row(b, h, members[m]);
          for (std::int32_t k : row) {
            const auto at = std::lower_bound(item.keys.begin(), item.keys.end(), k) - item.keys.begin();
            item.membership[static_cast<std::size_t>(at)] |= 1u << m;
          }
        }
        for (std::int32_t k : item.keys)
          item.key_count += std::min<std::int64_t>(std::int64_t{k + 1} * config.tile_k, nkv) - std::int64_t{k} * config.tile_k;
        waste += static_cast<double>(item.keys.size() * members.size());
        item.members = std::move(members);
        p.items.push_back(std::move(item));
      }
  }
  p.redundant_load = own > 0 ? waste / own : 1.0;
  p.density_before = reachable > 0 ? own / reachable : 0.0;
  p.density_after = reachable > 0 ? waste / reachable : 0.0;
  p.order.resize(p.items.size());
  std::iota(p.order.begin(), p.order.end(), 0);
  std::stable_sort(p.order.begin(), p.order.end(), [&](std::int32_t a, std::int32_t c) {
    return p.items[static_cast<std::size_t>(a)].key_count > p.items[static_cast<std::size_t>(c)].key_count;
  });
  if (!p.items.empty()) {
    const double l_max = static_cast<double>(p.items[static_cast<std::size_t>(p.order.front())].key_count);
    const double l_min = static_cast<double>(p.items[static_cast<std::size_t>(p.order.back())].key_count);
    p.skew = l_max > 0 ? (l_max - l_min) / l_max : 0.0;
  }
  return p;
}

TileMask effective_mask(const TileMask& mask, const MergePlan& plan, Semantics semantics) {
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(mask.shape.num_rows()));
  for (const WorkItem& item : plan.items)
    for (std::size_t m = 0; m < item.members.size(); ++m) {
      auto& row = rows[static_cast<std::size_t>(mask.row_index(item.batch, item.head, item.members[m]))];
      for (std::size_t u = 0; u < item.keys.size(); ++u)
        if (semantics == Semantics::union_keys || (item.membership[u] >> m & 1u)) row.push_back(item.keys[u]);
    }
  return TileMask::from_rows(mask.shape, std::move(rows));
}

}  // namespace spattn::fg_attn
