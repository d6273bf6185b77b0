#include "core/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace ustrain {

const char* mem_category_name(MemCategory c) {
  static constexpr const char* kNames[kMemCategories] = {"parameters", "gradients", "optimizer",
                                                         "activations", "workspace", "communication"};
  return kNames[static_cast<int>(c)];
}

static std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

int MemoryPlan::add(std::string name, MemCategory category, Shape shape, DType dtype) {
  auto& size = sizes_[static_cast<std::size_t>(category)];
  size = align_up(size, kAlignment);
  PlanEntry e{std::move(name), category, shape, dtype, size,
              static_cast<std::size_t>(shape.numel()) * dtype_size(dtype)};
  size += e.bytes;
  entries_.push_back(std::move(e));
  return static_cast<int>(entries_.size() - 1);
}

int MemoryPlan::add_packed(std::string name, MemCategory category, Shape shape, DType dtype) {
  auto& size = sizes_[static_cast<std::size_t>(category)];
  PlanEntry e{std::move(name), category, shape, dtype, size,
              static_cast<std::size_t>(shape.numel()) * dtype_size(dtype)};
  size += e.bytes;
  entries_.push_back(std::move(e));
  return static_cast<int>(entries_.size() - 1);
}

std::size_t MemoryPlan::total_bytes() const {
  return std::accumulate(sizes_.begin(), sizes_.end(), std::size_t{0});
}

std::string MemoryPlan::summary() const {
  std::string s = "memory plan (bytes per category):\n";
  for (int c = 0; c < kMemCategories; ++c) {
    const auto cat = static_cast<MemCategory>(c);
    s += fmt::format("  {:<14} {:>12}\n", mem_category_name(cat), format_bytes(bytes(cat)));
  }
  s += fmt::format("  {:<14} {:>12}\n", "total", format_bytes(total_bytes()));
  std::vector<const PlanEntry*> order;
  for (const auto& e : entries_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->bytes > b->bytes; });
  s += "  largest entries:\n";
  for (std::size_t i = 0; i < std::min<std::size_t>(5, order.size()); ++i)
    s += fmt::format("    {:<44} {:<11} {:<20} {:>12}\n", order[i]->name, mem_category_name(order[i]->category),
                     order[i]->shape.str(), format_bytes(order[i]->bytes));
  return s;
}

PlannedMemory::PlannedMemory(const MemoryPlan& plan, Backend& backend) : plan_(plan), backend_(backend) {
  for (int c = 0; c < kMemCategories; ++c) {
    const std::size_t n = plan_.bytes(static_cast<MemCategory>(c));
    if (n == 0) continue;
    const std::size_t padded = align_up(n, MemoryPlan::kAlignment);
    void* p = backend_.allocate(padded);
    base_[static_cast<std::size_t>(c)] = p;
    // Zero everything once: gradients start empty and no garbage can leak into a step.
    backend_.fill(Tensor(p, Shape{static_cast<std::int64_t>(padded / 4)}, DType::f32, backend_.device()), 0.0f);
  }
}

PlannedMemory::~PlannedMemory() {
  for (void* p : base_)
    if (p) backend_.release(p);
}

Tensor PlannedMemory::tensor(int handle) const {
  const PlanEntry& e = plan_.entry(handle);
  auto* base = static_cast<char*>(base_[static_cast<std::size_t>(e.category)]);
  return Tensor(base + e.offset, e.shape, e.dtype, backend_.device());
}

Tensor PlannedMemory::category(MemCategory c, DType dtype) const {
  const std::size_t n = plan_.bytes(c) / dtype_size(dtype);
  return Tensor(base_[static_cast<std::size_t>(c)], Shape{static_cast<std::int64_t>(n)}, dtype, backend_.device());
}

Tensor PlannedMemory::span(int first, int last) const {
  const PlanEntry& a = plan_.entry(first);
  const PlanEntry& b = plan_.entry(last);
  USTRAIN_ASSERT(a.category == b.category && a.dtype == b.dtype && b.offset >= a.offset, "bad span");
  const std::size_t bytes = b.offset + b.bytes - a.offset;
  auto* base = static_cast<char*>(base_[static_cast<std::size_t>(a.category)]);
  return Tensor(base + a.offset, Shape{static_cast<std::int64_t>(bytes / dtype_size(a.dtype))}, a.dtype,
                backend_.device());
}

}  // namespace ustrain
