#include "core/plan/comm_cost.h"

#include <cmath>
#include <set>

namespace ustrain {
namespace {

double op_seconds(CommOp op, const OpVolume& v, const GroupSpan& span, const Hardware& hw) {
  if (v.calls == 0) return 0;
  const double bandwidth = kLinkEfficiency * (span.across_nodes ? hw.inter_node_bytes_per_s : hw.intra_node_bytes_per_s);
  const double latency = span.across_nodes ? hw.inter_node_latency_s : hw.intra_node_latency_s;
  const double n = span.members;
  double steps = n - 1;
  if (op == CommOp::all_reduce) steps = span.across_nodes ? 2 * std::ceil(std::log2(n)) : 2 * (n - 1);
  if (op == CommOp::send) steps = 1;
  if (op == CommOp::recv || op == CommOp::barrier) return 0;  // the sender's time
  return static_cast<double>(v.wire_bytes) / bandwidth + static_cast<double>(v.calls) * steps * latency;
}

}  // namespace

bool spans_nodes(const std::vector<int>& ranks, int per_node) {
  std::set<int> nodes;
  for (int r : ranks) nodes.insert(r / per_node);
  return nodes.size() > 1;
}

double comm_seconds(const CommVolume& v, const GroupSpan& span, const Hardware& hw) {
  double s = 0;
  for (CommOp op : {CommOp::all_reduce, CommOp::reduce_scatter, CommOp::all_gather, CommOp::all_to_all,
                    CommOp::broadcast, CommOp::send})
    s += op_seconds(op, v[op], span, hw);
  return s;
}

double gather_seconds(const CommVolume& v, const GroupSpan& span, const Hardware& hw) {
  return op_seconds(CommOp::all_gather, v[CommOp::all_gather], span, hw);
}

}  // namespace ustrain
