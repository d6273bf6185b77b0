#include "core/memory/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kernels/error.h"
#include "kernels/library_workspace.h"

namespace ustrain {

const char* mem_category_name(MemCategory c) {
  static constexpr const char* kNames[kMemCategories] = {"parameters", "gradients",     "optimizer",
                                                         "activations", "workspace",     "communication",
                                                         "library workspace", "op scratch"};
  return kNames[static_cast<int>(c)];
}

namespace {

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// Byte counts that would wrap around are the recipe's doing (a model too large for 64 bits),
// not a bug: the recipe check (core/recipe/model_size.h) normally refuses such models first.
[[noreturn]] void overflow(const std::string& name, const Shape& shape, MemCategory category) {
  throw UserError(fmt::format("the memory plan's {} overflow 64-bit byte counts at {} {}; use a smaller model or "
                              "micro-batch",
                              mem_category_name(category), name, shape.str()));
}

}  // namespace

int MemoryPlan::add(std::string name, MemCategory category, Shape shape, DType dtype) {
  const std::size_t size = sizes_[static_cast<std::size_t>(category)];
  if (size > std::numeric_limits<std::size_t>::max() - kAlignment) overflow(name, shape, category);
  return place(std::move(name), category, shape, dtype, align_up(size, kAlignment));
}

int MemoryPlan::add_packed(std::string name, MemCategory category, Shape shape, DType dtype) {
  return place(std::move(name), category, shape, dtype, sizes_[static_cast<std::size_t>(category)]);
}

int MemoryPlan::place(std::string name, MemCategory category, Shape shape, DType dtype, std::size_t offset) {
  std::size_t elements = 1, bytes = 0, end = 0;
  for (int i = 0; i < shape.rank(); ++i)
    if (shape[i] < 0 || __builtin_mul_overflow(elements, static_cast<std::size_t>(shape[i]), &elements))
      overflow(name, shape, category);
  if (__builtin_mul_overflow(elements, dtype_size(dtype), &bytes) || __builtin_add_overflow(offset, bytes, &end) ||
      end > std::numeric_limits<std::size_t>::max() - kAlignment)
    overflow(name, shape, category);
  entries_.push_back(PlanEntry{std::move(name), category, shape, dtype, offset, bytes});
  sizes_[static_cast<std::size_t>(category)] = end;
  return static_cast<int>(entries_.size() - 1);
}

std::size_t MemoryPlan::total_bytes() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < sizes_.size(); ++i)
    if (__builtin_add_overflow(total, sizes_[i], &total))
      throw UserError("the memory plan's categories together overflow 64-bit byte counts; use a smaller model or "
                      "micro-batch");
  return total;
}

void MemoryPlan::add_host(std::string name, std::size_t bytes) {
  std::size_t sum = 0;
  if (__builtin_add_overflow(host_bytes(), bytes, &sum))
    throw UserError(fmt::format("the memory plan's host buffers overflow 64-bit byte counts at {}; use a smaller model",
                                name));
  host_.push_back(HostBuffer{std::move(name), bytes});
}

std::size_t MemoryPlan::host_bytes() const {
  std::size_t total = 0;
  for (const HostBuffer& b : host_) total += b.bytes;  // add_host checked the sum
  return total;
}

std::size_t MemoryPlan::host_bytes(const std::string& name) const {
  std::size_t total = 0;
  for (const HostBuffer& b : host_)
    if (b.name == name) total += b.bytes;
  return total;
}

std::string MemoryPlan::summary() const {
  std::string s = "memory plan (bytes per category):\n";
  const bool library = bytes(MemCategory::library_workspace) > 0;
  const int width = library ? 17 : 14;  // "library workspace" is the longest name
  for (int c = 0; c < kMemCategories; ++c) {
    const auto cat = static_cast<MemCategory>(c);
    if ((cat == MemCategory::library_workspace || cat == MemCategory::op_scratch) && bytes(cat) == 0) continue;
    s += fmt::format("  {:<{}} {:>12}\n", mem_category_name(cat), width, format_bytes(bytes(cat)));
  }
  s += fmt::format("  {:<{}} {:>12}\n", "total", width, format_bytes(total_bytes()));
  if (!host_.empty()) {
    s += "  host memory beside the arenas (allocated by its owner):\n";
    for (const HostBuffer& b : host_) s += fmt::format("    {:<24} {:>12}\n", b.name, format_bytes(b.bytes));
    s += fmt::format("  {:<28} {:>12}\n", "total with host memory", format_bytes(total_bytes() + host_bytes()));
  }
  std::vector<const PlanEntry*> order;
  for (const auto& e : entries_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->bytes > b->bytes; });
  s += "  largest entries:\n";
  for (std::size_t i = 0; i < std::min<std::size_t>(5, order.size()); ++i)
    s += fmt::format("    {:<44} {:<11} {:<20} {:>12}\n", order[i]->name, mem_category_name(order[i]->category),
                     order[i]->shape.str(), format_bytes(order[i]->bytes));
  return s;
}

void plan_library_workspace(Device device, MemoryPlan& plan) {
  const std::size_t bytes = library_workspace_bytes(device);
  if (bytes == 0) return;
  plan.add("backend.library_workspace", MemCategory::library_workspace,
           Shape{static_cast<std::int64_t>(bytes / sizeof(float))}, DType::f32);
}

void plan_op_scratch(std::size_t bytes, MemoryPlan& plan) {
  if (bytes == 0) return;
  const std::size_t words = (bytes + sizeof(float) - 1) / sizeof(float);
  plan.add("backend.op_scratch", MemCategory::op_scratch, Shape{static_cast<std::int64_t>(words)}, DType::f32);
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
  if (void* library = base_[static_cast<std::size_t>(MemCategory::library_workspace)])
    backend_.use_library_workspace(library, plan_.bytes(MemCategory::library_workspace));
  if (void* scratch = base_[static_cast<std::size_t>(MemCategory::op_scratch)])
    backend_.use_op_scratch(scratch, plan_.bytes(MemCategory::op_scratch));
}

PlannedMemory::~PlannedMemory() {
  if (base_[static_cast<std::size_t>(MemCategory::library_workspace)] != nullptr)
    backend_.use_library_workspace(nullptr, 0);  // before the memory goes back
  if (base_[static_cast<std::size_t>(MemCategory::op_scratch)] != nullptr) backend_.use_op_scratch(nullptr, 0);
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
