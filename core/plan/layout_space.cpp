#include "core/plan/layout_space.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/error.h"

namespace ustrain {

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> d{1};
  // Each prime power p^k of n multiplies the divisors found so far: trial division up to the
  // square root of what is left, a million steps for the planner's largest batch.
  const auto multiply = [&d](std::int64_t prime, int power) {
    const std::size_t before = d.size();
    std::int64_t factor = 1;
    for (int k = 0; k < power; ++k) {
      factor *= prime;
      for (std::size_t i = 0; i < before; ++i) d.push_back(d[i] * factor);
    }
  };
  std::int64_t rest = n;
  for (std::int64_t p = 2; p <= rest / p; ++p) {
    int power = 0;
    for (; rest % p == 0; rest /= p) ++power;
    if (power > 0) multiply(p, power);
  }
  if (rest > 1) multiply(rest, 1);
  std::sort(d.begin(), d.end());
  return d;
}

Recipe recipe_with_layout(Recipe r, const Layout& l, std::int64_t global_batch) {
  ParallelSection& p = r.parallel;
  p.dp = l.dp, p.tp = l.tp, p.pp = l.pp, p.cp = l.cp, p.ep = l.ep, p.zero = l.zero, p.sp = l.sp;
  p.pp_schedule = l.pp_schedule;
  p.virtual_stages = l.virtual_stages;
  p.dp_shard = l.dp_shard;
  r.train.recompute = l.recompute;
  r.train.micro_batch = l.micro_batch;
  r.train.global_batch = global_batch;
  return r;
}

namespace {

// The (schedule, virtual stages) pairs worth trying at pp: one schedule without a pipeline.
std::vector<std::pair<std::string, std::int64_t>> schedules(std::int64_t pp, std::int64_t layers) {
  if (pp == 1) return {{"1f1b", 1}};
  std::vector<std::pair<std::string, std::int64_t>> s = {{"afab", 1}, {"1f1b", 1}, {"zero-bubble", 1}};
  for (std::int64_t v = 2; v <= 4 && pp * v <= layers; v *= 2) s.emplace_back("interleaved", v);
  return s;
}

}  // namespace

Recipe Candidate::recipe() const { return recipe_with_layout(*base, layout, global_batch); }

std::vector<std::string> Layout::overrides() const {
  // Every dimension, 1s included: the lines are pasted after the user's own --set options,
  // whose values for a dimension the layout does not use must not survive.
  std::vector<std::string> o = {fmt::format("parallel.dp={}", dp), fmt::format("parallel.tp={}", tp),
                                fmt::format("parallel.pp={}", pp), fmt::format("parallel.cp={}", cp),
                                fmt::format("parallel.ep={}", ep)};
  o.push_back(fmt::format("parallel.zero={}", zero));
  if (hybrid()) o.push_back(fmt::format("parallel.dp_shard={}", dp_shard));
  if (tp > 1) o.push_back(fmt::format("parallel.sp={}", sp ? "true" : "false"));
  o.push_back(fmt::format("parallel.pp_schedule={}", pp_schedule));
  o.push_back(fmt::format("parallel.virtual_stages={}", virtual_stages));
  o.push_back(fmt::format("train.micro_batch={}", micro_batch));
  o.push_back(fmt::format("train.global_batch={}", micro_batch * grad_accum * dp));
  o.push_back(fmt::format("train.recompute={}", recompute));
  return o;
}

const std::vector<std::string>& layout_keys() {
  static const std::vector<std::string> keys = {"parallel.dp",   "parallel.tp",   "parallel.pp",
                                                "parallel.cp",   "parallel.ep",   "parallel.zero",
                                                "parallel.sp",   "parallel.pp_schedule", "parallel.virtual_stages",
                                                "parallel.dp_shard"};
  return keys;
}

