// The mixture-of-experts ops on the CUDA backend against the CPU reference, in fp32, bf16 and
// fp16: routing (softmax or sigmoid scores, renormalised gates or not, top-1 to top-E of E = 1
// to 256 experts), its backward with and without the z-loss term, balancing (a routing bias
// and a sequence gradient of the normalised scores), and the gate-weighted combine with its
// backward. The router logits lie on a grid of 1/64 in [-4, 4), exact in every
// activation dtype: two experts' probs are then either exactly equal (a tie, which goes to the
// lower expert) or apart by far more than either backend's rounding, so the experts chosen must
// be the CPU's exactly. Tolerances: gpu_test_support.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_support.h"

namespace ustrain::gpu_test {
namespace {

class GpuMoeTest : public GpuActTest {};

struct RouteCase {
  std::int64_t experts, top_k;
  bool sigmoid, renormalize;

  MoeRouting routing() const { return {static_cast<int>(top_k), sigmoid, renormalize}; }
  std::string str() const {
    return " E=" + std::to_string(experts) + " k=" + std::to_string(top_k) + (sigmoid ? " sigmoid" : " softmax") +
           (renormalize ? " renormalised" : "");
  }
};

// E = 1, 8, 64, 256; k = 1, 2 and E; every score function and gate normalisation.
std::vector<RouteCase> route_cases() {
  std::vector<RouteCase> cases;
  for (std::int64_t experts : {1, 8, 64, 256}) {
    std::vector<std::int64_t> ks = {1, std::min<std::int64_t>(2, experts), experts};
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
    for (std::int64_t k : ks)
      for (bool sigmoid : {false, true})
        for (bool renormalize : {false, true}) cases.push_back({experts, k, sigmoid, renormalize});
  }
  return cases;
}

constexpr std::int64_t kTokens = 45;  // not a multiple of the rows a block routes

// Rows with exact ties and what they must route to, and random rows on the 1/64 grid.
// Row 0: every logit equal, so experts 0, 1, ..., k - 1. Row 1: the last expert highest and
// the rest equal, so E - 1, 0, 1, .... Row 2: logit -(e mod 4) / 8, so equal logits four
// experts apart (within a lane and across lanes of a warp). Row 3: equal pairs (2i, 2i + 1).
std::vector<float> router_logits(std::int64_t experts, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> grid(-256, 255);
  std::vector<float> x(static_cast<std::size_t>(kTokens * experts));
  for (float& v : x) v = static_cast<float>(grid(rng)) / 64.0f;
  for (std::int64_t e = 0; e < experts; ++e) {
    x[static_cast<std::size_t>(e)] = 0.75f;
    x[static_cast<std::size_t>(experts + e)] = e == experts - 1 ? 1.5f : -0.5f;
    x[static_cast<std::size_t>(2 * experts + e)] = -static_cast<float>(e % 4) / 8.0f;
    x[static_cast<std::size_t>(3 * experts + e)] = static_cast<float>((e / 2) % 5) / 16.0f;
  }
  return x;
}

std::vector<std::int32_t> download_ids(Backend& backend, const DeviceTensor& d) {
  std::vector<std::int32_t> ids(static_cast<std::size_t>(d.tensor().numel()));
  backend.copy(Tensor(ids.data(), d.tensor().shape, DType::i32), d.tensor());
  return ids;
}

// Every pick of got equal to want's, naming the first that differs.
void expect_same_experts(const std::vector<std::int32_t>& got, const std::vector<std::int32_t>& want,
                         std::int64_t k, const std::string& at) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      ADD_FAILURE() << "experts differ from the CPU's first at token " << i / static_cast<std::size_t>(k) << " pick "
                    << i % static_cast<std::size_t>(k) << ": " << got[i] << " vs " << want[i] << at;
      return;
    }
}

// The CPU's routing of logits (N, E): what the backward tests start from.
struct CpuRoute {
  std::vector<std::int32_t> experts;
  std::vector<float> gates, probs, lse;
};

CpuRoute cpu_route(CpuBackend& cpu, std::vector<float>& logits, const RouteCase& c) {
  const std::int64_t E = c.experts, k = c.top_k;
  CpuRoute r{std::vector<std::int32_t>(static_cast<std::size_t>(kTokens * k)),
             std::vector<float>(static_cast<std::size_t>(kTokens * k)),
             std::vector<float>(static_cast<std::size_t>(kTokens * E)), std::vector<float>(kTokens)};
  cpu.moe_route(host_ids(r.experts, {kTokens, k}), host(r.gates, {kTokens, k}), host(r.probs, {kTokens, E}),
                host(r.lse, {kTokens}), host(logits, {kTokens, E}), c.routing(), Tensor());
  return r;
}

