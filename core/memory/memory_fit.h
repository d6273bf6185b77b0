// Whether a model fits the memory it is about to be allocated in, checked before anything is
// allocated (Linux overcommits: an allocation that does not fit succeeds, and the process is
// killed later). Each check throws UserError with the numbers and what to change, or under
// device.memory_check = "warn" logs that message as a warning and returns; with `available` = 0
// (unknown) it checks nothing.
//
// `sharers` processes (the ranks on one host, for host memory) each need as much.
#pragma once

#include <cstddef>
#include <string>

#include "core/memory/memory_plan.h"
#include "core/recipe/recipe.h"

namespace ustrain {

// What a check does when the memory is too small (device.memory_check).
enum class MemoryCheck { refuse, warn };
MemoryCheck memory_check_of(const Recipe& recipe);

// The memory a process plans in: `available` bytes (0: what the backend reports when the model
// is made), shared by `sharers` processes that each need as much.
struct MemoryShare {
  std::size_t available = 0;
  int sharers = 1;
};

// For a process computing on `device` among `local_ranks` on its host: on the CPU, the host's
// memory as measured before any rank allocated (`host_available_at_start`) and shared by them
// all; a GPU is its process's own.
MemoryShare memory_share(Device device, std::size_t host_available_at_start, int local_ranks);

// Before the model is built: the least its training state can take on this rank
// (core/memory/model_size.h), so that an absurd model is refused before its layers are made.
void check_state_fits(const Recipe& recipe, std::size_t available, int sharers, const std::string& memory_name);

// After planning: the plan's arenas and, when the memory is the host's (`host_memory`), its host
// buffers (the checkpoint snapshot) and `beside` bytes the process holds next to it (the data
// loader's batches).
void check_plan_fits(const MemoryPlan& plan, std::size_t available, int sharers, const std::string& memory_name,
                     MemoryCheck check, std::size_t beside = 0, bool host_memory = true);

// On a GPU, whose check counts only the arenas: the plan's host buffers and `beside` bytes (the
// data loader's batches) against the host's `available` bytes, shared by `sharers` processes.
void check_host_buffers_fit(const MemoryPlan& plan, std::size_t available, int sharers, MemoryCheck check,
                            std::size_t beside);

// Host bytes the data loader holds in micro-batches: for training and for validation,
// data.prefetch + 1 batches of inputs and targets (int32), and with train.document_mask their document ids.
long double data_batch_bytes(const Recipe& recipe);

// Before the data or the model take any memory, what a rank of the recipe needs of this host's
// `available` bytes, shared by `sharers` ranks: the data loader's batches and, on the CPU, the
// model: first the least its training state takes, then its whole memory plan (planned here,
// not allocated, for rank 0, whose share is the largest), with the checkpoint snapshot when
// the run `saves_checkpoints`.
void check_host_fits(const Recipe& recipe, std::size_t available, int sharers, bool saves_checkpoints);

}  // namespace ustrain
