#include "comm/backend.h"

namespace lockstep {

std::string Backend::device_problem(Device device) const {
  if (!device.is_cuda()) return "";
  return "backend '" + name() + "' moves host memory only (use backend 'auto' or 'nccl', " +
         "in a build with CUDA and NCCL)";
}

SharedBuffer Backend::allocate(size_t bytes, uint64_t /*index*/, Deadline /*deadline*/) {
  return SharedBuffer::local(bytes);
}

BackendBase::BackendBase(std::string name, const GroupConfig& config)
    : name_(std::move(name)), config_(config), host_(host_name_of(config)) {}

void BackendBase::write_note(const std::string& reason) const {
  if (config_.store) write_abort_note(*config_.store, config_.name, config_.rank, host_, reason);
}

void BackendBase::fail(ErrorClass error_class, const std::string& reason) {
  if (failure_.record(error_class, reason)) tell_peers(error_class, reason);
}

uint64_t payload_bytes(const Op& op) {
  uint64_t elements = op.count;
  for (size_t c : op.counts) elements += c;
  for (size_t c : op.recv_counts) elements += c;
  return elements * element_size(op.dtype);
}

bool small_enough_to_inline(const Op& op, uint64_t limit) {
  return op.kind != OpKind::recv && payload_bytes(op) <= limit;
}

}  // namespace lockstep
