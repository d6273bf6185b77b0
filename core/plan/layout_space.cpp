#include "core/plan/layout_space.h"

#include <fmt/format.h>

#include "kernels/error.h"

namespace ustrain {
namespace {

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> d;
  for (std::int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

Recipe with_layout(Recipe r, const Layout& l, std::int64_t global_batch) {
  ParallelSection& p = r.parallel;
  p.dp = l.dp, p.tp = l.tp, p.pp = l.pp, p.cp = l.cp, p.ep = l.ep, p.zero = l.zero, p.sp = l.sp;
  p.pp_schedule = l.pp_schedule;
  p.virtual_stages = l.virtual_stages;
  r.train.recompute = l.recompute;
  r.train.micro_batch = l.micro_batch;
  r.train.global_batch = global_batch;
  return r;
}

// The (schedule, virtual stages) pairs worth trying at pp: one schedule without a pipeline.
std::vector<std::pair<std::string, std::int64_t>> schedules(std::int64_t pp, std::int64_t layers) {
  if (pp == 1) return {{"1f1b", 1}};
  std::vector<std::pair<std::string, std::int64_t>> s = {{"afab", 1}, {"1f1b", 1}, {"zero-bubble", 1}};
  for (std::int64_t v = 2; v <= 4 && pp * v <= layers; v *= 2) s.emplace_back("interleaved", v);
  return s;
}

}  // namespace

std::vector<std::string> Layout::overrides() const {
  // Every dimension, 1s included: the lines are pasted after the user's own --set options,
  // whose values for a dimension the layout does not use must not survive.
  std::vector<std::string> o = {fmt::format("parallel.dp={}", dp), fmt::format("parallel.tp={}", tp),
                                fmt::format("parallel.pp={}", pp), fmt::format("parallel.cp={}", cp),
                                fmt::format("parallel.ep={}", ep)};
  o.push_back(fmt::format("parallel.zero={}", zero));
  if (tp > 1) o.push_back(fmt::format("parallel.sp={}", sp ? "true" : "false"));
  o.push_back(fmt::format("parallel.pp_schedule={}", pp_schedule));
  o.push_back(fmt::format("parallel.virtual_stages={}", virtual_stages));
  o.push_back(fmt::format("train.micro_batch={}", micro_batch));
  o.push_back(fmt::format("train.global_batch={}", micro_batch * grad_accum * dp));
  o.push_back(fmt::format("train.recompute={}", recompute));
  return o;
}

std::string Layout::str() const {
  std::string s = fmt::format("dp {} tp {}{} pp {}", dp, tp, tp > 1 && sp ? "+sp" : "", pp);
  if (cp > 1) s += fmt::format(" cp {}", cp);
  if (ep > 1) s += fmt::format(" ep {}", ep);
  return s;
}

std::vector<Candidate> enumerate_layouts(const Recipe& base, const SearchSpace& space) {
  std::vector<Candidate> out;
  const std::int64_t n = space.devices;
  const std::int64_t node = space.devices_per_node;
  for (std::int64_t tp : divisors(n)) {
    if (!space.model_parallel_across_nodes && tp > node) continue;
    for (std::int64_t pp : divisors(n / tp))
      for (std::int64_t cp : divisors(n / tp / pp)) {
        const std::int64_t dp = n / tp / pp / cp;
        if (space.global_batch % dp != 0) continue;
        const std::int64_t per_rank = space.global_batch / dp;
        for (std::int64_t ep : divisors(dp * cp)) {
          if (!space.model_parallel_across_nodes && ep > node) continue;
          for (std::int64_t zero = 0; zero <= (dp * cp > 1 ? 3 : 0); ++zero)
            for (bool sp : tp > 1 ? std::vector<bool>{true, false} : std::vector<bool>{false})
              for (const char* recompute : {"none", "selective", "full"})
                for (std::int64_t mb : divisors(per_rank))
                  for (const auto& [schedule, v] : schedules(pp, base.model.n_layers)) {
                    Layout l{dp, tp, pp, cp, ep, zero, sp, recompute, mb, per_rank / mb, schedule, v};
                    Candidate c{l, with_layout(base, l, space.global_batch)};
                    try {
                      check_recipe(c.recipe);
                    } catch (const UserError&) {
                      continue;  // the trainer would refuse it
                    }
                    out.push_back(std::move(c));
                  }
        }
      }
  }
  return out;
}

}  // namespace ustrain
