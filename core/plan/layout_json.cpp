#include "core/plan/layout_json.h"

#include <nlohmann/json.hpp>

namespace ustrain {

nlohmann::json layout_json(const Layout& l) {
  return {{"dp", l.dp},
          {"tp", l.tp},
          {"pp", l.pp},
          {"cp", l.cp},
          {"ep", l.ep},
          {"zero", l.zero},
          {"dp_shard", l.dp_shard},
          {"sp", l.sp},
          {"recompute", l.recompute},
          {"micro_batch", l.micro_batch},
          {"grad_accum", l.grad_accum},
          {"pp_schedule", l.pp_schedule},
          {"virtual_stages", l.virtual_stages}};
}

Layout layout_of(const nlohmann::json& j) {
  Layout l;
  j.at("dp").get_to(l.dp), j.at("tp").get_to(l.tp), j.at("pp").get_to(l.pp), j.at("cp").get_to(l.cp);
  j.at("ep").get_to(l.ep), j.at("zero").get_to(l.zero), j.at("dp_shard").get_to(l.dp_shard), j.at("sp").get_to(l.sp);
  j.at("recompute").get_to(l.recompute), j.at("micro_batch").get_to(l.micro_batch);
  j.at("grad_accum").get_to(l.grad_accum), j.at("pp_schedule").get_to(l.pp_schedule);
  j.at("virtual_stages").get_to(l.virtual_stages);
  return l;
}

}  // namespace ustrain
