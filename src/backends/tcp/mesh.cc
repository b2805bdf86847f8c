#include "backends/tcp/mesh.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/log.h"
#include "core/fnv1a.h"
#include "lockstep/core/error.h"
#include "net/bind.h"
#include "net/peer_auth.h"
#include "store/refusals.h"

namespace lockstep::tcp {

namespace {

constexpr uint32_t kHelloMagic = 0x4C4B5348;  // "LKSH"
constexpr uint32_t kHelloVersion = 2;  // 2: flags, then a proof and a verdict (peer_auth.h)
constexpr uint32_t kHasSecret = 1;      // Hello::flags: a ConnectProof follows the hello
// How long an accepted connection may take to say hello before it is dropped.
constexpr milliseconds kHelloGrace{2000};

struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t version = kHelloVersion;
  uint64_t group_hash = 0;
  int32_t size = 0;
  int32_t rank = 0;
  int32_t pid = 0;
  uint32_t flags = 0;
};
static_assert(sizeof(Hello) == 32, "Hello is a wire format");

Hello my_hello(const MeshOptions& o) {
  Hello h;
  h.group_hash = fnv1a(o.group);
  h.size = o.size;
  h.rank = o.rank;
  h.pid = static_cast<int32_t>(::getpid());
  h.flags = o.secret.empty() ? 0 : kHasSecret;
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
  auth::Nonce challenge{};  // the listener's (peer_auth.h)
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
  // "<host>|<pid>|<challenge>"
  std::string rest = record.substr(bar + 1);
  size_t bar2 = rest.find('|');
  size_t bar3 = bar2 == std::string::npos ? bar2 : rest.find('|', bar2 + 1);
  LOCKSTEP_ENFORCE(bar3 != std::string::npos &&
                       auth::from_hex(std::string_view(rest).substr(bar3 + 1), a.challenge),
                   NetworkError, "rank ", rank, " published a malformed address '", record,
                   "' (another program using the same store keys, or another lockstep version?)");
  a.info.host = rest.substr(0, bar2);
  a.info.pid = std::stoi(rest.substr(bar2 + 1, bar3 - bar2 - 1));
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

std::string advertised(const MeshOptions& o) {
  return o.advertise_address.empty() ? net::hostname() : o.advertise_address;
}

void publish(const MeshOptions& o, uint16_t port, const auth::Nonce& challenge) {
  std::string addr = advertised(o);
  if (addr.find(':') != std::string::npos) addr = "[" + addr + "]";
  o.store->set(mesh_address_key(o.group, o.rank),
               detail::concat(addr, ":", port, "|", o.hostname, "|", ::getpid(), "|",
                              auth::to_hex(challenge)));
}

struct Pending {
  net::Fd fd;
  Address address;
  auth::ConnectProof sent;  // with a secret
};

// Connects to a lower rank and sends our hello; its answer is read later (finish_connect).
Pending start_connect(const MeshOptions& o, int rank) {
  Pending p{.address = lookup(o, rank)};
  p.fd = net::connect_tcp(p.address.host, p.address.port, o.deadline, true);
  net::tune_tcp(p.fd.get(), o.socket_buffer_bytes);
  Hello h = my_hello(o);
  const std::string what = detail::concat("rank ", rank, " at ", p.address.info.address);
  net::write_full(p.fd.get(), &h, sizeof(h), o.deadline, what);
  if (!o.secret.empty()) {
    p.sent = auth::make_connect_proof(o.secret, p.address.challenge);
    net::write_full(p.fd.get(), &p.sent, sizeof(p.sent), o.deadline, what);
  }
  return p;
}

std::unique_ptr<Connection> finish_connect(const MeshOptions& o, Pending p) {
  const PeerInfo& info = p.address.info;
  std::string what = detail::concat("rank ", info.rank, " (", info.address, " on ", info.host, ")");
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
  Hello h;
  net::read_full(p.fd.get(), &h, sizeof(h), o.deadline, what);
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

// Reads one hello (and, with a secret, its proof) from a fresh connection and judges it. On any
// problem logs it, drops the connection and returns nothing (so that junk never breaks setup); a
// connector refused for its secret is told why first (the verdict), so that a rank of this job
// with another secret fails with an AuthError rather than a timeout.
std::optional<Hello> accept_one(const MeshOptions& o, const auth::Nonce& challenge, net::Fd& fd,
                                std::vector<std::unique_ptr<Connection>>& conns) {
  std::string from = net::peer_address(fd.get());
  Hello h;
  auth::ConnectProof proof;
  Deadline grace(std::min(o.deadline.at(), Clock::now() + kHelloGrace));
  try {
    net::read_full(fd.get(), &h, sizeof(h), grace, "connection from " + from);
  } catch (const Error& e) {
    log_info("group '", o.group, "' rank ", o.rank, ": dropped a connection from ", from,
             " that sent no hello: ", e.what());
    return std::nullopt;
  }
  std::string problem = hello_problem(h, o);
  if (!problem.empty()) {
    log_info("group '", o.group, "' rank ", o.rank, ": dropped a connection from ", from, ": ",
             problem);
    return std::nullopt;
  }
  const bool has_secret = (h.flags & kHasSecret) != 0;
  try {
    if (has_secret) net::read_full(fd.get(), &proof, sizeof(proof), grace, "connection from " + from);
  } catch (const Error& e) {
    log_info("group '", o.group, "' rank ", o.rank, ": dropped a connection from ", from,
             " that sent no proof: ", e.what());
    return std::nullopt;
  }
  const auth::Verdict verdict = auth::judge(o.secret, challenge, has_secret, proof);
  if (verdict.status != auth::VerdictStatus::accepted) {
    const std::string text = detail::concat("group '", o.group, "' rank ", o.rank,
                                            ": a connection from ", from, " claiming rank ",
                                            h.rank, " was ", auth::refusal_text(verdict.status));
    log_info(text);
    note_refusals(*o.store, 1, text);
    try {
      net::write_full(fd.get(), &verdict, sizeof(verdict), grace, "connection from " + from);
    } catch (const Error&) {
      // it left already: nothing more to tell it
    }
    return std::nullopt;
  }
  if (h.rank <= o.rank || conns[static_cast<size_t>(h.rank)]) {
    log_info("group '", o.group, "' rank ", o.rank, ": dropped a connection from ", from,
             ": a second or unexpected connection from rank ", h.rank);
    return std::nullopt;
  }
  net::write_full(fd.get(), &verdict, sizeof(verdict), o.deadline, "rank " + std::to_string(h.rank));
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
    std::optional<Hello> hello = accept_one(o, challenge, fd, conns);
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
  net::Fd listener = net::listen_where_advertised(
      advertised(o), 0, detail::concat("group '", o.group, "' rank ", o.rank, " (tcp mesh)"));
  const auth::Nonce challenge = auth::make_nonce();
  publish(o, net::local_port(listener.get()), challenge);
  if (o.secret.empty())
    log_info("group '", o.group, "' rank ", o.rank, ": data connections on port ",
             net::local_port(listener.get()), " are not authenticated (the job has no secret): "
             "anyone who reaches that port can connect");
  std::vector<Pending> lower;
  for (int r = 0; r < o.rank; ++r) lower.push_back(start_connect(o, r));
  accept_higher(o, listener.get(), challenge, conns);
  for (int r = 0; r < o.rank; ++r)
    conns[static_cast<size_t>(r)] = finish_connect(o, std::move(lower[static_cast<size_t>(r)]));
  return conns;
}

}  // namespace lockstep::tcp
