// lockstep doctor: names and the master. Resolves this host's name and MASTER_ADDR (with a
// deadline: a dead DNS server must not hang the doctor), probes MASTER_ADDR:MASTER_PORT with one
// connection attempt, and tests whether the store's port is free where rank 0 will open it.
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cli/doctor_checks.h"
#include "cli/doctor_verdicts.h"
#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "net/socket.h"
#include "store/client_connection.h"
#include "store/refusals.h"

namespace lockstep::cli::doctor {
namespace {

using detail::concat;
using std::chrono::milliseconds;

struct Resolution {
  bool finished = false;
  int gai_error = 0;
  std::vector<sockaddr_storage> addresses;
};

// getaddrinfo on a detached thread, waited for up to `timeout`.
Resolution resolve(const std::string& host, milliseconds timeout) {
  struct Shared {
    std::mutex mu;
    std::condition_variable done;
    Resolution result;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, host] {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list);
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->result.gai_error = rc;
    for (addrinfo* a = list; rc == 0 && a; a = a->ai_next) {
      sockaddr_storage ss{};
      std::memcpy(&ss, a->ai_addr, a->ai_addrlen);
      shared->result.addresses.push_back(ss);
    }
    if (list) ::freeaddrinfo(list);
    shared->result.finished = true;
    shared->done.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->done.wait_for(lock, timeout, [&] { return shared->result.finished; });
  return shared->result;
}

socklen_t length_of(const sockaddr_storage& a) {
  return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

sockaddr_storage with_port(sockaddr_storage a, int port) {
  if (a.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6&>(a).sin6_port = htons(port);
  else
    reinterpret_cast<sockaddr_in&>(a).sin_port = htons(port);
  return a;
}

std::string ip_text(const sockaddr_storage& a) {
  char host[NI_MAXHOST] = {};
  ::getnameinfo(reinterpret_cast<const sockaddr*>(&a), length_of(a), host, sizeof(host), nullptr, 0,
                NI_NUMERICHOST);
  return host;
}

// One non-blocking connect; returns 0 when connected, else the errno (ETIMEDOUT at the timeout).
int try_connect(const sockaddr_storage& address, milliseconds timeout) {
  net::Fd fd(::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno;
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), length_of(address)) == 0)
    return 0;
  if (errno != EINPROGRESS) return errno;
  pollfd p{.fd = fd.get(), .events = POLLOUT, .revents = 0};
  int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready <= 0) return ready == 0 ? ETIMEDOUT : errno;
  int error = 0;
  socklen_t len = sizeof(error);
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
  return error;
}

// Whether a bind to `address` (any port) works: false when it is not an address of this host.
bool is_local(const sockaddr_storage& address) {
  net::Fd fd(::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_storage any_port = with_port(address, 0);
  return fd.valid() &&
         ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&any_port), length_of(any_port)) == 0;
}

// Binds and listens on 0.0.0.0:port as the store does (SO_REUSEADDR, so a port in TIME_WAIT
// counts as free). Returns 0 or the errno.
int bind_error(int port) {
  net::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return errno;
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) return errno;
  return ::listen(fd.get(), 1) == 0 ? 0 : errno;
}

bool answers_as_store(const std::string& host, int port, milliseconds timeout) {
  try {
    store_detail::ClientConnection probe(host, static_cast<uint16_t>(port),
                                         Deadline::after(timeout), job_secret_from_environment());
    return true;
  } catch (const AuthError&) {
    return true;  // a store, of a job with another secret (or none)
  } catch (const Error&) {
    return false;
  }
}

