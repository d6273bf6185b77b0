#include "core/trace/layer_trace.h"

#include <string>

namespace ustrain {

void LayerTraceHooks::acquire(int unit, bool backward) {
  inner_.acquire(unit, backward);
  if (tracer_.recording()) open_.push_back({unit, backward, Tracer::Clock::now()});
}

void LayerTraceHooks::release(int unit) {
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    if (it->unit != unit) continue;
    backend_.synchronize();
    const std::string what = unit == 0           ? std::string("embedding")
                             : unit > n_layers_ ? std::string("head")
                                                 : "layer " + std::to_string(unit - 1);
    std::vector<TraceArg> args{{"unit", unit}, {"backward", it->backward ? 1 : 0}};
    if (unit >= 1 && unit <= n_layers_) args.push_back({"layer", unit - 1});
    tracer_.record(0, what + (it->backward ? " backward" : " forward"), "layer", it->begin, Tracer::Clock::now(),
                   std::move(args));
    open_.erase(std::next(it).base());
    break;
  }
  inner_.release(unit);
}

}  // namespace ustrain
