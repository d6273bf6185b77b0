// The groups of a grouped linear op (Backend::grouped_linear_forward and its backward): offsets,
// groups + 1 ascending entries from 0 to the row count, split the row tensors into each group's
// rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ustrain {

// Asserts that offsets split `rows` rows into `groups` ascending groups; `op` names the call.
void check_group_offsets(const char* op, std::span<const std::int64_t> offsets, std::size_t groups,
                         std::int64_t rows);

// Calls visit(g, begin, end) for each group g that has rows [begin, end), in group order, after
// checking the offsets.
template <class Visit>
void for_each_nonempty_group(const char* op, std::span<const std::int64_t> offsets, std::size_t groups,
                             std::int64_t rows, Visit visit) {
  check_group_offsets(op, offsets, groups, rows);
  for (std::size_t g = 0; g < groups; ++g)
    if (offsets[g + 1] > offsets[g]) visit(g, offsets[g], offsets[g + 1]);
}

}  // namespace ustrain
