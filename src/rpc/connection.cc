#include "rpc/connection.h"

#include <cerrno>

namespace lockstep::rpc {

int Connection::send(FrameKind kind, uint64_t call_id, uint32_t lane, const Message& message,
                     Deadline deadline) {
  std::string prefix = frame_prefix(kind, call_id, lane, message);
  std::unique_lock lock(send_mu, std::defer_lock);
  if (!lock.try_lock_until(deadline.at())) return ETIMEDOUT;
  return write_frame(fd.get(), prefix, message, deadline);
}

}  // namespace lockstep::rpc