TEST_P(GpuMoeTest, RouteMatchesCpuWithTiesToTheLowerExpert) {
  for (const RouteCase& c : route_cases()) {
    const std::int64_t E = c.experts, k = c.top_k;
    const std::string at = c.str() + " in " + dtype_name(act());
    auto logits = router_logits(E, static_cast<std::uint32_t>(E + k));
    const CpuRoute want = cpu_route(cpu(), logits, c);

    auto glogits = on_device(gpu(), logits, {kTokens, E}, act());
    DeviceTensor experts(gpu(), {kTokens, k}, DType::i32), gates(gpu(), {kTokens, k}, DType::f32),
        probs(gpu(), {kTokens, E}, DType::f32), lse(gpu(), {kTokens}, DType::f32);
    gpu().moe_route(experts, gates, probs, lse, *glogits, c.routing(), Tensor());
    const auto got = download_ids(gpu(), experts);

    expect_same_experts(got, want.experts, k, at);
    // The tie rows, independently of the CPU.
    for (std::int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(got[static_cast<std::size_t>(j)], j) << "all-equal row, pick " << j << at;
      EXPECT_EQ(got[static_cast<std::size_t>(k + j)], j == 0 ? E - 1 : j - 1) << "one-highest row, pick " << j << at;
    }
    expect_close(probs.download(), want.probs, fp32_tolerance(Measure::max_rel), "moe probs" + at);
    expect_close(gates.download(), want.gates, fp32_tolerance(Measure::max_rel), "moe gates" + at);
    expect_close(lse.download(), want.lse, fp32_tolerance(Measure::max_rel), "moe lse" + at);
  }
}

TEST_P(GpuMoeTest, RouteBackwardMatchesCpuWithAndWithoutZLoss) {
  for (const RouteCase& c : route_cases())
    for (const float z_grad : {0.0f, 0.05f}) {
      const std::int64_t E = c.experts, k = c.top_k;
      const std::string at = c.str() + " z_grad=" + std::to_string(z_grad) + " in " + dtype_name(act());
      const Shape ls{kTokens, E}, gs{kTokens, k}, rs{kTokens};
      auto logits = router_logits(E, static_cast<std::uint32_t>(3 * E + k));
      CpuRoute r = cpu_route(cpu(), logits, c);
      auto dgates = random_values(static_cast<std::size_t>(kTokens * k), static_cast<std::uint32_t>(E + 5 * k),
                                  DType::f32);
      std::vector<float> want(logits.size());
      cpu().moe_route_backward(host(want, ls), host(dgates, gs), host(logits, ls), host(r.probs, ls),
                               host(r.lse, rs), host_ids(r.experts, gs), host(r.gates, gs), c.routing(), z_grad,
                               Tensor());

      // The GPU gets the CPU's routing, so that only the backward is measured.
      auto glogits = on_device(gpu(), logits, ls, act());
      auto gdgates = on_device(gpu(), dgates, gs, DType::f32), gprobs = on_device(gpu(), r.probs, ls, DType::f32);
      auto glse = on_device(gpu(), r.lse, rs, DType::f32), ggates = on_device(gpu(), r.gates, gs, DType::f32);
      DeviceTensor gexperts(gpu(), gs, DType::i32), dlogits(gpu(), ls, act());
      gexperts.upload_ids(r.experts);
      gpu().moe_route_backward(dlogits, *gdgates, *glogits, *gprobs, *glse, gexperts, *ggates, c.routing(), z_grad,
                               Tensor());
      expect_close(dlogits.download(), want, act_tolerance(act(), Measure::max_rel), "moe dlogits" + at);
    }
}

