#include "backends/hier/leader_stage.h"

#include "backends/hier/subset_transport.h"

namespace lockstep::hier {

void TcpLeaderStage::all_reduce(const Op& identity, const Op& work) {
  mesh_.with_op(identity, [&](Transport& t, Scratch& scratch) {
    SubsetTransport leaders(t, leaders_);
    run_collective(leaders, scratch, work);
  });
}

}  // namespace lockstep::hier
