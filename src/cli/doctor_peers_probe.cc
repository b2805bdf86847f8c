// lockstep doctor: the entries nodes publish for each other, and the connection attempts to them.
#include <algorithm>
#include <cerrno>
#include <sstream>
#include <thread>

#include "cli/doctor_peers.h"
#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep::cli::doctor {
namespace {

using detail::concat;

// Connection attempts run this many at a time (each is one thread, bounded by the timeout).
constexpr size_t kParallelProbes = 64;

std::string probe_one(const PeerEntry& peer, std::chrono::milliseconds timeout) {
  if (peer.port <= 0) return "it could not open a listener";
  std::string host = peer.address;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  try {
    net::Fd fd;
    const int error =
        net::connect_tcp_once(host, static_cast<uint16_t>(peer.port), Deadline::after(timeout), fd);
    if (error == 0) return "";
    if (error == ETIMEDOUT)
      return concat("no answer in ", timeout.count() / 1000.0,
                    " s (an address of no host, a host that is down, or a firewall dropping "
                    "packets)");
    return net::errno_text(error);
  } catch (const Error& e) {
    return e.what();  // the advertised name does not resolve here
  }
}

}  // namespace

std::string encode(const PeerEntry& e) {
  return concat(e.address, "\n", e.port, "\n", e.host);
}

PeerEntry decode_entry(int node, const std::string& text) {
  PeerEntry e;
  e.node = node;
  std::istringstream in(text);
  std::string port;
  std::getline(in, e.address);
  std::getline(in, port);
  std::getline(in, e.host);
  e.port = std::atoi(port.c_str());
  return e;
}

std::vector<std::string> probe_peers(const std::vector<PeerEntry>& peers, int self,
                                     std::chrono::milliseconds timeout) {
  std::vector<std::string> result(peers.size());
  for (size_t start = 0; start < peers.size(); start += kParallelProbes) {
    std::vector<std::thread> threads;
    const size_t end = std::min(peers.size(), start + kParallelProbes);
    for (size_t i = start; i < end; ++i) {
      if (peers[i].node == self) continue;
      threads.emplace_back([&, i] { result[i] = probe_one(peers[i], timeout); });
    }
    for (std::thread& t : threads) t.join();
  }
  return result;
}

}  // namespace lockstep::cli::doctor
