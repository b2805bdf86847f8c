#include "backends/hier/flat_mesh.h"

#include "backends/tcp/group_transport.h"

namespace lockstep::hier {

FlatMesh::FlatMesh(const GroupConfig& config, const std::string& host)
    : transport_(tcp::connect_group_transport(config, host)) {}

void FlatMesh::run(const Op& op) {
  with_op(op, [&](Transport& t, Scratch& s) { run_collective(t, s, op); });
}

void FlatMesh::abort(ErrorClass error_class, const std::string& reason) {
  transport_->abort(error_class, reason);
}

}  // namespace lockstep::hier
