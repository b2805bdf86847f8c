#include "backends/nccl/communicator.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "backends/nccl/cuda_util.h"
#include "backends/nccl/nccl_types.h"
#include "comm/backend.h"
#include "comm/failure.h"
#include "core/device_check.h"
#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep::nccl {

namespace {

constexpr auto kNoteCheckInterval = std::chrono::milliseconds(100);

// Polling pace: yield for the first polls (small ops finish in microseconds), then sleep,
// doubling up to 1 ms, so that a long wait does not burn a core.
class Backoff {
 public:
  void pause() {
    if (++polls_ <= 200) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(sleep_);
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
  }

 private:
  int polls_ = 0;
  std::chrono::microseconds sleep_{20};
};

std::chrono::milliseconds at_least_1ms(Deadline deadline) {
  return std::max(deadline.remaining(), std::chrono::milliseconds(1));
}

}  // namespace

Communicator::Communicator(const GroupConfig& config, int device, Deadline deadline)
    : config_(config),
      device_(device),
      host_(host_name_of(config)) {
  try {
    check_cuda(cudaSetDevice(device_), detail::concat(where("nccl init"), ": cudaSetDevice"));
    exchange_claims(deadline);
    peers_ = std::make_unique<PeerWatch>(config_, deadline);
    ncclUniqueId id = exchange_unique_id(deadline);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               detail::concat(where("nccl init"), ": cudaStreamCreate"));
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(int)),
               detail::concat(where("nccl init"), ": cudaMalloc"));
    check_cuda(cudaMemset(scratch_, 0, sizeof(int)),
               detail::concat(where("nccl init"), ": cudaMemset"));
    ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
    nccl_config.blocking = 0;  // [Init]: every wait is ours, and bounded by the deadline
    nccl_config.commName = config_.name.c_str();
    ncclResult_t r = ncclCommInitRankConfig(&comm_, config_.size, id, config_.rank, &nccl_config);
    settle(r, "ncclCommInitRankConfig", "nccl init", deadline);
  } catch (...) {
    abort();
    release();
    throw;
  }
}

Communicator::~Communicator() {
  release();
}

