// device.threads against the cores: fine up to them, a warning above, refused far above
// (100000 threads crashed inside OpenMP; 1000 on 2 cores ran 48 s per step).
#include "core/run/cpu_threads.h"

#include <gtest/gtest.h>

#include "core/step/model_instance.h"
#include "core/recipe/recipe.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

TEST(CpuThreads, UpToTheCoresIsFine) {
  for (std::int64_t threads : {0, 1, 8}) {
    const ThreadCheck c = check_threads(threads, 8);
    EXPECT_TRUE(c.error.empty() && c.warning.empty()) << threads;
  }
}

TEST(CpuThreads, AboveTheCoresWarns) {
  const ThreadCheck c = check_threads(3, 2);
  EXPECT_TRUE(c.error.empty());
  EXPECT_NE(c.warning.find("device.threads = 3, but this process may run on 2 cores"), std::string::npos)
      << c.warning;
}

TEST(CpuThreads, FarAboveTheCoresIsRefused) {
  for (std::int64_t threads : {9, 1000, 100000}) {
    const ThreadCheck c = check_threads(threads, 2);
    EXPECT_NE(c.error.find("set device.threads to at most 2"), std::string::npos) << c.error;
  }
}

TEST(CpuThreads, TheBackendOfARecipeIsNotMadeWithAbsurdThreads) {
  Recipe r;
  r.device.threads = 100000;
  EXPECT_THROW(make_recipe_backend(r), UserError);
  EXPECT_GE(usable_cores(), 1);
}

}  // namespace
}  // namespace ustrain
