#include "launcher/free_port.h"

#include <fstream>
#include <random>

#include "lockstep/core/error.h"
#include "net/socket.h"

namespace lockstep::launcher {
namespace {

// The kernel's ephemeral range starts here: ports bound to 0 and outgoing connections get ports
// from [this, its end).
int ephemeral_low() {
  int low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> low;
  return low;
}

}  // namespace

// A port that is free on this host now, for the script's own store (torch binds every
// interface, so the check does too). Rank 0 binds it only seconds later, once the interpreter and
// torch are loaded, so it is taken from below the ephemeral range: no socket bound to port 0 (a
// lockstep store or listener of another job) and no outgoing connection can take it meanwhile.
// A program that binds that very port explicitly still can, as under torchrun; rank 0 then fails
// with "address already in use" and the attempt can restart.
int pick_free_port() {
  constexpr int kLowest = 10000;
  int low = ephemeral_low();
  if (low > kLowest + 100) {
    std::mt19937 generator{std::random_device{}()};
    std::uniform_int_distribution<int> pick(kLowest, low - 1);
    for (int tries = 0; tries < 64; ++tries) {
      int port = pick(generator);
      try {
        net::Fd probe = net::listen_tcp("0.0.0.0", static_cast<uint16_t>(port), 1);
        return port;
      } catch (const NetworkError&) {
        // In use: try another.
      }
    }
  }
  net::Fd probe = net::listen_tcp("0.0.0.0", 0, 1);
  return net::local_port(probe.get());
}

}  // namespace lockstep::launcher
