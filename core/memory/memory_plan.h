// The memory plan: every tensor a run needs, laid out before anything is allocated.
//
// Layers declare their parameters, gradients, optimizer state and activations to a
// MemoryPlan; the plan assigns each an offset in one arena per category. `ustrain train`
// allocates exactly these arenas (one allocation each) and hands out views; `--dry-run`
// and `ustrain plan` print the same numbers.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ustrain {

// communication: buffers that exist only for collectives (ZeRO's gathered layers and
// gradient buckets). library_workspace: the device memory the backend's libraries work in
// (kernels/library_workspace.h; none on the CPU), handed to the backend when allocated.
// op_scratch: the scratch the backend's ops and cuDNN's attention plans work in, the most any
// op of the step takes (Backend::op_scratch_bytes; on the CPU only with 16-bit storage), handed
// over likewise.
enum class MemCategory : int {
  parameters = 0,
  gradients,
  optimizer,
  activations,
  workspace,
  communication,
  library_workspace,
  op_scratch
};
inline constexpr int kMemCategories = 8;
const char* mem_category_name(MemCategory c);

struct PlanEntry {
  std::string name;
  MemCategory category;
  Shape shape;
  DType dtype;
  std::size_t offset = 0;  // bytes from the start of the category's arena
  std::size_t bytes = 0;
};

// Host memory a run holds beside the arenas, allocated by its owner (the checkpoint writer's
// snapshot): the plan counts it, in its summary and in the host memory checks, but
// PlannedMemory does not allocate it (on a GPU it is not device memory).
struct HostBuffer {
  std::string name;
  std::size_t bytes = 0;
};

class MemoryPlan {
 public:
  static constexpr std::size_t kAlignment = 256;  // bytes; enough for AVX-512 and GPU loads

  // Declares a tensor; returns its handle. Entries of one category are contiguous in
  // declaration order (with alignment padding), so a run of declarations can be viewed
  // as one flat tensor (e.g. all gradients for the norm, q/k/v for one fused GEMM).
  int add(std::string name, MemCategory category, Shape shape, DType dtype = DType::f32);
  // Like add, but packed with no padding after the previous entry of the category, so the
  // two can be addressed as one tensor. The previous entry must have the same dtype.
  int add_packed(std::string name, MemCategory category, Shape shape, DType dtype = DType::f32);

  const PlanEntry& entry(int handle) const { return entries_.at(static_cast<std::size_t>(handle)); }
  const std::vector<PlanEntry>& entries() const { return entries_; }
  std::size_t bytes(MemCategory c) const { return sizes_[static_cast<std::size_t>(c)]; }
  // The arenas' bytes (what PlannedMemory allocates); host buffers are not included.
  std::size_t total_bytes() const;

  // Declares a host buffer of `bytes` that its owner allocates.
  void add_host(std::string name, std::size_t bytes);
  const std::vector<HostBuffer>& host_buffers() const { return host_; }
  std::size_t host_bytes() const;                       // all host buffers
  std::size_t host_bytes(const std::string& name) const;  // the named one's; 0 when none

  // A human-readable table: bytes per category (the library workspace and op scratch only
  // when there are some) and the biggest entries.
  std::string summary() const;

 private:
  // Declares the entry at `offset` of its category's arena; UserError, leaving the plan as it
  // was, when its byte count or the arena's end does not fit in 64 bits.
  int place(std::string name, MemCategory category, Shape shape, DType dtype, std::size_t offset);

  std::vector<PlanEntry> entries_;
  std::array<std::size_t, kMemCategories> sizes_{};
  std::vector<HostBuffer> host_;
};

// Declares the library workspace a backend on `device` takes from the plan
// (library_workspace_bytes(device)); nothing on the CPU.
void plan_library_workspace(Device device, MemoryPlan& plan);

// Declares `bytes` of op scratch (core/plan/step_scratch.h works them out); nothing for 0.
void plan_op_scratch(std::size_t bytes, MemoryPlan& plan);

// The allocated plan: one allocation per non-empty category, from a backend, which is handed
// the library workspace (Backend::use_library_workspace) and the op scratch
// (Backend::use_op_scratch) for as long as the plan is allocated.
class PlannedMemory {
 public:
  PlannedMemory(const MemoryPlan& plan, Backend& backend);
  ~PlannedMemory();
  PlannedMemory(const PlannedMemory&) = delete;
  PlannedMemory& operator=(const PlannedMemory&) = delete;

  Tensor tensor(int handle) const;
  // All bytes of a category viewed as one flat tensor of `dtype` elements.
  Tensor category(MemCategory c, DType dtype = DType::f32) const;
  // Entries [first, last] (inclusive handles, same category) viewed as one flat tensor.
  Tensor span(int first, int last) const;
  const MemoryPlan& plan() const { return plan_; }

 private:
  const MemoryPlan& plan_;
  Backend& backend_;
  std::array<void*, kMemCategories> base_{};
};


}  // namespace ustrain
