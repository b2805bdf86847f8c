// [MPI bootstrap] (backend.h): the job's store, found through MPI instead of MASTER_ADDR.
#include <array>
#include <cstring>

#include "backends/mpi/backend.h"
#include "backends/mpi/errors.h"
#include "backends/mpi/runtime.h"
#include "backends/mpi/wait.h"
#include "core/host_cores.h"
#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"

namespace lockstep::mpi {

namespace {

constexpr size_t kAddressBytes = 512;

void check_matches_mpi(const JobPlace& rv) {
  const int rank = world_rank(), size = world_size();
  LOCKSTEP_ENFORCE(rv.rank == rank && rv.world_size == size, ConfigError,
                   "init_process_group: rank ", rv.rank, " of ", rv.world_size, " (from ",
                   rv.source, ") is not this process's place in MPI_COMM_WORLD (rank ", rank,
                   " of ", size,
                   "). Without MASTER_ADDR the store is found through MPI, which "
                   "needs every rank started by one mpirun");
}

}  // namespace

std::shared_ptr<Store> open_bootstrap_store(const JobPlace& rv, milliseconds timeout) {
  ensure_initialized();
  check_matches_mpi(rv);
  std::shared_ptr<TcpStore> store;
  std::array<char, kAddressBytes> address{};
  if (rv.rank == 0) {
    store = std::make_shared<TcpStore>(
        TcpStoreOptions{.host = "127.0.0.1",
                        .port = static_cast<uint16_t>(rv.master_port > 0 ? rv.master_port : 0),
                        .is_server = true,
                        .timeout = timeout});
    const bool one_host = rv.local_world_size == rv.world_size;
    std::string text = (one_host ? std::string("127.0.0.1") : net::hostname()) + " " +
                       std::to_string(store->port());
    std::strncpy(address.data(), text.c_str(), kAddressBytes - 1);
  }
  const WaitContext context{.what = "init_process_group (broadcast of the store's address)",
                            .deadline = Deadline::after(timeout),
                            .rank = rv.rank,
                            .oversubscribed = detail::oversubscribed(rv.local_world_size)};
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Ibcast(address.data(), kAddressBytes, MPI_CHAR, 0, MPI_COMM_WORLD, &request),
            context.what, rv.rank, "MPI_Ibcast");
  wait_request(request, context, "MPI_Ibcast");
  if (store) return store;
  std::string text(address.data());
  const size_t space = text.rfind(' ');
  LOCKSTEP_ENFORCE(space != std::string::npos, NetworkError,
                   "init_process_group: rank 0 sent a malformed store address '", text, "'");
  return std::make_shared<TcpStore>(
      TcpStoreOptions{.host = text.substr(0, space),
                      .port = static_cast<uint16_t>(std::stoi(text.substr(space + 1))),
                      .timeout = timeout});
}

}  // namespace lockstep::mpi
