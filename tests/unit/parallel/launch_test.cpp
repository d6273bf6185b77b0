// Rank discovery from the launcher's environment, and the layout check that precedes MPI.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kernels/error.h"
#include "parallel/launch.h"

namespace ustrain {
namespace {

using Env = std::map<std::string, std::string>;

ProcessInfo discover(const Env& env) {
  return discover_process([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const Env& env) {
  try {
    discover(env);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Launch, NoLauncherIsOneProcess) {
  const ProcessInfo p = discover({});
  EXPECT_EQ(p.launcher, "none");
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.world_size, 1);
  EXPECT_EQ(p.local_rank, 0);
  EXPECT_EQ(p.local_world_size, 1);
}

TEST(Launch, MpirunVariables) {
  const ProcessInfo p = discover({{"OMPI_COMM_WORLD_RANK", "5"},
                                  {"OMPI_COMM_WORLD_SIZE", "8"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                  {"PMIX_RANK", "5"}});
  EXPECT_EQ(p.launcher, "mpirun");
  EXPECT_EQ(p.rank, 5);
  EXPECT_EQ(p.world_size, 8);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.local_world_size, 4);
}

TEST(Launch, SrunTaskWithPmixReadsItsNodesTaskCount) {
  // Three nodes with 2 tasks and one with 3: rank 7 is the second task of the fourth node.
  const ProcessInfo p = discover({{"SLURM_PROCID", "7"},
                                  {"SLURM_STEP_NUM_TASKS", "9"},
                                  {"SLURM_NTASKS", "16"},  // the allocation, not this step
                                  {"SLURM_LOCALID", "1"},
                                  {"SLURM_STEP_TASKS_PER_NODE", "2(x3),3"},
                                  {"SLURM_TASKS_PER_NODE", "4(x4)"},
                                  {"SLURM_NODEID", "3"},
                                  {"PMIX_RANK", "7"}});
  EXPECT_EQ(p.launcher, "srun");
  EXPECT_EQ(p.rank, 7);
  EXPECT_EQ(p.world_size, 9);
  EXPECT_EQ(p.local_rank, 1);
  EXPECT_EQ(p.local_world_size, 3);
}

TEST(Launch, SrunWithoutStepVariablesFallsBackToTheJobsOnes) {
  const ProcessInfo p = discover({{"SLURM_PROCID", "2"},
                                  {"SLURM_NTASKS", "4"},
                                  {"SLURM_LOCALID", "0"},
                                  {"SLURM_TASKS_PER_NODE", "2,1(x2)"},
                                  {"SLURM_NODEID", "1"},
                                  {"PMIX_RANK", "2"}});
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.local_world_size, 1);
}

TEST(Launch, BatchScriptShellIsOneProcess) {
  // sbatch's own shell carries SLURM_PROCID=0 and the job's task count but is no srun task.
  const ProcessInfo p = discover({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(p.launcher, "none");
  EXPECT_EQ(p.world_size, 1);
}

TEST(Launch, MpirunInsideASlurmAllocationWins) {
  const ProcessInfo p = discover({{"OMPI_COMM_WORLD_RANK", "1"},
                                  {"OMPI_COMM_WORLD_SIZE", "2"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                  {"SLURM_PROCID", "0"},
                                  {"SLURM_STEP_NUM_TASKS", "1"}});
  EXPECT_EQ(p.launcher, "mpirun");
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world_size, 2);
}

TEST(Launch, MalformedOrInconsistentVariablesAreUserErrors) {
  const Env mpirun = {{"OMPI_COMM_WORLD_RANK", "0"},
                      {"OMPI_COMM_WORLD_SIZE", "2"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  Env e = mpirun;
  e["OMPI_COMM_WORLD_SIZE"] = "two";
  EXPECT_NE(error_of(e).find("OMPI_COMM_WORLD_SIZE='two' is not a non-negative integer"), std::string::npos)
      << error_of(e);
  e = mpirun;
  e["OMPI_COMM_WORLD_RANK"] = "2";
  EXPECT_NE(error_of(e).find("inconsistent: rank 2 of 2"), std::string::npos) << error_of(e);
  e = mpirun;
  e.erase("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_NE(error_of(e).find("did not set OMPI_COMM_WORLD_LOCAL_RANK"), std::string::npos) << error_of(e);

  const Env srun = {{"SLURM_PROCID", "1"},
                    {"SLURM_STEP_NUM_TASKS", "2"},
                    {"SLURM_LOCALID", "1"},
                    {"SLURM_STEP_TASKS_PER_NODE", "2"},
                    {"PMIX_RANK", "1"}};
  e = srun;
  e["PMIX_RANK"] = "0";
  EXPECT_NE(error_of(e).find("PMIX_RANK=0 contradicts SLURM_PROCID=1"), std::string::npos) << error_of(e);
  e = srun;
  e.erase("PMIX_RANK");  // srun --mpi=none: MPI could not connect the tasks
  EXPECT_NE(error_of(e).find("start ustrain with srun --mpi=pmix"), std::string::npos) << error_of(e);
  e["SLURM_STEP_NUM_TASKS"] = "1";  // one task needs no MPI
  e["SLURM_PROCID"] = "0";
  e["SLURM_LOCALID"] = "0";
  e["SLURM_STEP_TASKS_PER_NODE"] = "1";
  EXPECT_EQ(discover(e).launcher, "srun");
  e = srun;
  e["SLURM_STEP_TASKS_PER_NODE"] = "2(x";
  EXPECT_NE(error_of(e).find("is not a Slurm tasks-per-node list"), std::string::npos) << error_of(e);
  e = srun;
  e["SLURM_NODEID"] = "1";
  EXPECT_NE(error_of(e).find("lists 1 nodes but SLURM_NODEID is 1"), std::string::npos) << error_of(e);
}

TEST(Launch, LayoutMustUseEveryLaunchedProcess) {
  ProcessInfo p;
  p.world_size = 4;
  p.rank = 3;
  EXPECT_NO_THROW(check_layout(p, MeshShape{.dp = 2, .tp = 2}));
  try {
    check_layout(p, MeshShape{.dp = 3});
    FAIL() << "a layout of 3 accepted 4 processes";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("needs 3 processes but 4 were launched"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ustrain
