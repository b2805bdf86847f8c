#include "world.h"

#include <gtest/gtest.h>

#include "lockstep/core/error.h"
#include "lockstep/group/init.h"

namespace lockstep::testing {

namespace {

std::shared_ptr<ProcessGroup> g_world;

class WorldEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    g_world = init_process_group({.backend = "mpi", .timeout = std::chrono::seconds(60)});
  }
  void TearDown() override { g_world.reset(); }
};

[[maybe_unused]] auto* const g_environment =
    ::testing::AddGlobalTestEnvironment(new WorldEnvironment);

}  // namespace

ProcessGroup& world() {
  if (!g_world) throw Error("the mpi test group was not created (see the first error above)");
  return *g_world;
}

std::string where(const ProcessGroup& pg) {
  return detail::concat("world ", pg.size(), " rank ", pg.rank());
}

}  // namespace lockstep::testing