std::set<std::string> layout_keys_among(const std::set<std::string>& set_by_hand,
                                        const std::set<std::string>& overridden) {
  std::set<std::string> kept;
  for (const std::string& key : set_by_hand)
    if (std::find(layout_keys().begin(), layout_keys().end(), key) != layout_keys().end()) kept.insert(key);
  for (const char* key : {"train.micro_batch", "train.recompute"})
    if (overridden.count(key)) kept.insert(key);
  return kept;
}

std::string given_value(const std::string& key, const ParallelSection& p) {
  if (key == "parallel.dp") return std::to_string(p.dp);
  if (key == "parallel.tp") return std::to_string(p.tp);
  if (key == "parallel.pp") return std::to_string(p.pp);
  if (key == "parallel.cp") return std::to_string(p.cp);
  if (key == "parallel.ep") return std::to_string(p.ep);
  if (key == "parallel.zero") return std::to_string(p.zero);
  if (key == "parallel.sp") return p.sp ? "true" : "false";
  if (key == "parallel.pp_schedule") return p.pp_schedule;
  if (key == "parallel.virtual_stages") return std::to_string(p.virtual_stages);
  if (key == "parallel.dp_shard") return std::to_string(p.dp_shard);
  return "?";
}

std::string given_value(const std::string& key, const SearchSpace& space) {
  if (key == "train.micro_batch") return std::to_string(space.given_train.micro_batch);
  if (key == "train.recompute") return space.given_train.recompute;
  return given_value(key, space.given);
}

bool keeps(const Layout& l, const SearchSpace& space) {
  const ParallelSection& g = space.given;
  const auto fixed = [&space](const char* key) { return space.fixed.count(key) > 0; };
  if (fixed("parallel.dp") && l.dp != g.dp) return false;
  if (fixed("parallel.tp") && l.tp != g.tp) return false;
  if (fixed("parallel.pp") && l.pp != g.pp) return false;
  if (fixed("parallel.cp") && l.cp != g.cp) return false;
  if (fixed("parallel.ep") && l.ep != g.ep) return false;
  if (fixed("parallel.zero") && l.dp * l.cp > 1 && l.zero != g.zero) return false;
  if (fixed("parallel.sp") && l.tp > 1 && l.sp != g.sp) return false;
  if (fixed("parallel.pp_schedule") && l.pp > 1 && l.pp_schedule != g.pp_schedule) return false;
  if (fixed("parallel.virtual_stages") && l.pp > 1 && l.virtual_stages != g.virtual_stages) return false;
  if (fixed("parallel.dp_shard") && l.shard_dp() != (g.dp_shard == 0 ? l.dp : g.dp_shard)) return false;
  if (fixed("train.micro_batch") && l.micro_batch != space.given_train.micro_batch) return false;
  if (fixed("train.recompute") && l.recompute != space.given_train.recompute) return false;
  return true;
}

std::string Layout::str() const {
  std::string s = fmt::format("dp {} tp {}{} pp {}", dp, tp, tp > 1 && sp ? "+sp" : "", pp);
  if (cp > 1) s += fmt::format(" cp {}", cp);
  if (ep > 1) s += fmt::format(" ep {}", ep);
  if (hybrid()) s += fmt::format(" dp_shard {}", dp_shard);
  return s;
}

namespace {

// The micro-batch sizes worth planning for `per_rank` sequences of `seq` tokens per rank and
// step: the divisors within kMaxMicroBatchTokens and kMaxMicroBatchesPerStep.
std::vector<std::int64_t> micro_batches(std::int64_t per_rank, std::int64_t seq) {
  std::vector<std::int64_t> kept;
  for (std::int64_t mb : divisors(per_rank))
    if (mb <= kMaxMicroBatchTokens / seq && per_rank / mb <= kMaxMicroBatchesPerStep) kept.push_back(mb);
  return kept;
}

}  // namespace