void Communicator::release() {
  if (comm_ != nullptr) {
    // A finalized communicator has nothing in flight; anything else is released without
    // waiting for peers (ncclCommDestroy could block on them).
    if (finalized_)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  scratch_ = nullptr;
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

void Communicator::exchange_claims(Deadline deadline) {
  const std::string prefix = config_.name + "/nccl/claim/";
  DeviceClaim mine{.rank = config_.rank,
                   .host_id = net::host_identity(),
                   .host = host_,
                   .device = device_,
                   .device_id = pci_bus_id(device_)};
  config_.store->set(prefix + std::to_string(config_.rank), encode_device_claim(mine));
  std::vector<std::string> keys;
  for (int r = 0; r < config_.size; ++r) keys.push_back(prefix + std::to_string(r));
  std::vector<std::string> values;
  try {
    values = config_.store->multi_get(keys, at_least_1ms(deadline));
  } catch (const TimeoutError&) {
    std::string missing;
    for (int r = 0; r < config_.size; ++r) {
      if (config_.store->check({keys[static_cast<size_t>(r)]})) continue;
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    throw TimeoutError(detail::concat(
        where("nccl init"), ": ranks [", missing, "] of group '", config_.name,
        "' never joined the NCCL communicator. Every rank must create it: with backend nccl at "
        "init, with backend auto at the first op on CUDA buffers (every rank must pass CUDA "
        "buffers to the same ops)"));
  }
  std::vector<DeviceClaim> claims;
  for (int r = 0; r < config_.size; ++r)
    claims.push_back(decode_device_claim(r, values[static_cast<size_t>(r)]));
  check_distinct_devices(claims);
}

ncclUniqueId Communicator::exchange_unique_id(Deadline deadline) {
  const std::string key = config_.name + "/nccl/id";
  ncclUniqueId id{};
  if (config_.rank == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) fail_nccl(r, "ncclGetUniqueId", "nccl init");
    config_.store->set(key, std::string_view(id.internal, sizeof id.internal));
    return id;
  }
  std::string value;
  try {
    value = config_.store->get(key, at_least_1ms(deadline));
  } catch (const TimeoutError&) {
    throw TimeoutError(detail::concat(where("nccl init"), ": rank 0 of group '", config_.name,
                                      "' never published the NCCL unique id (key '", key,
                                      "'); see rank 0's error"));
  }
  LOCKSTEP_ENFORCE(value.size() == sizeof id.internal, StoreError, where("nccl init"),
                   ": the NCCL unique id in the store has ", value.size(), " bytes, not ",
                   sizeof id.internal, "; is every rank running the same lockstep and NCCL?");
  std::copy(value.begin(), value.end(), id.internal);
  return id;
}

std::string Communicator::where(std::string_view op) const {
  return detail::concat(op, " on rank ", config_.rank, " (host ", host_, ", nccl on cuda:", device_,
                        ")");
}

void Communicator::settle(ncclResult_t result, std::string_view call, std::string_view op,
                          Deadline deadline) {
  began_ = Clock::now();
  next_note_check_ = began_ + kNoteCheckInterval;  // ops that finish fast never ask the store
  Backoff backoff;
  while (result == ncclInProgress) {
    check_peers(op);
    if (deadline.expired()) fail_timeout(op);
    backoff.pause();
    if (ncclCommGetAsyncError(comm_, &result) != ncclSuccess) break;
  }
  if (result != ncclSuccess) fail_nccl(result, call, op);
}

void Communicator::wait(std::string_view op, Deadline deadline) {
  began_ = Clock::now();
  next_note_check_ = began_ + kNoteCheckInterval;  // ops that finish fast never ask the store
  Backoff backoff;
  for (;;) {
    cudaError_t query = cudaStreamQuery(stream_);
    if (query == cudaSuccess) return;
    if (query != cudaErrorNotReady) {
      abort();
      check_cuda(query, detail::concat(where(op), ": CUDA failed while the op ran"));
    }
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    if (async != ncclSuccess && async != ncclInProgress) fail_nccl(async, "NCCL", op);
    check_peers(op);
    if (deadline.expired()) fail_timeout(op);
    backoff.pause();
  }
}

void Communicator::abort() {
  if (aborted_) return;
  aborted_ = true;
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
}

void Communicator::finalize(Deadline deadline) {
  if (aborted_ || finalized_ || comm_ == nullptr) return;
  settle(ncclCommFinalize(comm_), "ncclCommFinalize", "shutdown", deadline);
  finalized_ = true;
}

void Communicator::fail_nccl(ncclResult_t result, std::string_view call, std::string_view op) {
  std::string message =
      detail::concat(where(op), ": ", call, " failed: ", nccl_error_text(result, comm_),
                     "; the NCCL communicator was aborted");
  if (auto dead = peers_ ? peers_->first_dead() : std::nullopt)
    message += detail::concat(". ", peers_->describe(*dead),
                              " on this host has exited: it crashed or was killed");
  abort();
  if (result == ncclRemoteError || result == ncclSystemError)
    throw NetworkError(message +
                       ". A peer probably died, was killed or lost its connection: "
                       "see the other ranks' errors (NCCL_DEBUG=WARN shows NCCL's view)");
  throw Error(message + " (NCCL_DEBUG=WARN prints NCCL's reason)");
}

void Communicator::fail_timeout(std::string_view op) {
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began_);
  abort();
  throw TimeoutError(detail::concat(
      where(op), ": not finished at its deadline (waited ", waited.count(),
      " ms; the group's timeout is LOCKSTEP_TIMEOUT). The NCCL communicator was aborted so that "
      "this rank does not hang. A rank probably died, never entered this op, or entered a "
      "different one: nccl cannot check that ranks agree before an op runs, so set "
      "LOCKSTEP_DEBUG=DETAIL to compare the calls"));
}

void Communicator::check_peers(std::string_view op) {
  auto now = Clock::now();
  if (now < next_note_check_) return;
  next_note_check_ = now + kNoteCheckInterval;
  std::optional<std::string> note;
  try {
    if (config_.store->check({abort_key(config_.name)}))
      note = read_abort_note(*config_.store, config_.name, std::chrono::milliseconds(1));
  } catch (const Error&) {
    // The store is unreachable: a dead peer, NCCL's own error or the deadline ends the wait.
  }
  if (note) {
    abort();
    throw NetworkError(detail::concat(where(op), ": the group was aborted by ", *note,
                                      "; this rank stopped waiting and aborted its NCCL "
                                      "communicator"));
  }
  if (auto dead = peers_ ? peers_->first_dead() : std::nullopt) {
    abort();
    throw NetworkError(detail::concat(
        where(op), ": ", peers_->describe(*dead),
        " on this host exited while this op waited for "
        "it: it crashed or was killed (SIGKILL often means the OOM killer; see its log). The NCCL "
        "communicator was aborted"));
  }
}

}  // namespace lockstep::nccl
