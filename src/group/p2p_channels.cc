#include "group/p2p_channels.h"

#include "group/optional_backends.h"
#include "p2p/shm_channel.h"
#include "p2p/socket_channel.h"

namespace lockstep {

std::unique_ptr<p2p::Channel> make_p2p_channel(const GroupConfig& config,
                                               const std::string& backend) {
  if (backend == "shm") return std::make_unique<p2p::ShmChannel>(config);
  if (backend == "tcp" || backend == "hier") return std::make_unique<p2p::SocketChannel>(config);
  if (backend == "mpi" && make_mpi_p2p_channel) return make_mpi_p2p_channel(config);
  return nullptr;
}

}  // namespace lockstep
