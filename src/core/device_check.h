// The duplicate-device check (failure catalogue entry 7): ranks of one group that run on the same
// host must each use their own GPU. A pure function over what every rank reported, so that it is
// tested without a GPU; GPU backends call it at init, after exchanging claims through the store.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace lockstep {

// What one rank says about its device.
struct DeviceClaim {
  int rank = 0;
  std::string host_id;    // compared: ranks with equal host_id share a machine
  std::string host;       // shown in messages (the host name)
  int device = 0;         // the CUDA device index as that rank sees it
  std::string device_id;  // compared: the physical device (PCI bus id), the same for every rank
                          // whatever its CUDA_VISIBLE_DEVICES
};

// The message for every set of two or more ranks on one host that claim one physical device,
// naming the ranks, the host and the device, and the fix (set the device from LOCAL_RANK); or
// nothing when every rank on each host has its own device. Claims may come in any order.
std::optional<std::string> duplicate_device_problem(std::span<const DeviceClaim> claims);

// Throws ConfigError with duplicate_device_problem's message, if any.
void check_distinct_devices(std::span<const DeviceClaim> claims);

// The claim as one store value, and back. decode throws StoreError on a malformed value.
std::string encode_device_claim(const DeviceClaim& claim);
DeviceClaim decode_device_claim(int rank, std::string_view value);

}  // namespace lockstep