// Connections the job refused for its secret or turned away at the store's handshake
// (src/store/refusals.h): the INFO line
// naming each address is in the refusing rank's log; the store keeps the count and the last one.
void check_refusals(const std::string& host, int port, milliseconds timeout, Report& report) {
  Refusals refused;
  try {
    TcpStore store({.host = host, .port = static_cast<uint16_t>(port), .timeout = timeout});
    refused = read_refusals(store);
  } catch (const Error&) {
    return;  // a store of another job, or one that left: nothing to say about refusals
  }
  if (refused.count == 0) {
    report.ok("refusals", "no connection to this job was refused for its secret");
    return;
  }
  report.problem("refusals",
                 concat(refused.count,
                        " connection(s) to this job were refused for not proving "
                        "its secret; the last: ",
                        refused.last),
                 "if no rank of yours was started with another secret, someone else reaches this "
                 "job's ports: the refusing ranks' INFO log lines name each address");
}

// Whether the job authenticates its store (docs/security.md).
void check_secret(Report& report) {
  std::string secret;
  try {
    secret = job_secret_from_environment();
  } catch (const ConfigError& e) {
    report.problem("secret", e.what(), "fix LOCKSTEP_SECRET_FILE");
    return;
  }
  if (!secret.empty()) {
    report.ok("secret", "the job has a secret: its store admits only processes that prove it");
    return;
  }
  report.note("secret",
              "no LOCKSTEP_SECRET or LOCKSTEP_SECRET_FILE: anyone who reaches the store's port can "
              "join this job and read or write its keys",
              "start it under `lockstep run` (a secret per job), or give every node the same "
              "--secret-file");
}

// With several nodes, a name that resolves to a loopback address is a problem
// (hostname_verdict); one that does not resolve is a note: lockstep's nodes advertise addresses.
void check_hostname(const Job& job, const std::string& master, milliseconds timeout,
                    Report& report) {
  const std::string name = net::hostname();
  Resolution r = resolve(name, timeout);
  if (r.finished && r.gai_error == 0 && !r.addresses.empty()) {
    add("hostname",
        hostname_verdict(name, ip_text(r.addresses[0]), job.nodes, names_this_machine_only(master)),
        report);
    return;
  }
  report.note("hostname",
              concat("this host's name '", name, "' does not resolve (",
                     r.finished ? ::gai_strerror(r.gai_error) : "no answer in time",
                     "); lockstep does not need it (its nodes advertise addresses), but NCCL, "
                     "MPI, Gloo and some tools do"),
              concat("add '", name, "' with this host's routable address to /etc/hosts"));
}

// Resolves MASTER_ADDR; reports a problem and returns nothing when it does not resolve.
std::optional<Resolution> check_master_name(const std::string& host, milliseconds timeout,
                                            Report& report) {
  Resolution r = resolve(host, timeout);
  if (!r.finished) {
    report.problem("master",
                   concat("looking up MASTER_ADDR '", host, "' took more than ",
                          timeout.count() / 1000.0, " s (a slow or unreachable DNS)"),
                   "use an IP address, or add the name to /etc/hosts");
    return std::nullopt;
  }
  if (r.gai_error != 0 || r.addresses.empty()) {
    report.problem(
        "master",
        concat("MASTER_ADDR '", host, "' does not resolve: ", ::gai_strerror(r.gai_error)),
        "use a host name that every node resolves (check with `getent hosts " + host +
            "` on each node) or an IP address");
    return std::nullopt;
  }
  return r;
}

