#include "comm/group_config.h"

#include "net/socket.h"

namespace lockstep {

std::string host_name_of(const GroupConfig& config) {
  return config.hostname.empty() ? net::hostname() : config.hostname;
}

}  // namespace lockstep
