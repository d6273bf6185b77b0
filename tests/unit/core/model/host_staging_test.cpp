// Host staging on the CPU backend (what the checkpoint writer's snapshot is allocated as):
// plain host memory, usable after the backend is gone, none for 0 bytes, and a UserError
// naming its purpose when the host cannot give it.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/error.h"

namespace ustrain {
namespace {

TEST(HostStaging, TheCpuBackendGivesPlainMemoryThatOutlivesIt) {
  auto backend = make_backend(Device::cpu, 1);
  HostStaging staging = backend->allocate_host_staging(1 << 20, "a test buffer");
  ASSERT_NE(staging.get(), nullptr);
  backend.reset();  // the deleter needs no backend
  std::memset(staging.get(), 0x5a, 1 << 20);
  EXPECT_EQ(static_cast<unsigned char*>(staging.get())[(1 << 20) - 1], 0x5a);
}

TEST(HostStaging, ZeroBytesIsNoMemory) {
  auto backend = make_backend(Device::cpu, 1);
  EXPECT_EQ(backend->allocate_host_staging(0, "nothing").get(), nullptr);
}

TEST(HostStaging, MoreThanTheHostHasIsAUserErrorNamingThePurpose) {
  auto backend = make_backend(Device::cpu, 1);
  try {
    backend->allocate_host_staging(std::numeric_limits<std::size_t>::max() / 2, "the checkpoint snapshot");
    FAIL() << "an impossible host allocation succeeded";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("out of host memory"), std::string::npos) << message;
    EXPECT_NE(message.find("the checkpoint snapshot"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace ustrain
