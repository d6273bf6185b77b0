#include "parallel/launch.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "kernels/error.h"

namespace ustrain {
namespace {

class EnvReader {
 public:
  explicit EnvReader(const EnvLookup& env) : env_(env) {}

  bool has(const char* name) const { return env_(name) != nullptr; }

  int integer(const char* name) const {
    const char* v = env_(name);
    if (!v) throw UserError(fmt::format("the launcher did not set {}; start ustrain with mpirun or srun --mpi=pmix", name));
    return parse(name, v);
  }

  int integer_or(const char* name, const char* fallback) const { return has(name) ? integer(name) : integer(fallback); }

  const char* text(const char* name) const { return env_(name); }

  static int parse(const char* name, std::string_view v) {
    int out = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec != std::errc() || end != v.data() + v.size() || out < 0)
      throw UserError(fmt::format("environment variable {}='{}' is not a non-negative integer", name, v));
    return out;
  }

 private:
  const EnvLookup& env_;
};

// Slurm writes tasks per node as "2(x3),1": three nodes with 2 tasks, then one with 1.
int slurm_tasks_on_node(const char* name, std::string_view spec, int node) {
  const auto malformed = [&] {
    return UserError(fmt::format("environment variable {}='{}' is not a Slurm tasks-per-node list", name, spec));
  };
  int first_node = 0;
  std::size_t pos = 0;
  while (pos < spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view entry = spec.substr(pos, comma - pos);
    int repeat = 1;
    if (const std::size_t paren = entry.find("(x"); paren != std::string_view::npos) {
      if (entry.back() != ')') throw malformed();
      repeat = EnvReader::parse(name, entry.substr(paren + 2, entry.size() - paren - 3));
      entry = entry.substr(0, paren);
    }
    const int tasks = EnvReader::parse(name, entry);
    if (node < first_node + repeat) return tasks;
    first_node += repeat;
    pos = comma + 1;
  }
  throw UserError(fmt::format("environment variable {}='{}' lists {} nodes but SLURM_NODEID is {}", name, spec,
                              first_node, node));
}

void validate(const ProcessInfo& p) {
  if (p.world_size < 1 || p.rank >= p.world_size || p.local_world_size < 1 || p.local_rank >= p.local_world_size ||
      p.local_world_size > p.world_size)
    throw UserError(fmt::format(
        "the {} environment is inconsistent: rank {} of {}, local rank {} of {}; check how the job was launched",
        p.launcher, p.rank, p.world_size, p.local_rank, p.local_world_size));
}

}  // namespace

ProcessInfo discover_process(const EnvLookup& lookup) {
  const EnvReader env(lookup);
  ProcessInfo p;
  if (env.has("OMPI_COMM_WORLD_SIZE")) {
    p.launcher = "mpirun";
    p.rank = env.integer("OMPI_COMM_WORLD_RANK");
    p.world_size = env.integer("OMPI_COMM_WORLD_SIZE");
    p.local_rank = env.integer("OMPI_COMM_WORLD_LOCAL_RANK");
    p.local_world_size = env.integer("OMPI_COMM_WORLD_LOCAL_SIZE");
  } else if (env.has("SLURM_PROCID") && (env.has("SLURM_STEP_NUM_TASKS") || env.has("PMIX_RANK"))) {
    p.launcher = "srun";
    p.rank = env.integer("SLURM_PROCID");
    p.world_size = env.integer_or("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS");
    p.local_rank = env.integer("SLURM_LOCALID");
    const char* per_node_var = env.has("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
    if (!env.has(per_node_var))
      throw UserError("the launcher set SLURM_PROCID but not SLURM_STEP_TASKS_PER_NODE; start ustrain with srun --mpi=pmix");
    const int node = env.has("SLURM_NODEID") ? env.integer("SLURM_NODEID") : 0;
    p.local_world_size = slurm_tasks_on_node(per_node_var, env.text(per_node_var), node);
    if (p.world_size > 1 && !env.has("PMIX_RANK") && !env.has("PMI_RANK"))
      throw UserError(fmt::format(
          "srun started {} tasks without a process-management interface, so MPI cannot connect them; start "
          "ustrain with srun --mpi=pmix (or set MpiDefault=pmix in slurm.conf)",
          p.world_size));
    if (env.has("PMIX_RANK") && env.integer("PMIX_RANK") != p.rank)
      throw UserError(fmt::format("PMIX_RANK={} contradicts SLURM_PROCID={}; check how the job was launched",
                                  env.integer("PMIX_RANK"), p.rank));
  }
  validate(p);
  return p;
}

ProcessInfo discover_process() {
  return discover_process([](const char* name) -> const char* { return std::getenv(name); });
}

void check_layout(const ProcessInfo& process, const MeshShape& layout) {
  // The Mesh constructor owns the wording; every rank sees the same numbers, so every rank
  // stops with the same message before any communication.
  (void)Mesh(layout, process.rank, process.world_size);
}

}  // namespace ustrain