// The process that opens the store: MASTER_ADDR must be this host, and the port free.
void check_store_host(const Job& job, const Resolution& master, milliseconds timeout,
                      Report& report) {
  const EnvRendezvous& rv = job.rendezvous;
  const std::string where = concat(rv.master_addr, ":", rv.master_port);
  if (std::none_of(master.addresses.begin(), master.addresses.end(), is_local))
    report.problem("master",
                   concat("rank 0 hosts the store, but MASTER_ADDR '", rv.master_addr, "' (",
                          ip_text(master.addresses[0]), ") is not an address of this host"),
                   "start rank 0 on the host MASTER_ADDR names, or set MASTER_ADDR to this host");
  if (rv.master_port == 0) {  // with several ranks, the variables check reported it
    if (rv.world_size == 1) report.ok("port", "MASTER_PORT=0: the store will pick a free port");
    return;
  }
  const int error = bind_error(rv.master_port);
  if (error == 0) {
    report.ok("port", concat("MASTER_PORT ", rv.master_port,
                             " is free on this host (rank 0 "
                             "will open the store there)"));
  } else if (error == EADDRINUSE) {
    const bool store = answers_as_store(rv.master_addr, rv.master_port, timeout);
    report.problem("port",
                   concat("MASTER_PORT ", rv.master_port, " is already in use on this host (",
                          store ? "a lockstep store listens there: another job, or a previous "
                                  "run still exiting"
                                : "another program listens there",
                          ")"),
                   concat("choose another port (MASTER_PORT, or lockstep run --master-port P), "
                          "or port 0 with lockstep run to pick a free one; `ss -ltnp 'sport = :",
                          rv.master_port, "'` shows the holder"));
  } else {
    report.problem("port",
                   concat("cannot listen on MASTER_PORT ", rv.master_port, " (", where,
                          "): ", net::errno_text(error)),
                   error == EACCES ? "ports below 1024 need root: use a port above 1024"
                                   : "choose another port");
  }
}

// A process that connects to the store: it should answer, or (before the job) nothing listens.
void check_store_client(const Job& job, const Resolution& master, milliseconds timeout,
                        Report& report) {
  const EnvRendezvous& rv = job.rendezvous;
  const std::string where = concat(rv.master_addr, ":", rv.master_port);
  int error = ETIMEDOUT;
  for (const sockaddr_storage& a : master.addresses)
    if ((error = try_connect(with_port(a, rv.master_port), timeout)) == 0) break;
  if (error == 0) {
    if (answers_as_store(rv.master_addr, rv.master_port, timeout)) {
      report.ok("master", concat("a lockstep store answers at ", where));
      check_refusals(rv.master_addr, rv.master_port, timeout, report);
    } else
      report.problem("master",
                     concat("something listens at ", where, " but it is not a lockstep store"),
                     "check MASTER_PORT (another program uses it), and that every process runs "
                     "the same lockstep build");
  } else if (error == ECONNREFUSED && !job.agent_store) {
    report.note("master", concat("nothing listens at ", where,
                                 " yet: fine before the job starts "
                                 "(rank 0 opens the store; the others retry until "
                                 "LOCKSTEP_TIMEOUT)"));
  } else if (error == ECONNREFUSED) {
    report.problem("master",
                   concat("nothing listens at ", where,
                          ", where lockstep run's store "
                          "should be"),
                   "check that the launcher on the master node is running and that MASTER_ADDR "
                   "and MASTER_PORT point at it");
  } else {
    report.problem("master",
                   concat("cannot reach ", where, ": ", net::errno_text(error),
                          error == ETIMEDOUT ? " (no answer: a host that is down, or a "
                                               "firewall dropping packets)"
                                             : ""),
                   concat("check that MASTER_ADDR is rank 0's host as seen from this node and "
                          "that the port is open (`nc -z ",
                          rv.master_addr, " ", rv.master_port, "`)"));
  }
}

}  // namespace

void check_network(const Job& job, milliseconds probe_timeout, Report& report) {
  std::string master = job.valid ? job.rendezvous.master_addr : "";
  if (!job.valid) {
    const char* env_master = std::getenv("MASTER_ADDR");
    if (env_master && *env_master) master = env_master;
  }
  check_hostname(job, master, probe_timeout, report);
  check_secret(report);
  if (master.empty()) return;  // the variables check reported it
  std::optional<Resolution> resolved = check_master_name(master, probe_timeout, report);
  if (!resolved) return;
  if (!job.valid) {
    report.ok("master",
              concat("MASTER_ADDR '", master, "' resolves to ", ip_text(resolved->addresses[0])));
    return;
  }
  if (job.hosts_store())
    check_store_host(job, *resolved, probe_timeout, report);
  else
    check_store_client(job, *resolved, probe_timeout, report);
}

}  // namespace lockstep::cli::doctor
