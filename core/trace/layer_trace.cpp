#include "core/trace/layer_trace.h"

#include <string>

namespace ustrain {

void LayerTraceHooks::acquire(UnitId unit, bool backward) {
  inner_.acquire(unit, backward);
  if (tracer_.recording()) open_.push_back({unit, backward, Tracer::Clock::now()});
}

void LayerTraceHooks::release(UnitId unit) {
  for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
    if (it->unit != unit) continue;
    backend_.synchronize();
    const bool layer = unit.kind == UnitId::Kind::layer || unit.kind == UnitId::Kind::experts;
    const std::string what = unit.kind == UnitId::Kind::tied_head ? std::string("head") : unit.str();
    std::vector<TraceArg> args{{"backward", it->backward ? 1 : 0}};
    if (layer) args.push_back({"layer", unit.index});
    tracer_.record(0, what + (it->backward ? " backward" : " forward"), "layer", it->begin, Tracer::Clock::now(),
                   std::move(args));
    open_.erase(std::next(it).base());
    break;
  }
  inner_.release(unit);
}

}  // namespace ustrain
