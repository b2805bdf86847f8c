#include "backends/tcp/mesh.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/log.h"
#include "lockstep/core/error.h"

namespace lockstep::tcp {

namespace {

constexpr uint32_t kHelloMagic = 0x4C4B5348;  // "LKSH"
constexpr uint32_t kHelloVersion = 1;
// How long an accepted connection may take to say hello before it is dropped.
constexpr milliseconds kHelloGrace{2000};

struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t version = kHelloVersion;
  uint64_t group_hash = 0;
  int32_t size = 0;
  int32_t rank = 0;
  int32_t pid = 0;
  int32_t reserved = 0;
};
static_assert(sizeof(Hello) == 32, "Hello is a wire format");

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Hello my_hello(const MeshOptions& o) {
  Hello h;
  h.group_hash = fnv1a(o.group);
  h.size = o.size;
  h.rank = o.rank;
  h.pid = static_cast<int32_t>(::getpid());
  return h;
}

// Why a hello is unacceptable, or "" when it is fine.
std::string hello_problem(const Hello& h, const MeshOptions& o) {
  if (h.magic != kHelloMagic) return "not a lockstep peer (bad magic)";
  if (h.version != kHelloVersion)
    return detail::concat("protocol version ", h.version, " (this is ", kHelloVersion, ")");
  if (h.group_hash != fnv1a(o.group)) return "a peer of another group";
  if (h.size != o.size)
    return detail::concat("a peer with world size ", h.size, " (this group has ", o.size, ")");
  if (h.rank < 0 || h.rank >= o.size) return detail::concat("claims rank ", h.rank);
  return "";
}

struct Address {
  std::string host;
  uint16_t port = 0;
  PeerInfo info;
};

Address parse_record(const std::string& record, int rank) {
  Address a;
  a.info.rank = rank;
  size_t bar = record.find('|');
  std::string hostport = record.substr(0, bar);
  size_t colon = hostport.rfind(':');
  LOCKSTEP_ENFORCE(colon != std::string::npos && bar != std::string::npos, NetworkError, "rank ",
                   rank, " published a malformed address '", record,
                   "' (another program using the same store keys?)");
  a.host = hostport.substr(0, colon);
  if (a.host.size() > 2 && a.host.front() == '[') a.host = a.host.substr(1, a.host.size() - 2);
  a.port = static_cast<uint16_t>(std::stoi(hostport.substr(colon + 1)));
  a.info.address = hostport;
  std::string rest = record.substr(bar + 1);
  size_t bar2 = rest.find('|');
  a.info.host = rest.substr(0, bar2);
  if (bar2 != std::string::npos) a.info.pid = std::stoi(rest.substr(bar2 + 1));
  return a;
}

Address lookup(const MeshOptions& o, int rank) {
  std::string key = mesh_address_key(o.group, rank);
  try {
    return parse_record(o.store->get(key, std::max(o.deadline.remaining(), milliseconds(1))), rank);
  } catch (const TimeoutError& e) {
    throw TimeoutError(detail::concat("group '", o.group, "' rank ", o.rank, ": rank ", rank,
                                      " never published its address (store key '", key,
                                      "'): did every rank start, with the same group? (", e.what(),
                                      ")"));
  }
}

void publish(const MeshOptions& o, uint16_t port) {
  std::string addr = o.advertise_address.empty() ? net::hostname() : o.advertise_address;
  if (addr.find(':') != std::string::npos) addr = "[" + addr + "]";
  o.store->set(mesh_address_key(o.group, o.rank),
               detail::concat(addr, ":", port, "|", o.hostname, "|", ::getpid()));
}

struct Pending {
  net::Fd fd;
  Address address;
};

// Connects to a lower rank and sends our hello; its answer is read later (finish_connect).
Pending start_connect(const MeshOptions& o, int rank) {
  Pending p{.address = lookup(o, rank)};
  p.fd = net::connect_tcp(p.address.host, p.address.port, o.deadline, true);
  net::tune_tcp(p.fd.get(), o.socket_buffer_bytes);
  Hello h = my_hello(o);
  net::write_full(p.fd.get(), &h, sizeof(h), o.deadline,
                  detail::concat("rank ", rank, " at ", p.address.info.address));
  return p;
}

std::unique_ptr<Connection> finish_connect(const MeshOptions& o, Pending p) {
  const PeerInfo& info = p.address.info;
  std::string what = detail::concat("rank ", info.rank, " (", info.address, " on ", info.host, ")");
  Hello h;
  try {
    net::read_full(p.fd.get(), &h, sizeof(h), o.deadline, what);
  } catch (const NetworkError& e) {
    throw NetworkError(detail::concat("group '", o.group, "' rank ", o.rank, ": ", what,
                                      " refused the connection (", e.what(),
                                      "). Do all ranks run the same lockstep version and group?"));
  }
  std::string problem = hello_problem(h, o);
  if (problem.empty() && h.rank != info.rank) problem = detail::concat("answered as rank ", h.rank);
  LOCKSTEP_ENFORCE(problem.empty(), NetworkError, "group '", o.group, "' rank ", o.rank, ": ", what,
                   " is ", problem, ". Is another job using the same store?");
  PeerInfo peer = info;
  peer.pid = h.pid;
  net::set_nonblocking(p.fd.get(), true);
  return std::make_unique<Connection>(std::move(p.fd), peer);
}

std::string missing_ranks(const std::vector<std::unique_ptr<Connection>>& conns, int from) {
  std::string s;
  for (size_t r = static_cast<size_t>(from); r < conns.size(); ++r)
    if (!conns[r]) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// Reads one hello from a fresh connection; on any problem logs it, drops the connection and
// returns nothing (so that junk never breaks setup).
std::optional<Hello> accept_one(const MeshOptions& o, net::Fd& fd,
                                std::vector<std::unique_ptr<Connection>>& conns) {
  std::string from = net::peer_address(fd.get());
  Hello h;
  try {
    Deadline grace(std::min(o.deadline.at(), Clock::now() + kHelloGrace));
    net::read_full(fd.get(), &h, sizeof(h), grace, "connection from " + from);
  } catch (const Error& e) {
    log_warning("group '", o.group, "' rank ", o.rank, ": dropped a connection from ", from,
                " that sent no hello: ", e.what());
    return std::nullopt;
  }
  std::string problem = hello_problem(h, o);
  if (problem.empty() && (h.rank <= o.rank || conns[static_cast<size_t>(h.rank)]))
    problem = detail::concat("a second or unexpected connection from rank ", h.rank);
  if (!problem.empty()) {
    log_warning("group '", o.group, "' rank ", o.rank, ": dropped a connection from ", from, ": ",
                problem);
    return std::nullopt;
  }
  return h;
}

void accept_higher(const MeshOptions& o, int listen_fd,
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
    std::optional<Hello> hello = accept_one(o, fd, conns);
    if (!hello) continue;
    int rank = hello->rank;
    net::tune_tcp(fd.get(), o.socket_buffer_bytes);
    Hello reply = my_hello(o);
    net::write_full(fd.get(), &reply, sizeof(reply), o.deadline, "rank " + std::to_string(rank));
    Address a = lookup(o, rank);
    a.info.pid = hello->pid;
    net::set_nonblocking(fd.get(), true);
    conns[static_cast<size_t>(rank)] = std::make_unique<Connection>(std::move(fd), a.info);
    --waiting;
  }
}

}  // namespace

std::string mesh_address_key(const std::string& group, int rank) {
  return detail::concat(group, "/tcp/addr/", rank);
}

std::vector<std::unique_ptr<Connection>> connect_mesh(const MeshOptions& o) {
  std::vector<std::unique_ptr<Connection>> conns(static_cast<size_t>(o.size));
  if (o.size <= 1) return conns;
  net::Fd listener = net::listen_tcp("", 0);
  publish(o, net::local_port(listener.get()));
  std::vector<Pending> lower;
  for (int r = 0; r < o.rank; ++r) lower.push_back(start_connect(o, r));
  accept_higher(o, listener.get(), conns);
  for (int r = 0; r < o.rank; ++r)
    conns[static_cast<size_t>(r)] = finish_connect(o, std::move(lower[static_cast<size_t>(r)]));
  return conns;
}

}  // namespace lockstep::tcp