// Balancing: a routing bias (multiples of 1/8, so that probs + bias keep the grid's ties
// and gaps) changes the choices but not the gates; a sequence gradient of the normalised
// scores (kTokens = 3 sequences of 15 tokens) adds to the backward.
TEST_P(GpuMoeTest, RouteWithBiasAndSequenceGradientMatchesCpu) {
  constexpr std::int64_t kSeqs = 3;
  for (const RouteCase& c : route_cases()) {
    const std::int64_t E = c.experts, k = c.top_k;
    const std::string at = c.str() + " in " + dtype_name(act());
    const Shape ls{kTokens, E}, gs{kTokens, k}, rs{kTokens}, bs{E}, ss{kSeqs, E};
    auto logits = router_logits(E, static_cast<std::uint32_t>(5 * E + k));
    std::vector<float> bias(static_cast<std::size_t>(E));
    for (std::int64_t e = 0; e < E; ++e) bias[static_cast<std::size_t>(e)] = static_cast<float>((e * 5) % 7 - 3) / 8.0f;
    CpuRoute r{std::vector<std::int32_t>(static_cast<std::size_t>(kTokens * k)),
               std::vector<float>(static_cast<std::size_t>(kTokens * k)),
               std::vector<float>(static_cast<std::size_t>(kTokens * E)), std::vector<float>(kTokens)};
    cpu().moe_route(host_ids(r.experts, gs), host(r.gates, gs), host(r.probs, ls), host(r.lse, rs), host(logits, ls),
                    c.routing(), host(bias, bs));
    auto glogits = on_device(gpu(), logits, ls, act());
    auto gbias = on_device(gpu(), bias, bs, DType::f32);
    DeviceTensor experts(gpu(), gs, DType::i32), gates(gpu(), gs, DType::f32), probs(gpu(), ls, DType::f32),
        lse(gpu(), rs, DType::f32);
    gpu().moe_route(experts, gates, probs, lse, *glogits, c.routing(), *gbias);
    expect_same_experts(download_ids(gpu(), experts), r.experts, k, " (biased)" + at);
    expect_close(gates.download(), r.gates, fp32_tolerance(Measure::max_rel), "moe biased gates" + at);

    auto dgates = random_values(static_cast<std::size_t>(kTokens * k), static_cast<std::uint32_t>(E + 7 * k),
                                DType::f32);
    auto seq_grad = random_values(static_cast<std::size_t>(kSeqs * E), static_cast<std::uint32_t>(E + 9 * k),
                                  DType::f32);
    std::vector<float> want(logits.size());
    cpu().moe_route_backward(host(want, ls), host(dgates, gs), host(logits, ls), host(r.probs, ls), host(r.lse, rs),
                             host_ids(r.experts, gs), host(r.gates, gs), c.routing(), 0.05f, host(seq_grad, ss));
    auto gdgates = on_device(gpu(), dgates, gs, DType::f32), gprobs = on_device(gpu(), r.probs, ls, DType::f32);
    auto glse = on_device(gpu(), r.lse, rs, DType::f32), ggates = on_device(gpu(), r.gates, gs, DType::f32);
    auto gseq = on_device(gpu(), seq_grad, ss, DType::f32);
    DeviceTensor gexperts(gpu(), gs, DType::i32), dlogits(gpu(), ls, act());
    gexperts.upload_ids(r.experts);
    gpu().moe_route_backward(dlogits, *gdgates, *glogits, *gprobs, *glse, gexperts, *ggates, c.routing(), 0.05f,
                             *gseq);
    expect_close(dlogits.download(), want, act_tolerance(act(), Measure::max_rel), "moe dlogits with balance" + at);
  }
}

struct CombineCase {
  std::int64_t top_k, dim;
};

// k = 1, 2, 8; D = 64 (16-byte rows in every dtype), 100 (in fp32 only), 67 (in none).
std::vector<CombineCase> combine_cases() {
  std::vector<CombineCase> cases;
  for (std::int64_t k : {1, 2, 8})
    for (std::int64_t dim : {64, 100, 67}) cases.push_back({k, dim});
  return cases;
}

constexpr std::int64_t kCombineTokens = 29;

TEST_P(GpuMoeTest, CombineMatchesCpu) {
  for (const CombineCase& c : combine_cases()) {
    const std::int64_t N = kCombineTokens, k = c.top_k, D = c.dim;
    const std::string at = " k=" + std::to_string(k) + " D=" + std::to_string(D) + " in " + dtype_name(act());
    const Shape rows_shape{N * k, D}, gs{N, k}, out_shape{N, D};
    auto rows = random_values(static_cast<std::size_t>(N * k * D), static_cast<std::uint32_t>(k + D), act());
    auto gates = random_values(static_cast<std::size_t>(N * k), static_cast<std::uint32_t>(k * D), DType::f32, 0.0f);
    std::vector<float> want(static_cast<std::size_t>(N * D));
    cpu().moe_combine(host(want, out_shape), host(rows, rows_shape), host(gates, gs));

    auto grows = on_device(gpu(), rows, rows_shape, act());
    auto ggates = on_device(gpu(), gates, gs, DType::f32);
    DeviceTensor out(gpu(), out_shape, act());
    gpu().moe_combine(out, *grows, *ggates);
    expect_close(out.download(), want, act_tolerance(act(), Measure::max_rel), "moe combine" + at);
  }
}

