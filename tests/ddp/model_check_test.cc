#include "ddp/model_check.h"

#include <gtest/gtest.h>

#include <atomic>

#include "lockstep/core/error.h"
#include "support/spawn.h"

namespace lockstep::ddp {
namespace {

using lockstep::testing::spawn_groups;

std::vector<ParamShape> mlp(int64_t hidden) {
  return {{"fc1.weight", "float", {hidden, 8}},
          {"fc1.bias", "float", {hidden}},
          {"fc2.weight", "float", {10, hidden}},
          {"fc2.bias", "float", {10}}};
}

TEST(ModelCheck, PassesWhenEveryRankHasTheSameParameters) {
  spawn_groups(3, [](ProcessGroup& pg) {
    auto params = mlp(16);
    verify_same_parameters(pg, params, "DistributedDataParallel", kGroupTimeout);
  });
}

// Runs the check with `model(rank)` on `world` ranks; returns rank 0's error text and checks
// every rank threw the same MismatchError.
std::string mismatch_text(int world, const std::function<std::vector<ParamShape>(int)>& model) {
  std::vector<std::string> texts(world);
  spawn_groups(world, [&](ProcessGroup& pg) {
    auto params = model(pg.rank());
    try {
      verify_same_parameters(pg, params, "DistributedDataParallel", kGroupTimeout);
    } catch (const MismatchError& e) {
      texts[pg.rank()] = e.what();
    }
  });
  for (int r = 1; r < world; ++r) EXPECT_EQ(texts[r], texts[0]) << "rank " << r;
  return texts[0];
}

TEST(ModelCheck, NamesTheFirstDifferingParameterWithEachRanksShape) {
  std::string text = mismatch_text(3, [](int rank) { return mlp(rank == 2 ? 32 : 16); });
  EXPECT_NE(text.find("first at parameter #0: rank 0: 'fc1.weight' [16, 8] float; "
                      "rank 2: 'fc1.weight' [32, 8] float (1 other ranks agree with rank 0)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Every rank must build the same model"), std::string::npos) << text;
}

TEST(ModelCheck, NamesDtypeNameAndMissingParameterDifferences) {
  std::string dtype = mismatch_text(2, [](int rank) {
    auto p = mlp(16);
    if (rank == 1) p[3].dtype = "double";
    return p;
  });
  EXPECT_NE(
      dtype.find("parameter #3: rank 0: 'fc2.bias' [10] float; rank 1: 'fc2.bias' [10] double"),
      std::string::npos)
      << dtype;
  std::string missing = mismatch_text(2, [](int rank) {
    auto p = mlp(16);
    if (rank == 0) p.push_back({"fc3.weight", "float", {2, 10}});
    return p;
  });
  EXPECT_NE(missing.find("parameter #4: rank 0: 'fc3.weight' [2, 10] float; rank 1: no parameter "
                         "there (it has 4)"),
            std::string::npos)
      << missing;
}

}  // namespace
}  // namespace lockstep::ddp
