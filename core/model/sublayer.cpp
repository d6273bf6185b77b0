#include "core/model/sublayer.h"

namespace ustrain {

std::vector<std::string> names_of(const std::vector<ActivationSpec>& specs) {
  std::vector<std::string> names;
  names.reserve(specs.size());
  for (const ActivationSpec& a : specs) names.push_back(a.name);
  return names;
}

Tensor planned(const std::vector<std::string>& names, const std::vector<Tensor>& tensors, std::string_view name) {
  if (tensors.empty()) return Tensor();  // a list not handed in (a weight pass's tensors outside it)
  USTRAIN_ASSERT(tensors.size() == names.size(), "a sub-layer's planned tensors are not the list it planned");
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return tensors[i];
  return Tensor();
}

}  // namespace ustrain
