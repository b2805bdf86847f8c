#include "backends/mpi/runtime.h"

#include <cstdlib>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "core/log.h"
#include "lockstep/core/deadline.h"
#include "lockstep/core/error.h"

namespace lockstep::mpi {

namespace {

// How long exit keeps testing leftover requests before it gives up on MPI_Finalize.
constexpr milliseconds kLeftoverGrace{2000};

struct Runtime {
  std::mutex mu;
  std::vector<MPI_Request> leftovers;
  std::string init_error;  // set when initialisation failed; every later call rethrows it
};

// Never destroyed: the exit handler uses it after static destructors may have run.
Runtime& runtime() {
  static Runtime* r = new Runtime;
  return *r;
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

// Tests the leftovers until they complete or the grace period ends; returns how many remain.
size_t settle_leftovers(std::vector<MPI_Request>& left) {
  const Deadline until = Deadline::after(kLeftoverGrace);
  while (!left.empty() && !until.expired()) {
    for (size_t i = 0; i < left.size();) {
      int done = 0;
      if (MPI_Test(&left[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done)
        left.erase(left.begin() + static_cast<long>(i));
      else
        ++i;
    }
    if (!left.empty()) std::this_thread::sleep_for(milliseconds(1));
  }
  return left.size();
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  std::vector<MPI_Request> left;
  {
    std::lock_guard<std::mutex> lock(runtime().mu);
    left.swap(runtime().leftovers);
  }
  if (size_t n = settle_leftovers(left); n > 0) {
    log_warning("mpi backend: ", n,
                " operation(s) that failed or timed out are still pending in "
                "MPI; exiting without MPI_Finalize so that mpirun ends the job");
    return;
  }
  MPI_Finalize();
}

void initialize(Runtime& rt) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    rt.init_error = "the mpi backend cannot start: MPI_Finalize has already been called";
    return;
  }
  int initialized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      rt.init_error = "the mpi backend cannot start: MPI_Init_thread failed";
      return;
    }
    std::atexit(finalize_at_exit);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided < MPI_THREAD_MULTIPLE)
    rt.init_error = detail::concat(
        "the mpi backend needs MPI_THREAD_MULTIPLE (each group runs its ops on its own thread), "
        "but MPI provides ",
        thread_level_name(provided),
        initialized ? ". Initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), or "
                      "leave the initialisation to lockstep"
                    : ". Use an MPI library built with thread support (Debian's Open MPI is)");
}

}  // namespace

std::shared_mutex& communicator_changes() {
  static std::shared_mutex mu;
  return mu;
}

void free_communicator(MPI_Comm& comm) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || comm == MPI_COMM_NULL) return;
  std::unique_lock<std::shared_mutex> changing(communicator_changes());
  MPI_Comm_free(&comm);
}

void ensure_initialized() {
  static std::once_flag once;
  Runtime& rt = runtime();
  std::call_once(once, [&] { initialize(rt); });
  if (!rt.init_error.empty()) throw ConfigError(rt.init_error);
}

int world_rank() {
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  int error_class = code;
  MPI_Error_class(code, &error_class);
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return detail::concat(std::string(text, static_cast<size_t>(length)), " (MPI error class ",
                        error_class, ")");
}

void adopt_leftover(MPI_Request request) {
  if (request == MPI_REQUEST_NULL) return;
  std::lock_guard<std::mutex> lock(runtime().mu);
  runtime().leftovers.push_back(request);
}

}  // namespace lockstep::mpi