std::vector<std::int64_t> shard_choices(std::int64_t dp, std::int64_t cp, std::int64_t tp, std::int64_t zero,
                                        std::int64_t devices_per_node) {
  std::vector<std::int64_t> choices{0};
  if (zero == 0 || dp * cp * tp <= devices_per_node) return choices;  // nothing sharded, or one node
  // A smaller block inside a node gathers over the same links as the largest one, and sends
  // more across the nodes and holds more: only the largest is tried.
  std::int64_t in_node = 0;
  std::vector<std::int64_t> whole_nodes;
  for (std::int64_t shard : divisors(dp)) {
    const std::int64_t block = shard * cp * tp;
    if (shard == dp) continue;
    if (block <= devices_per_node && devices_per_node % block == 0) in_node = shard;
    else if (block % devices_per_node == 0) whole_nodes.push_back(shard);
  }
  if (in_node > 0) choices.push_back(in_node);
  choices.insert(choices.end(), whole_nodes.begin(), whole_nodes.end());
  return choices;
}

namespace {

[[noreturn]] void refuse_search(const SearchSpace& space) {
  throw UserError(fmt::format("{} devices with a global batch of {} sequences make more than {} layouts to try; fix "
                              "some of the parallel keys to narrow the search (e.g. --set parallel.tp=8 --set "
                              "parallel.pp=4 --set parallel.zero=1), or plan for fewer --gpus or a smaller "
                              "--global-batch-tokens",
                              space.devices, space.global_batch, kMaxLayoutsTried));
}

}  // namespace

LayoutSearch enumerate_layouts(const Recipe& base, const SearchSpace& space) {
  if (space.devices > kMaxPlanDevices)
    throw UserError(fmt::format("--gpus {}: the planner plans at most 2^20 = {} devices, beyond the largest clusters; "
                                "give fewer devices", space.devices, kMaxPlanDevices));
  LayoutSearch found;
  const auto shared = std::make_shared<const Recipe>(base);
  std::int64_t tried = 0;
  std::vector<Candidate>& out = found.candidates;
  const std::int64_t n = space.devices;
  const std::int64_t node = space.devices_per_node;
  // A dp_shard set by hand is tried as given (the recipe checks refuse it where it cannot be).
  const auto shards = [&space, node](std::int64_t dp, std::int64_t cp, std::int64_t tp, std::int64_t zero) {
    if (!space.fixed.count("parallel.dp_shard")) return shard_choices(dp, cp, tp, zero, node);
    return std::vector<std::int64_t>{space.given.dp_shard == dp ? 0 : space.given.dp_shard};
  };
  for (std::int64_t tp : divisors(n)) {
    if (!space.model_parallel_across_nodes && tp > node) continue;
    for (std::int64_t pp : divisors(n / tp))
      for (std::int64_t cp : divisors(n / tp / pp)) {
        const std::int64_t dp = n / tp / pp / cp;
        if (space.global_batch % dp != 0) continue;
        const std::int64_t per_rank = space.global_batch / dp;
        const std::vector<std::int64_t> sizes = micro_batches(per_rank, base.train.seq_len);
        if (sizes.empty()) found.beyond_bounds = true;
        for (std::int64_t ep : divisors(dp * cp)) {
          if (!space.model_parallel_across_nodes && ep > node) continue;
          for (std::int64_t zero = 0; zero <= (dp * cp > 1 ? 3 : 0); ++zero)
            for (bool sp : tp > 1 ? std::vector<bool>{true, false} : std::vector<bool>{false})
              for (const char* recompute : {"none", "selective", "full"})
                for (std::int64_t shard : shards(dp, cp, tp, zero))
                  for (std::int64_t mb : sizes)
                    for (const auto& [schedule, v] : schedules(pp, base.model.n_layers)) {
                      Layout l{dp, tp, pp, cp, ep, zero, sp, recompute, mb, per_rank / mb, schedule, v, shard};
                      if (!keeps(l, space)) continue;
                      if (++tried > kMaxLayoutsTried) refuse_search(space);
                      Candidate c{l, shared, space.global_batch};
                      try {
                        check_recipe(c.recipe());
                      } catch (const UserError&) {
                        continue;  // the trainer would refuse it
                      }
                      out.push_back(std::move(c));
                    }
        }
      }
  }
  return found;
}

}  // namespace ustrain
