#include "core/step/fp8_layers.h"

#include <algorithm>

#include "kernels/cuda/fp8/fp8_scratch_sizes.h"
#include "kernels/fp8/fp8_layers.h"

namespace ustrain {
namespace {

bool computes_in_fp8(const ParamDecl& d) {
  const bool layer = d.unit.kind == UnitId::Kind::layer || d.unit.kind == UnitId::Kind::experts;
  const std::string router = "mlp.gate.weight";
  const bool is_router = d.name.size() >= router.size() && d.name.ends_with(router);
  return layer && d.shape.rank() == 2 && !d.packed && !is_router;
}

// Each rank's `values` (the same length everywhere) replaced by their elementwise maximum
// over `group`.
void max_over(Communicator& group, std::vector<float>& values) {
  if (group.size() == 1 || values.empty()) return;
  const auto n = static_cast<std::int64_t>(values.size());
  std::vector<float> all(values.size() * static_cast<std::size_t>(group.size()));
  group.all_gather(Tensor(all.data(), Shape{n * group.size()}), Tensor(values.data(), Shape{n})).wait();
  for (int r = 0; r < group.size(); ++r)
    for (std::int64_t i = 0; i < n; ++i)
      values[static_cast<std::size_t>(i)] = std::fmax(values[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(r * n + i)]);
}

}  // namespace

std::string fp8_state_name(const std::string& weight, bool wgrad) {
  return weight + (wgrad ? ".fp8_wgrad_scaling" : ".fp8_scaling");
}

void add_fp8_layers(ModelParams& params, Backend& backend) {
  fp8::Fp8Layers* layers = backend.fp8_layers();
  if (layers == nullptr) return;
  std::vector<std::string> weight_of(params.specs().size());  // per handle: its name if an FP8 layer
  for (std::size_t h = 0; h < params.specs().size(); ++h) {
    const ParamSpec& s = params.specs()[h];
    if (!computes_in_fp8(s)) continue;
    weight_of[h] = s.name;
    const ParamViews& v = params[static_cast<int>(h)];  // null where ZeRO binds it later
    layers->add(v.value.data, fp8_state_name(s.name, false));
    layers->add(v.grad.data, fp8_state_name(s.name, true));
  }
  const ParamRegistry& registry = params.registry();
  params.registry().on_view_moved([layers, &registry, weight_of = std::move(weight_of)](int handle, bool value) {
    const std::string& weight = weight_of.at(static_cast<std::size_t>(handle));
    const ParamViews& v = registry[handle];
    const void* key = value ? v.value.data : v.grad.data;
    if (weight.empty()) layers->forget(key);  // e.g. the head, where a layer was gathered before
    else layers->rebind(key, fp8_state_name(weight, !value));
  });
}

std::vector<ParamDecl> fp8_state_declaration(const std::vector<ParamDecl>& whole_model, const Backend& backend) {
  fp8::Fp8Layers* layers = const_cast<Backend&>(backend).fp8_layers();
  if (layers == nullptr) return {};
  const std::int64_t floats = fp8::LayerScaling::floats(layers->config());
  std::vector<ParamDecl> decls;
  if (floats == 0) return decls;
  for (const ParamDecl& d : whole_model) {
    if (!computes_in_fp8(d)) continue;
    for (const bool wgrad : {false, true})
      decls.push_back({fp8_state_name(d.name, wgrad), Shape{floats}, false, false, 0.0, d.unit, d.sync});
  }
  return decls;
}

namespace {

// Calls gemm(out, in) for each FP8 layer of this rank's part of `model` (a packed q/k/v or
// gate/up matrix once, with all its rows).
template <class Gemm>
void for_each_fp8_gemm(const LlamaModel& model, Gemm&& gemm) {
  const std::vector<ParamSpec>& specs = model.params().specs();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& s = specs[i];
    if (!computes_in_fp8(s)) continue;
    std::int64_t out = s.local[0];
    for (std::size_t next = i + 1; next < specs.size() && specs[next].packed; ++next) out += specs[next].local[0];
    gemm(out, s.local[1]);
  }
}

}  // namespace

void plan_fp8(const Recipe& recipe, const LlamaModel& model, std::int64_t micro_batch, MemoryPlan& plan) {
  if (recipe.train.precision != "fp8") return;
  const ModelGeometry& g = model.geometry();
  // Token rows an FP8 GEMM takes at most: a micro-batch's (gathered over tp), each token
  // going to top_k experts.
  const std::int64_t rows = g.tokens(micro_batch) * std::max<std::int64_t>(1, g.top_k);
  std::int64_t layers = 0, largest = 0;
  for_each_fp8_gemm(model, [&](std::int64_t out, std::int64_t in) {
    ++layers;
    largest = std::max({largest, out * in, rows * out, rows * in});
  });
  if (layers == 0) return;
  const TrainSection& t = recipe.train;
  if (t.fp8_recipe == "delayed")
    plan.add_host("fp8.scaling_state",
                  static_cast<std::size_t>(layers * 2 * 3 * (t.fp8_amax_history + 2)) * sizeof(float));
  if (recipe.device.type == "cpu") plan.add_host("fp8.cpu_operands", static_cast<std::size_t>(3 * largest) * sizeof(float));
}

std::size_t fp8_op_scratch_bytes(const Recipe& recipe, const LlamaModel& model, std::int64_t micro_batch) {
  if (recipe.train.precision != "fp8" || recipe.device.type != "cuda") return 0;
  const std::int64_t rows = model.geometry().tokens(micro_batch);  // dense layers only on CUDA (recipe check)
  const fp8::Recipe r = fp8::recipe_named(recipe.train.fp8_recipe);
  std::size_t most = 0;
  for_each_fp8_gemm(model, [&](std::int64_t out, std::int64_t in) {
    most = std::max(most, cuda::fp8_linear_scratch_bytes(r, rows, in, out));
  });
  return most;
}

void end_fp8_step(Backend& backend, ProcessGroups& groups) {
  fp8::Fp8Layers* layers = backend.fp8_layers();
  if (layers == nullptr) return;
  layers->collect_amaxes();  // a GPU's, once per step
  const std::map<std::string, fp8::LayerScaling*> states = layers->by_name();
  if (!states.empty()) {  // delayed scaling: the same amaxes on every rank holding the layers
    std::vector<float> pending;
    for (const auto& [name, s] : states) pending.insert(pending.end(), s->pending().begin(), s->pending().end());
    max_over(groups.gradients().host(), pending);
    max_over(groups.tp().host(), pending);
    std::size_t at = 0;
    for (const auto& [name, s] : states)
      for (float& p : s->pending()) p = pending[at++];
  }
  layers->end_step();
}

}  // namespace ustrain
