// PeerLinks: the connections a backend holds to its peers, which the group's p2p channel shares
// instead of making its own (one connection per peer pair and medium: the tcp and hier backends'
// mesh, src/backends/tcp/mesh_links.h). Opaque here: the backend table pairs each backend with
// the channel factory that knows its links (src/group/backend_registry.cc).
#pragma once

namespace lockstep {

class PeerLinks {
 public:
  virtual ~PeerLinks() = default;
};

}  // namespace lockstep
