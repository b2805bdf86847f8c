#include "backends/nccl/communicator.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "backends/nccl/cuda_util.h"
#include "backends/nccl/nccl_types.h"
#include "comm/backend.h"
#include "comm/failure.h"
#include "core/device_check.h"
#include "core/log.h"
#include "lockstep/core/error.h"
#include "lockstep/core/settings.h"
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
    : config_(config), device_(device), host_(host_name_of(config)) {
  try {
    // [Init] First, before anything can fail: every rank counts the same inits.
    const int64_t n =
        config_.store->add(config_.name + "/nccl/inits/" + std::to_string(config_.rank), 1);
    prefix_ = detail::concat(config_.name, "/nccl/", n, "/");
    check_cuda(cudaSetDevice(device_), detail::concat(where("nccl init"), ": cudaSetDevice"));
    exchange_claims(deadline);
    peers_ = std::make_unique<PeerWatch>(config_, prefix_, deadline);
    ncclUniqueId id = exchange_unique_id(deadline);
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               detail::concat(where("nccl init"), ": cudaStreamCreate"));
    // Stream-ordered where the device allows: freeing it then never waits for the device, so
    // destroying a group cannot block behind another group's hung kernel.
    int pools = 0;
    cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_);
    pooled_ = pools != 0;
    check_cuda(pooled_ ? cudaMallocAsync(reinterpret_cast<void**>(&scratch_), sizeof(int), stream_)
                       : cudaMalloc(reinterpret_cast<void**>(&scratch_), sizeof(int)),
               detail::concat(where("nccl init"), ": cudaMalloc"));
    check_cuda(cudaMemsetAsync(scratch_, 0, sizeof(int), stream_),
               detail::concat(where("nccl init"), ": cudaMemset"));
    ncclConfig_t nccl_config = NCCL_CONFIG_INITIALIZER;
    nccl_config.blocking = settings().nccl_nonblocking ? 0 : 1;  // [Blocking mode]
    if (nccl_config.blocking)
      watch_ = std::make_unique<BlockingWatch>([this] { return peer_problem(); },
                                               [this](const std::string& /*reason*/) {
                                                 std::lock_guard<std::mutex> lock(abort_mu_);
                                                 if (comm_ == nullptr || watch_aborted_) return;
                                                 watch_aborted_ = true;
                                                 ncclCommAbort(comm_);
                                               });
    nccl_config.commName = config_.name.c_str();
    ncclResult_t r = ncclCommInitRankConfig(&comm_, config_.size, id, config_.rank, &nccl_config);
    settle(r, "ncclCommInitRankConfig", "nccl init", deadline);
  } catch (const std::exception& e) {
    // Peers waiting for this rank (the unique id, NCCL's bootstrap) learn why at once.
    write_abort_note(*config_.store, config_.name, config_.rank, host_, e.what());
    abort();
    release();
    throw;
  }
}

Communicator::~Communicator() {
  release();
}

