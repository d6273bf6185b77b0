// One ZeRO engine per store of parameters (core/model/params.h), each over the ranks of its
// store's sync group, behind the one interface the model and the trainer use: the model's
// parameter-use hooks go to the engine of the store that holds the unit, and the step calls
// go to every engine in store order (every rank holds the same stores, so collectives match).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/distributed/zero_engine.h"
#include "core/model/param_hooks.h"
#include "core/model/params.h"

namespace ustrain {

class ParamEngines : public ParamUseHooks {
 public:
  // `group_of(g)` is the communicator of sync group g's ranks, over which its store is
  // sharded (parts = its size); `replicate_of(g)`, under hybrid sharding, the ranks holding
  // the same shards (ZeroEngine), or null.
  using GroupOf = std::function<Communicator&(SyncGroup)>;
  using ReplicateOf = std::function<Communicator*(SyncGroup)>;
  ParamEngines(ModelParams& params, Backend& backend, const GroupOf& group_of, std::size_t bucket_bytes,
               bool overlap = true);
  ParamEngines(ModelParams& params, Backend& backend, const GroupOf& group_of, const ReplicateOf& replicate_of,
               std::size_t bucket_bytes, bool overlap = true);

  // ZeroEngine's step calls, on every store's engine.
  void begin_step(int micro_batches);
  void finish_backward();
  void optimizer_step(Optimizer& optimizer, const OptimizerStep& s);
  // Summed over the engines.
  double exposed_reduce_seconds() const;
  double exposed_gather_seconds() const;

  void acquire(UnitId unit, bool backward) override;
  void release(UnitId unit) override;
  void grads_done(UnitId unit) override;

 private:
  std::pair<ZeroEngine*, int> engine_of(UnitId unit);

  ModelParams& params_;
  std::vector<std::unique_ptr<ZeroEngine>> engines_;  // one per store, in store order
};

}  // namespace ustrain
