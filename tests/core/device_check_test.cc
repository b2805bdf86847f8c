// The duplicate-device check (failure catalogue entry 7) as a pure function: ranks on one host
// that claim one physical GPU are named with the host, the device and the LOCAL_RANK fix.
#include <gtest/gtest.h>

#include <vector>

#include "core/device_check.h"
#include "lockstep/core/error.h"

namespace lockstep {
namespace {

DeviceClaim claim(int rank, const std::string& host, int device, const std::string& pci) {
  return {
      .rank = rank, .host_id = host + "/boot", .host = host, .device = device, .device_id = pci};
}

TEST(DeviceCheck, DistinctDevicesPerHostPass) {
  std::vector<DeviceClaim> claims = {claim(0, "a", 0, "0000:01:00.0"),
                                     claim(1, "a", 1, "0000:02:00.0"),
                                     claim(2, "b", 0, "0000:01:00.0"),  // same PCI id, other host
                                     claim(3, "b", 1, "0000:02:00.0")};
  EXPECT_EQ(duplicate_device_problem(claims), std::nullopt);
  EXPECT_NO_THROW(check_distinct_devices(claims));
  EXPECT_NO_THROW(check_distinct_devices(std::vector<DeviceClaim>{}));
}

TEST(DeviceCheck, EveryRankOnCuda0NamesRanksHostDeviceAndFix) {
  std::vector<DeviceClaim> claims = {claim(1, "node7", 0, "0000:3b:00.0"),
                                     claim(0, "node7", 0, "0000:3b:00.0")};
  try {
    check_distinct_devices(claims);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("ranks 0 and 1 on host node7 all use cuda:0"), std::string::npos) << what;
    EXPECT_NE(what.find("0000:3b:00.0"), std::string::npos) << what;
    EXPECT_NE(what.find("LOCAL_RANK"), std::string::npos) << what;
    EXPECT_NE(what.find("cudaSetDevice(local_rank)"), std::string::npos) << what;
    EXPECT_NE(what.find("torch::Device(torch::kCUDA, local_rank)"), std::string::npos) << what;
  }
}

TEST(DeviceCheck, SamePhysicalGpuUnderDifferentIndicesIsCaught) {
  // CUDA_VISIBLE_DEVICES=1 on rank 0 and unset on rank 1: indices differ, the GPU is the same.
  std::vector<DeviceClaim> claims = {claim(0, "h", 0, "0000:02:00.0"),
                                     claim(1, "h", 1, "0000:02:00.0")};
  auto problem = duplicate_device_problem(claims);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("cuda:0 (rank 0), cuda:1 (rank 1)"), std::string::npos) << *problem;
}

TEST(DeviceCheck, SameIndexUnderDifferentVisibleDevicesPasses) {
  // CUDA_VISIBLE_DEVICES=0 and =1: both ranks see cuda:0, but they are different GPUs.
  std::vector<DeviceClaim> claims = {claim(0, "h", 0, "0000:01:00.0"),
                                     claim(1, "h", 0, "0000:02:00.0")};
  EXPECT_EQ(duplicate_device_problem(claims), std::nullopt);
}

TEST(DeviceCheck, ContainersWithOneHostNameButDifferentMachinesPass) {
  std::vector<DeviceClaim> claims = {claim(0, "worker", 0, "0000:01:00.0"),
                                     claim(1, "worker", 0, "0000:01:00.0")};
  claims[1].host_id = "worker/other-boot";
  EXPECT_EQ(duplicate_device_problem(claims), std::nullopt);
}

TEST(DeviceCheck, EveryDuplicateSetIsNamedOnlyOnce) {
  std::vector<DeviceClaim> claims = {claim(0, "a", 0, "p0"), claim(1, "a", 0, "p0"),
                                     claim(2, "a", 0, "p0"), claim(3, "b", 1, "p1"),
                                     claim(4, "b", 1, "p1"), claim(5, "b", 2, "p2")};
  auto problem = duplicate_device_problem(claims);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("ranks 0, 1 and 2 on host a all use cuda:0"), std::string::npos)
      << *problem;
  EXPECT_NE(problem->find("ranks 3 and 4 on host b all use cuda:1"), std::string::npos) << *problem;
  EXPECT_EQ(problem->find("rank 5"), std::string::npos) << *problem;
  EXPECT_EQ(problem->find("5 on host"), std::string::npos) << *problem;
}

TEST(DeviceCheck, ClaimsRoundTripThroughTheStoreEncoding) {
  DeviceClaim c = claim(3, "gpu-node-12", 5, "0000:b1:00.0");
  DeviceClaim back = decode_device_claim(3, encode_device_claim(c));
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.host_id, c.host_id);
  EXPECT_EQ(back.host, c.host);
  EXPECT_EQ(back.device, 5);
  EXPECT_EQ(back.device_id, c.device_id);
}

TEST(DeviceCheck, MalformedClaimIsAStoreErrorNamingTheRank) {
  for (std::string bad : {"", "h\nh\n0", "h\nh\nx\np", "h\nh\n-1\np", "h\nh\n1\np\nextra"}) {
    try {
      decode_device_claim(4, bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 4"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lockstep
