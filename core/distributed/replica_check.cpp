#include "core/distributed/replica_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "data/files/crc32.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

// Bytes a device tensor is copied to the host in, per piece: bounded whatever the model.
constexpr std::int64_t kHostPieceBytes = std::int64_t{16} << 20;

// The sync group whose members hold the same copy of `store` (whole, at ZeRO 0-2).
ProcessGroup& replicas_of(const ParamStore& store, ProcessGroups& groups) {
  return store.group() == SyncGroup::dense ? groups.gradients() : groups.expert_gradients();
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    out += fmt::format("{}{}", i == 0 ? "" : (i + 1 == ranks.size() ? " and " : ", "), ranks[i]);
  return out;
}

}  // namespace

std::uint32_t tensor_crc32(const Tensor& values, Backend& backend) {
  if (values.device == Device::cpu) return crc32_update(0, values.data, values.bytes());
  const std::int64_t element = static_cast<std::int64_t>(dtype_size(values.dtype));
  const std::int64_t piece = std::min<std::int64_t>(values.numel(), kHostPieceBytes / element);
  std::vector<std::byte> host(static_cast<std::size_t>(piece * element));
  std::uint32_t crc = 0;
  const Tensor flat = values.view(Shape{values.numel()});
  for (std::int64_t begin = 0; begin < values.numel(); begin += piece) {
    const std::int64_t end = std::min(values.numel(), begin + piece);
    backend.copy(Tensor(host.data(), Shape{end - begin}, values.dtype), flat.slice(begin, end));
    crc = crc32_update(crc, host.data(), static_cast<std::size_t>((end - begin) * element));
  }
  return crc;
}

std::vector<int> odd_members(std::span<const std::uint32_t> checksums) {
  std::map<std::uint32_t, int> count;
  for (const std::uint32_t c : checksums) ++count[c];
  if (count.size() <= 1) return {};
  const auto majority =
      std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  const bool has_majority = 2 * majority->second > static_cast<int>(checksums.size());
  std::vector<int> odd;
  for (std::size_t i = 0; i < checksums.size(); ++i)
    if (!has_majority || checksums[i] != majority->first) odd.push_back(static_cast<int>(i));
  return odd;
}

// Compares the members' checksums of `held` over `group` (a collective over it): its first member
// counts the odd ones in `verdict` (see verify).
static void compare_replicas(ProcessGroup& group, const Tensor& held, Backend& backend,
                             std::vector<std::int32_t>& verdict) {
  if (group.size() == 1 || held.empty()) return;
  backend.synchronize();
  std::uint32_t mine = tensor_crc32(held, backend);
  std::vector<std::uint32_t> all(static_cast<std::size_t>(group.size()));
  group.host()
      .all_gather(Tensor(all.data(), Shape{group.size()}, DType::u32), Tensor(&mine, Shape{1}, DType::u32))
      .wait();
  if (group.rank() != 0) return;  // one member records the group's verdict: no double counting
  const std::vector<int> odd = odd_members(all);
  const std::size_t offset = !odd.empty() && odd.size() == all.size() ? verdict.size() / 2 : 0;
  const std::vector<int>& global = group.host().ranks();
  for (const int member : odd) ++verdict[offset + static_cast<std::size_t>(global[static_cast<std::size_t>(member)])];
}

void ReplicaCheck::verify(std::int64_t step, const ModelParams& params, Backend& backend, ProcessGroups& groups,
                          ReplicaSubject subject) const {
  const bool gradients = subject == ReplicaSubject::gradients;
  ProcessGroup& world = groups.world();
  // verdict[r]: rank r differs from its group's majority (in how many stores);
  // verdict[world + r]: rank r is in a group of replicas without a majority.
  const auto n = static_cast<std::size_t>(world.size());
  std::vector<std::int32_t> verdict(2 * n, 0);
  // Every rank holds the same stores in the same order, so the gathers match.
  for (const auto& store : params.stores()) {
    // Reduced gradients are compared at ZeRO-0 only (above it each rank updates from its own
    // shard); values below ZeRO-3 (the 16-bit copy where the fp32 masters are sharded).
    const Tensor held = gradients ? (store->sharding().shards_optimizer() ? Tensor{} : store->all_grads())
                                  : store->replicated_values();
    compare_replicas(replicas_of(*store, groups), held, backend, verdict);
    // Under hybrid sharding the blocks hold the same shards of the stored values too.
    if (!gradients && store->group() == SyncGroup::dense && store->shards_masters())
      compare_replicas(groups.dp_replicate(), store->all_values(), backend, verdict);
  }
  if (world.size() > 1)
    world.host().all_reduce(Tensor(verdict.data(), Shape{2 * world.size()}, DType::i32), ReduceOp::sum).wait();
  if (std::none_of(verdict.begin(), verdict.end(), [](std::int32_t v) { return v != 0; })) return;
  // The message's form: 1 for a rank that differs from the majority, 2 for one without a majority.
  std::vector<std::int32_t> kinds(n, 0);
  for (std::size_t r = 0; r < n; ++r) kinds[r] = verdict[r] > 0 ? 1 : verdict[n + r] > 0 ? 2 : 0;
  throw UserError(replica_mismatch_message(step, kinds, subject));
}

std::string replica_mismatch_message(std::int64_t step, std::span<const std::int32_t> verdict,
                                     ReplicaSubject subject) {
  const char* what = subject == ReplicaSubject::gradients ? "reduced gradients" : "parameters";
  std::vector<int> odd, undecided;
  for (std::size_t r = 0; r < verdict.size(); ++r) {
    if (verdict[r] == 1) odd.push_back(static_cast<int>(r));
    if (verdict[r] >= 2) undecided.push_back(static_cast<int>(r));
  }
  std::string who;
  if (!odd.empty())
    who = fmt::format("the {} of rank{} {} differ from {} data-parallel replicas", what, odd.size() > 1 ? "s" : "",
                      rank_list(odd), odd.size() > 1 ? "their" : "its");
  if (!undecided.empty())
    who += fmt::format(
        "{}rank{} {} hold replicas of the same {} that differ, with no majority to tell "
        "which is corrupt",
        who.empty() ? "" : "; ", undecided.size() > 1 ? "s" : "", rank_list(undecided), what);
  const char* plural = odd.size() + undecided.size() > 1 ? "s" : "";
  return fmt::format(
      "replica check {} step {}: {}. This is silent data corruption (a faulty GPU or memory) or a "
      "bug; training stops without saving, so the newest checkpoint (if any) predates it: resume with "
      "--resume auto, leaving out the node{} of rank{} {}",
      subject == ReplicaSubject::gradients ? "of" : "after", step, who, plural, plural,
      rank_list(odd.empty() ? undecided : odd));
}

}  // namespace ustrain
