#include "backends/hier/subset_transport.h"

#include <algorithm>

#include "lockstep/core/error.h"

namespace lockstep::hier {

SubsetTransport::SubsetTransport(Transport& base, std::vector<int> members)
    : base_(base), members_(std::move(members)) {
  auto me = std::find(members_.begin(), members_.end(), base.rank());
  LOCKSTEP_ENFORCE(me != members_.end(), InvalidArgument, "SubsetTransport: rank ", base.rank(),
                   " is not one of the members");
  rank_ = static_cast<int>(me - members_.begin());
}

int SubsetTransport::member(int peer) const {
  LOCKSTEP_ENFORCE(peer >= 0 && peer < size(), InvalidArgument, "SubsetTransport: peer ", peer,
                   " is not in [0, ", size(), ")");
  return members_[static_cast<size_t>(peer)];
}

Transport::Request SubsetTransport::post_send(int peer, const void* data, size_t bytes) {
  return base_.post_send(member(peer), data, bytes);
}

Transport::Request SubsetTransport::post_recv(int peer, void* data, size_t bytes) {
  return base_.post_recv(member(peer), data, bytes);
}

}  // namespace lockstep::hier