TEST_P(GpuMoeTest, CombineBackwardMatchesCpu) {
  for (const CombineCase& c : combine_cases()) {
    const std::int64_t N = kCombineTokens, k = c.top_k, D = c.dim;
    const std::string at = " k=" + std::to_string(k) + " D=" + std::to_string(D) + " in " + dtype_name(act());
    const Shape rows_shape{N * k, D}, gs{N, k}, out_shape{N, D};
    auto rows = random_values(static_cast<std::size_t>(N * k * D), static_cast<std::uint32_t>(2 * k + D), act());
    auto dout = random_values(static_cast<std::size_t>(N * D), static_cast<std::uint32_t>(3 * k + D), act());
    auto gates = random_values(static_cast<std::size_t>(N * k), static_cast<std::uint32_t>(k * D + 1), DType::f32,
                               0.0f);
    std::vector<float> drows(rows.size()), dgates(gates.size());
    cpu().moe_combine_backward(host(drows, rows_shape), host(dgates, gs), host(dout, out_shape),
                               host(rows, rows_shape), host(gates, gs));

    auto grows = on_device(gpu(), rows, rows_shape, act()), gdout = on_device(gpu(), dout, out_shape, act());
    auto ggates = on_device(gpu(), gates, gs, DType::f32);
    DeviceTensor gdrows(gpu(), rows_shape, act()), gdgates(gpu(), gs, DType::f32);
    gpu().moe_combine_backward(gdrows, gdgates, *gdout, *grows, *ggates);
    expect_close(gdrows.download(), drows, act_tolerance(act(), Measure::max_rel), "moe combine drows" + at);
    // A sum over D of the same act inputs: the fp32 bound, norm-wise.
    expect_close(gdgates.download(), dgates, fp32_tolerance(Measure::norm_rel), "moe combine dgates" + at);
  }
}

// No atomics and fixed summation orders: a second call writes the same bits.
TEST_P(GpuMoeTest, EveryOpRepeatsBitForBit) {
  const RouteCase c{64, 8, false, true};
  const std::int64_t E = c.experts, k = c.top_k, D = 96;
  const Shape ls{kTokens, E}, gs{kTokens, k}, rows_shape{kTokens * k, D}, out_shape{kTokens, D};
  auto glogits = on_device(gpu(), router_logits(E, 11), ls, act());
  auto gdgates = on_device(gpu(), random_values(static_cast<std::size_t>(kTokens * k), 12, DType::f32), gs, DType::f32);
  auto grows = on_device(gpu(), random_values(static_cast<std::size_t>(kTokens * k * D), 13, act()), rows_shape, act());
  auto gdout = on_device(gpu(), random_values(static_cast<std::size_t>(kTokens * D), 14, act()), out_shape, act());
  DeviceTensor experts(gpu(), gs, DType::i32), gates(gpu(), gs, DType::f32), probs(gpu(), ls, DType::f32),
      lse(gpu(), {kTokens}, DType::f32), dlogits(gpu(), ls, act()), out(gpu(), out_shape, act()),
      drows(gpu(), rows_shape, act()), dgates(gpu(), gs, DType::f32);
  std::vector<std::vector<float>> first;
  for (int run = 0; run < 2; ++run) {
    gpu().moe_route(experts, gates, probs, lse, *glogits, c.routing(), Tensor());
    gpu().moe_route_backward(dlogits, *gdgates, *glogits, probs, lse, experts, gates, c.routing(), 0.01f, Tensor());
    gpu().moe_combine(out, *grows, gates);
    gpu().moe_combine_backward(drows, dgates, *gdout, *grows, gates);
    std::vector<std::vector<float>> results = {gates.download(), probs.download(), lse.download(),
                                               dlogits.download(), out.download(), drows.download(),
                                               dgates.download()};
    if (run == 0) {
      first = std::move(results);
      continue;
    }
    const char* names[] = {"gates", "probs", "lse", "dlogits", "out", "drows", "dgates"};
    for (std::size_t i = 0; i < results.size(); ++i)
      EXPECT_TRUE(same_bits(results[i], first[i])) << names[i] << " differ between two calls in " << dtype_name(act());
  }
}

INSTANTIATE_TEST_SUITE_P(Act, GpuMoeTest, ::testing::Values(DType::f32, DType::bf16, DType::f16), act_param_name);

}  // namespace
}  // namespace ustrain::gpu_test
