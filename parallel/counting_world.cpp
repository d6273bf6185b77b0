#include "parallel/counting_world.h"

#include <algorithm>
#include <iterator>

#include "parallel/comm/counting_communicator.h"

namespace ustrain {

std::unique_ptr<ProcessGroups> counting_process_groups(const Mesh& mesh, Device tensors) {
  const int me = mesh.rank();
  auto groups = std::make_unique<ProcessGroups>(mesh, [me](const std::vector<int>& ranks, const std::string& label) {
    const auto at = std::find(ranks.begin(), ranks.end(), me);
    USTRAIN_ASSERT(at != ranks.end(), "a group without this rank");
    return std::make_unique<CountingCommunicator>(ranks, static_cast<int>(std::distance(ranks.begin(), at)), label);
  });
  if (tensors != Device::cpu)
    groups->attach_devices([tensors](ProcessGroup& g) {
      const Communicator& host = g.host();
      return std::make_unique<CountingCommunicator>(host.ranks(), host.rank(), g.label(), tensors);
    });
  return groups;
}

}  // namespace ustrain
