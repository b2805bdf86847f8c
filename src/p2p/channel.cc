#include "p2p/channel.h"

#include "comm/group_config.h"

namespace lockstep::p2p {

std::string store_key(const GroupConfig& config, const std::string& what, int rank) {
  return "p2p/" + config.name + "/" + what + "/" + std::to_string(rank);
}

}  // namespace lockstep::p2p
