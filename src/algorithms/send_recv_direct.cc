// Point-to-point send and recv: one message to or from op.peer. Its header carries the pair's
// sequence number and the tag, so a recv that does not match the next send from that peer (in
// tag or size) fails with a MismatchError instead of taking the wrong bytes.
#include "algorithms/algorithms.h"
#include "lockstep/core/error.h"

namespace lockstep {

void send_recv_direct(Transport& t, const Op& op) {
  const size_t bytes = op.count * element_size(op.dtype);
  LOCKSTEP_ENFORCE(op.peer != t.rank(), InvalidArgument, op.name(), ": rank ", t.rank(),
                   " cannot send to or receive from itself");
  if (op.kind == OpKind::send)
    t.wait(t.post_send(op.peer, op.input, bytes));
  else
    t.wait(t.post_recv(op.peer, op.output, bytes));
}

}  // namespace lockstep
