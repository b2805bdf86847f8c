#include "backends/tcp/mesh.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/log.h"
#include "lockstep/core/error.h"
#include "net/bind.h"
#include "net/handshake.h"
#include "net/listener_record.h"
#include "store/refusals.h"

namespace lockstep::tcp {

namespace {

// How long an accepted connection may take to say hello before it is dropped.
constexpr milliseconds kHelloGrace{2000};

net::Endpoint endpoint(const MeshOptions& o) {
  return {.service = net::Service::mesh,
          .group = o.group,
          .size = o.size,
          .rank = o.rank,
          .host = o.hostname,
          .has_secret = !o.secret.empty()};
}

net::ListenerRecord lookup(const MeshOptions& o, int rank) {
  std::string key = net::listener_key(o.group, net::Service::mesh, rank);
  std::string record;
  try {
    record = o.store->get(key, std::max(o.deadline.remaining(), milliseconds(1)));
  } catch (const TimeoutError& e) {
    throw TimeoutError(detail::concat("group '", o.group, "' rank ", o.rank, ": rank ", rank,
                                      " never published its address (store key '", key,
                                      "'): did every rank start, with the same group? (", e.what(),
                                      ")"));
  }
  return net::parse_listener_record(record, rank);
}

PeerInfo peer_info(const net::ListenerRecord& r, int rank, int pid) {
  return {.rank = rank, .host = r.hostname, .address = r.address, .pid = pid};
}

std::string advertised(const MeshOptions& o) {
  return o.advertise_address.empty() ? net::hostname() : o.advertise_address;
}

struct Pending {
  net::Fd fd;
  net::ListenerRecord address;
  auth::ConnectProof sent;  // with a secret
};

// Connects to a lower rank and sends our hello; its answer is read later (finish_connect).
Pending start_connect(const MeshOptions& o, int rank) {
  Pending p{.address = lookup(o, rank)};
  p.fd = net::connect_tcp(p.address.host, p.address.port, o.deadline, true);
  net::tune_tcp(p.fd.get(), o.socket_buffer_bytes);
  p.sent = net::send_hello(p.fd.get(), net::make_hello(endpoint(o)), o.secret, p.address.challenge,
                           o.deadline, detail::concat("rank ", rank, " at ", p.address.address));
  return p;
}

std::unique_ptr<Connection> finish_connect(const MeshOptions& o, Pending p, int rank) {
  std::string what =
      detail::concat("rank ", rank, " (", p.address.address, " on ", p.address.hostname, ")");
  auth::Verdict verdict;
  try {
    net::read_full(p.fd.get(), &verdict, sizeof(verdict), o.deadline, what);
  } catch (const NetworkError& e) {
    throw NetworkError(detail::concat("group '", o.group, "' rank ", o.rank, ": ", what,
                                      " refused the connection (", e.what(),
                                      "). Do all ranks run the same lockstep version and group?"));
  }
  auth::check_verdict(o.secret, p.address.challenge, p.sent, verdict,
                      detail::concat("group '", o.group, "' rank ", o.rank, ": ", what));
  net::Hello h;
  net::read_full(p.fd.get(), &h, sizeof(h), o.deadline, what);
  std::string problem = net::hello_problem(h, endpoint(o));
  if (problem.empty() && h.rank != rank) problem = detail::concat("answered as rank ", h.rank);
  LOCKSTEP_ENFORCE(problem.empty(), NetworkError, "group '", o.group, "' rank ", o.rank, ": ", what,
                   " is ", problem, ". Is another job using the same store?");
  net::set_nonblocking(p.fd.get(), true);
  return std::make_unique<Connection>(std::move(p.fd), peer_info(p.address, rank, h.pid));
}

std::string missing_ranks(const std::vector<std::unique_ptr<Connection>>& conns, int from) {
  std::string s;
  for (size_t r = static_cast<size_t>(from); r < conns.size(); ++r)
    if (!conns[r]) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// Reads one hello (and, with a secret, its proof) from a fresh connection and judges it. On any
// problem logs it, drops the connection and returns nothing (so that junk never breaks setup); a
// connector refused for its secret is told why first (the verdict), so that a rank of this job
// with another secret fails with an AuthError rather than a timeout.
std::optional<net::Hello> accept_one(const MeshOptions& o, const auth::Nonce& challenge,
                                     net::Fd& fd, std::vector<std::unique_ptr<Connection>>& conns) {
  const std::string from = net::peer_address(fd.get());
  net::HelloReader reader(std::move(fd), from,
                          std::min(o.deadline.at(), Clock::now() + kHelloGrace));
  const auto drop = [&](const std::string& why) {
    log_info("group '", o.group, "' rank ", o.rank, ": dropped a connection from ", from, ": ",
             why);
    return std::nullopt;
  };
  if (reader.finish(endpoint(o)) != net::HelloReader::State::ready) return drop(reader.problem());
  const net::Hello& h = reader.hello();
  const auth::Verdict verdict = reader.judge(o.secret, challenge);
  if (verdict.status != auth::VerdictStatus::accepted) {
    const std::string text =
        detail::concat("group '", o.group, "' rank ", o.rank, ": a connection from ", from,
                       " claiming rank ", h.rank, " was ", auth::refusal_text(verdict.status));
    log_info(text);
    note_refusals(*o.store, 1, text);
    net::send_verdict(reader.fd().get(), verdict);  // it may have left already
    return std::nullopt;
  }
  if (h.rank <= o.rank || conns[static_cast<size_t>(h.rank)])
    return drop(detail::concat("a second or unexpected connection from rank ", h.rank));
  if (!net::send_verdict(reader.fd().get(), verdict)) return drop("it left at once");
  fd = std::move(reader.fd());
  return h;
}

void accept_higher(const MeshOptions& o, int listen_fd, const auth::Nonce& challenge,
                   std::vector<std::unique_ptr<Connection>>& conns) {
  int waiting = o.size - 1 - o.rank;
  while (waiting > 0) {
    net::Fd fd;
    try {
      fd = net::accept_tcp(listen_fd, o.deadline);
    } catch (const TimeoutError&) {
      throw TimeoutError(detail::concat("group '", o.group, "' rank ", o.rank,
                                        ": timed out waiting for rank(s) ",
                                        missing_ranks(conns, o.rank + 1),
                                        " to connect. Did they start, and can they reach this "
                                        "host? (set LOCKSTEP_SOCKET_ADDR to the address to use)"));
    }
    std::optional<net::Hello> hello = accept_one(o, challenge, fd, conns);
    if (!hello) continue;
    int rank = hello->rank;
    net::tune_tcp(fd.get(), o.socket_buffer_bytes);
    net::Hello reply = net::make_hello(endpoint(o));
    net::write_full(fd.get(), &reply, sizeof(reply), o.deadline, "rank " + std::to_string(rank));
    net::set_nonblocking(fd.get(), true);
    conns[static_cast<size_t>(rank)] =
        std::make_unique<Connection>(std::move(fd), peer_info(lookup(o, rank), rank, hello->pid));
    --waiting;
  }
}

}  // namespace

std::vector<std::unique_ptr<Connection>> connect_mesh(const MeshOptions& o) {
  std::vector<std::unique_ptr<Connection>> conns(static_cast<size_t>(o.size));
  if (o.size <= 1) return conns;
  net::Fd listener = net::listen_where_advertised(
      advertised(o), 0, detail::concat("group '", o.group, "' rank ", o.rank, " (tcp mesh)"));
  const auth::Nonce challenge = auth::make_nonce();
  o.store->set(net::listener_key(o.group, net::Service::mesh, o.rank),
               net::format_listener_record(advertised(o), net::local_port(listener.get()),
                                           o.hostname, challenge));
  if (o.secret.empty())
    log_info("group '", o.group, "' rank ", o.rank, ": data connections on port ",
             net::local_port(listener.get()),
             " are not authenticated (the job has no secret): "
             "anyone who reaches that port can connect");
  std::vector<Pending> lower;
  for (int r = 0; r < o.rank; ++r) lower.push_back(start_connect(o, r));
  accept_higher(o, listener.get(), challenge, conns);
  for (int r = 0; r < o.rank; ++r)
    conns[static_cast<size_t>(r)] = finish_connect(o, std::move(lower[static_cast<size_t>(r)]), r);
  return conns;
}

}  // namespace lockstep::tcp
