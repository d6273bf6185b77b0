// The seam between a mixture-of-experts layer and its parallel context: the layer finds its
// planned tensors by name, and always calls the dispatcher, whose local case (ep = 1) hands it
// all of its rows at once.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/sublayer.h"
#include "kernels/backend.h"
#include "parallel/expert_dispatch.h"

namespace ustrain {
namespace {

TEST(SubLayerMemory, PlannedTensorsAreFoundByTheirSpecsNames) {
  const std::vector<ActivationSpec> specs{{"a", Shape{2}, DType::f32}, {"b.c", Shape{3}, DType::f32}};
  std::vector<float> a(2), b(3);
  const std::vector<Tensor> tensors{Tensor(a.data(), Shape{2}), Tensor(b.data(), Shape{3})};
  const std::vector<std::string> names = names_of(specs);
  EXPECT_EQ(planned(names, tensors, "b.c").data, b.data());
  EXPECT_EQ(planned(names, tensors, "a").data, a.data());
  EXPECT_TRUE(planned(names, tensors, "absent").empty());  // an optional tensor not planned
  EXPECT_TRUE(planned(names, {}, "a").empty());            // a list not handed in
  EXPECT_THROW(planned(names, {tensors[0]}, "a"), std::logic_error);  // not the list planned
}

// Records what the dispatcher asks of the experts.
class RecordingExperts final : public ExpertCompute {
 public:
  explicit RecordingExperts(bool all_at_once) : all_at_once_(all_at_once) {}
  void forward(Backend&, int expert, Tensor out, Tensor in) override {
    calls.push_back("forward " + std::to_string(expert) + " " + std::to_string(in.shape[0]) + " rows");
    EXPECT_EQ(out.shape, in.shape);
  }
  void backward(Backend&, int expert, Tensor, Tensor, Tensor in) override {
    calls.push_back("backward " + std::to_string(expert) + " " + std::to_string(in.shape[0]) + " rows");
  }
  void forward_all(Backend& be, std::span<const std::int64_t> counts, Tensor out, Tensor in) override {
    if (!all_at_once_) return ExpertCompute::forward_all(be, counts, out, in);
    calls.push_back("forward_all " + std::to_string(in.shape[0]) + " rows, " + std::to_string(counts.size()) +
                    " experts");
  }
  void backward_all(Backend& be, std::span<const std::int64_t> counts, Tensor d_in, Tensor d_out,
                    Tensor in) override {
    if (!all_at_once_) return ExpertCompute::backward_all(be, counts, d_in, d_out, in);
    calls.push_back("backward_all " + std::to_string(in.shape[0]) + " rows");
  }
  void backward_weight_all(Backend&, std::span<const std::int64_t> counts) override {
    calls.push_back("backward_weight_all " + std::to_string(counts.size()) + " experts");
  }
  std::vector<std::string> calls;

 private:
  bool all_at_once_;
};

TEST(ExpertDispatcher, AGroupOfOneHandsTheExpertsAllOfTheRowsAtOnce) {
  const auto be = make_backend(Device::cpu, 1);
  ExpertDispatcher local;
  const std::vector<std::int64_t> counts{2, 0, 1};
  std::vector<float> in(3 * 4), out(3 * 4), d_in(3 * 4);
  const Tensor rows(in.data(), Shape{3, 4}), outs(out.data(), Shape{3, 4}), grads(d_in.data(), Shape{3, 4});
  RecordingExperts experts(true);
  const auto alongside = [&] { experts.calls.push_back("alongside"); };
  local.forward(*be, experts, counts, rows, outs, {}, alongside);
  local.backward(*be, experts, counts, rows, outs, grads, {}, alongside);
  local.backward_weight(*be, experts, counts);
  EXPECT_EQ(experts.calls, (std::vector<std::string>{"alongside", "forward_all 3 rows, 3 experts", "alongside",
                                                     "backward_all 3 rows", "backward_weight_all 3 experts"}));
}

TEST(ExpertDispatcher, ByDefaultAllOfTheRowsRunExpertAfterExpert) {
  const auto be = make_backend(Device::cpu, 1);
  ExpertDispatcher local;
  const std::vector<std::int64_t> counts{2, 0, 1};
  std::vector<float> in(3 * 4), out(3 * 4), d_in(3 * 4);
  const Tensor rows(in.data(), Shape{3, 4}), outs(out.data(), Shape{3, 4}), grads(d_in.data(), Shape{3, 4});
  RecordingExperts experts(false);
  local.forward(*be, experts, counts, rows, outs, {});
  local.backward(*be, experts, counts, rows, outs, grads, {});
  EXPECT_EQ(experts.calls, (std::vector<std::string>{"forward 0 2 rows", "forward 2 1 rows", "backward 0 2 rows",
                                                     "backward 2 1 rows"}));
}

}  // namespace
}  // namespace ustrain
