#include "backends/hier/flat_mesh.h"

#include "backends/tcp/group_transport.h"

namespace lockstep::hier {

FlatMesh::FlatMesh(const GroupConfig& config)
    : config_(config), host_(host_name_of(config)) {
  transport_ = tcp::connect_group_transport(config, host_);
}

void FlatMesh::run(const Op& op) {
  with_op(op, [&](Transport& t, Scratch& s) { run_collective(t, s, op); });
}

void FlatMesh::abort(ErrorClass error_class, const std::string& reason) {
  // The note first: a peer that only sees our socket close looks there for the reason.
  if (config_.store) write_abort_note(*config_.store, config_.name, config_.rank, host_, reason);
  transport_->abort(error_class, reason);
}

}  // namespace lockstep::hier
