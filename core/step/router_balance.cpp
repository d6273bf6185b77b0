#include "core/step/router_balance.h"

#include "core/step/fp8_layers.h"
#include "kernels/error.h"
#include "kernels/fp8/fp8_layers.h"

namespace ustrain {

void step_router_bias(std::vector<float>& bias, std::span<const double> load, double rate) {
  USTRAIN_ASSERT(bias.size() == load.size() && !load.empty(), "a router bias and its load differ in experts");
  double total = 0;
  for (double l : load) total += l;
  const double mean = total / static_cast<double>(load.size());
  const auto step = static_cast<float>(rate);
  for (std::size_t i = 0; i < bias.size(); ++i) {
    if (load[i] < mean) bias[i] += step;
    else if (load[i] > mean) bias[i] -= step;
  }
}

void balance_router_biases(LlamaModel& model, Communicator& batch_group, double rate) {
  const std::vector<RouterBias*> biases = model.router_biases();
  if (biases.empty()) return;
  const std::vector<const MoeLoad*> loads = model.moe_loads();
  USTRAIN_ASSERT(loads.size() == biases.size(), "every MoE layer has a router bias when balancing");
  std::vector<double> counts;  // the layers' loads, one after the other
  for (const MoeLoad* l : loads) counts.insert(counts.end(), l->tokens.begin(), l->tokens.end());
  batch_group.all_reduce(Tensor(counts.data(), Shape{static_cast<std::int64_t>(counts.size())}, DType::f64)).wait();
  std::size_t at = 0;
  for (std::size_t l = 0; l < biases.size(); ++l) {
    USTRAIN_ASSERT(loads[l]->layer == biases[l]->layer, "router biases and loads out of layer order");
    const std::size_t e = biases[l]->values.size();
    step_router_bias(biases[l]->values, std::span<const double>(counts).subspan(at, e), rate);
    at += e;
  }
}

ModelState model_state_of(LlamaModel& model, Backend& backend, bool saves) {
  ModelState state{LlamaModel::state_declaration(model.config()), {}, saves};
  for (RouterBias* b : model.router_biases()) state.held.push_back({b->name, &b->values});
  const std::vector<ParamDecl> fp8 = fp8_state_declaration(model.params().whole_model(), backend);
  state.whole_model.insert(state.whole_model.end(), fp8.begin(), fp8.end());
  if (fp8::Fp8Layers* layers = backend.fp8_layers())
    for (const auto& [name, s] : layers->by_name()) state.held.push_back({name, &s->values(), /*kept_when_absent=*/true});
  return state;
}

}  // namespace ustrain
