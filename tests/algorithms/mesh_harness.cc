#include "mesh_harness.h"

#include <atomic>

#include "lockstep/store/hash_store.h"
#include "support/loopback_mesh.h"
#include "support/spawn.h"
#include "test_op.h"

namespace lockstep::testing {

Op MeshRank::op(OpKind kind) {
  return next_test_op(seq, kind);
}

void MeshRank::run(const Op& op, const std::function<void()>& algorithm) {
  transport->begin_op(op);
  algorithm();
  transport->end_op();
}

void MeshRank::run(const Op& op) {
  run(op, [&] { run_collective(*transport, scratch, op); });
}

void with_mesh(int size, const std::function<void(MeshRank&)>& fn) {
  static std::atomic<int> meshes{0};
  const std::string group = "mesh" + std::to_string(meshes++);
  auto store = std::make_shared<HashStore>();
  spawn(size, [&](int rank) {
    auto transport_ptr = connect_loopback_mesh(group, rank, size, store);
    tcp::TcpTransport& transport = *transport_ptr;
    MeshRank me{.rank = rank, .size = size, .transport = &transport};
    try {
      fn(me);
    } catch (...) {
      transport.abort(ErrorClass::other, "test rank failed");
      throw;
    }
    transport.goodbye(Deadline::after(std::chrono::seconds(10)));
  });
}

}  // namespace lockstep::testing
