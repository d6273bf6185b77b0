// FP8 layers find their scaling state by the tensors their GEMMs name, which ZeRO-2 and -3
// bind into reused buffers (core/model/param_store.h): the state must follow its parameter
// there, and a parameter that is not an FP8 layer (the head) must not inherit the state of the
// layer that used the buffer before it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/model/params.h"
#include "core/step/fp8_layers.h"
#include "kernels/fp8/fp8_layers.h"
#include "kernels/fp8_backend.h"

namespace ustrain {
namespace {

TEST(Fp8LayerKeys, FollowTheirParametersThroughZeroBuffers) {
  ModelParams params;
  ParamRegistry& reg = params.registry();
  const std::vector<std::string> names = {"model.layers.0.mlp.down_proj.weight", "model.layers.1.mlp.down_proj.weight",
                                          "lm_head.weight"};
  reg.declare({names[0], Shape{8, 64}, true, false, 0.1, UnitId::layer(0)});
  reg.declare({names[1], Shape{8, 64}, true, false, 0.1, UnitId::layer(1)});
  reg.declare({names[2], Shape{8, 64}, true, false, 0.1, UnitId::head()});
  MemoryPlan plan;
  params.plan(plan, ParamShardings{ParamSharding{2, 0, 3}}, DType::bf16);  // rank 0 of 2, ZeRO-3
  const auto backend = make_fp8_backend(Device::cpu, 1, 0, fp8::Config{fp8::Recipe::delayed, fp8::Format::e5m2, 4, 0});
  PlannedMemory memory(plan, *backend);
  params.bind(memory);
  add_fp8_layers(params, *backend);

  fp8::Fp8Layers& layers = *backend->fp8_layers();
  ASSERT_EQ(layers.count(), 4);  // two layers, each with its forward and weight-gradient state
  ParamStore& store = params.dense();
  ASSERT_EQ(store.units().size(), 3u);
  // Every unit in turn through the same value and gradient buffers, as ZeRO-3 gathers them.
  for (int round = 0; round < 2; ++round)
    for (int u = 0; u < 3; ++u) {
      store.bind_unit_values(u, store.value_slot(0));
      store.bind_unit_grads(u, store.grad_slot(0));
      const int handle = store.units()[static_cast<std::size_t>(u)].params.at(0);
      const std::string& name = params.spec(handle).name;
      const bool fp8_layer = name != "lm_head.weight";
      fp8::LayerScaling* forward = layers.find(params[handle].value.data);
      fp8::LayerScaling* wgrad = layers.find(params[handle].grad.data);
      EXPECT_EQ(forward, fp8_layer ? layers.by_name().at(fp8_state_name(name, false)) : nullptr) << name;
      EXPECT_EQ(wgrad, fp8_layer ? layers.by_name().at(fp8_state_name(name, true)) : nullptr) << name;
    }
}

}  // namespace
}  // namespace ustrain