void Communicator::release() {
  watch_.reset();  // its thread may abort comm_: stop it first
  if (comm_ != nullptr && !watch_aborted_) {
    // A finalized communicator has nothing in flight; anything else is released without
    // waiting for peers (ncclCommDestroy could block on them).
    if (finalized_)
      ncclCommDestroy(comm_);
    else
      ncclCommAbort(comm_);
  }
  comm_ = nullptr;
  // cudaFree synchronizes the whole device, so it could wait behind another group's hung kernel
  // on the destroying thread; cudaFreeAsync and cudaStreamDestroy return at once. Without memory
  // pools, cudaFree it is (docs/nccl.md).
  if (scratch_ != nullptr) {
    if (pooled_ && stream_ != nullptr)
      cudaFreeAsync(scratch_, stream_);
    else
      cudaFree(scratch_);
  }
  scratch_ = nullptr;
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

std::optional<std::vector<std::string>> Communicator::get_or_note(
    const std::vector<std::string>& keys, Deadline deadline, std::string_view waiting_for) {
  for (;;) {
    auto slice = std::min(at_least_1ms(deadline), std::chrono::milliseconds(100));
    try {
      return config_.store->multi_get(keys, slice);
    } catch (const TimeoutError&) {
      if (config_.store->check({abort_key(config_.name)}))
        if (auto note = read_abort_note(*config_.store, config_.name, slice))
          throw NetworkError(detail::concat(where("nccl init"), ": the group was aborted by ",
                                            *note, "; this rank stopped waiting for ",
                                            waiting_for));
      if (deadline.expired()) return std::nullopt;
    }
  }
}

void Communicator::exchange_claims(Deadline deadline) {
  const std::string prefix = prefix_ + "claim/";
  DeviceClaim mine{.rank = config_.rank,
                   .host_id = net::host_identity(),
                   .host = host_,
                   .device = device_,
                   .device_id = pci_bus_id(device_)};
  config_.store->set(prefix + std::to_string(config_.rank), encode_device_claim(mine));
  std::vector<std::string> keys;
  for (int r = 0; r < config_.size; ++r) keys.push_back(prefix + std::to_string(r));
  auto values = get_or_note(keys, deadline, "the other ranks' device claims");
  if (!values) {
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
    claims.push_back(decode_device_claim(r, (*values)[static_cast<size_t>(r)]));
  check_distinct_devices(claims);
}

ncclUniqueId Communicator::exchange_unique_id(Deadline deadline) {
  const std::string key = prefix_ + "id";
  ncclUniqueId id{};
  if (config_.rank == 0) {
    // A failure here leaves the abort note (the constructor's catch): peers stop waiting.
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) fail_nccl(r, "ncclGetUniqueId", "nccl init");
    config_.store->set(key, std::string_view(id.internal, sizeof id.internal));
    return id;
  }
  auto got = get_or_note({key}, deadline, "rank 0's NCCL unique id");
  if (!got)
    throw TimeoutError(detail::concat(where("nccl init"), ": rank 0 of group '", config_.name,
                                      "' never published the NCCL unique id (key '", key,
                                      "'); see rank 0's error"));
  const std::string& value = got->front();
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
  // The watch aborted the communicator under this call: comm_ is gone, its reason counts.
  if (watch_)
    if (auto reason = watch_->fired()) fail_watched(op, *reason);
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
  if (watch_)
    if (auto reason = watch_->fired()) fail_watched(op, *reason);
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
  // [Abort]: an abort inside an open group would only be queued.
  while (open_groups_ > 0) {
    --open_groups_;
    ncclGroupEnd();
  }
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (comm_ != nullptr && !watch_aborted_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  drain_stream();
}

void Communicator::drain_stream() {
  if (stream_ == nullptr) return;
  const auto until = Clock::now() + kIdleBound;
  while (cudaStreamQuery(stream_) == cudaErrorNotReady && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (cudaStreamQuery(stream_) == cudaErrorNotReady)
    log_warning(where("abort"), ": the stream was still busy ", kIdleBound.count(),
                " s after ncclCommAbort; the GPU may still write this op's buffers after its "
                "Work completes");
  cudaGetLastError();  // a sticky-free error of the aborted kernels must not fail later calls
}

void Communicator::fail_watched(std::string_view op, const std::string& reason) {
  abort();  // the watch already called ncclCommAbort: this ends groups and drains the stream
  if (reason.empty())
    throw TimeoutError(detail::concat(
        where(op),
        ": not finished at its deadline, blocked inside NCCL (blocking communicator; "
        "the group's timeout is LOCKSTEP_TIMEOUT). The NCCL communicator was aborted so that "
        "this rank does not hang. A rank probably died, never entered this op, or entered a "
        "different one: set LOCKSTEP_DEBUG=DETAIL to compare the calls"));
  throw NetworkError(detail::concat(where(op), ": ", reason,
                                    " while this rank waited inside NCCL; the NCCL communicator "
                                    "was aborted"));
}

void Communicator::finalize(Deadline deadline) {
  if (aborted_ || finalized_ || comm_ == nullptr) return;
  ArmedWatch armed(watch_.get(), deadline);
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
  const ErrorClass error_class = nccl_error_class(result);
  switch (error_class) {
    case ErrorClass::network:
      throw_as(error_class, message +
                                ". A peer probably died, was killed or lost its connection: "
                                "see the other ranks' errors (NCCL_DEBUG=WARN shows NCCL's view)");
    case ErrorClass::timeout:
      throw_as(error_class, message +
                                ". NCCL gave up waiting for a peer (NCCL_DEBUG=WARN says "
                                "which); see the other ranks' errors");
    default:
      throw_as(error_class, message + " (NCCL_DEBUG=WARN prints NCCL's reason)");
  }
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
  if (auto problem = peer_problem()) {
    abort();
    throw NetworkError(detail::concat(where(op), ": ", *problem,
                                      "; this rank stopped waiting and aborted its NCCL "
                                      "communicator"));
  }
}

std::optional<std::string> Communicator::peer_problem() const {
  try {
    if (config_.store->check({abort_key(config_.name)}))
      if (auto note = read_abort_note(*config_.store, config_.name, std::chrono::milliseconds(1)))
        return "the group was aborted by " + *note;
  } catch (const Error&) {
    // The store is unreachable: a dead peer, NCCL's own error or the deadline ends the wait.
  }
  if (auto dead = peers_ ? peers_->first_dead() : std::nullopt)
    return detail::concat(peers_->describe(*dead),
                          " on this host exited while this op waited for it: it crashed or was "
                          "killed (SIGKILL often means the OOM killer; see its log)");
  return std::nullopt;
}

}  // namespace lockstep::nccl

namespace lockstep::nccl {

GroupScope::GroupScope(Communicator& comm, std::string_view op, Deadline deadline)
    : comm_(comm), op_(op), deadline_(deadline), depth_(comm.open_groups_ + 1) {
  comm_.settle(ncclGroupStart(), "ncclGroupStart", op_, deadline_);
  comm_.open_groups_ = depth_;
}

GroupScope::~GroupScope() {
  // Unwinding with the group still open (an error between start and end that did not abort).
  if (comm_.open_groups_ >= depth_) {
    comm_.open_groups_ = depth_ - 1;
    ncclGroupEnd();
  }
}

void GroupScope::end() {
  if (comm_.open_groups_ < depth_) return;  // abort() ended it
  comm_.open_groups_ = depth_ - 1;
  comm_.settle(ncclGroupEnd(), "ncclGroupEnd", op_, deadline_);
}

}  // namespace lockstep::nccl
