// Hello: the first bytes of every data-plane connection between two ranks of a group (today the
// tcp mesh's, src/backends/tcp/mesh.h, which carries the p2p stream too): one wire format and one
// check of it, with the service it is for.
//
// The connector sends it first: magic, version, which service the connection is for, flags
// (kHasSecret: a ConnectProof follows, src/net/peer_auth.h), the group name's hash, the group's
// size, its rank and pid, and its host name. The listener reads nothing of what follows before
// the hello (and proof) check out; a connection whose hello is anything else (a port scanner,
// another group or service, a stale process) is dropped with an INFO log naming its address.
//
// Byte order: host order; every rank of a job runs on little-endian machines.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep::net {

// What a data connection carries.
enum class Service : uint32_t {
  mesh = 1,  // the tcp/hier collective mesh (framed by src/algorithms/message_header.h)
  p2p = 2,   // retired: the p2p stream rides the mesh; kept so that such a hello is named
  rpc = 3,   // lockstep::rpc (src/rpc/handshake.h)
};
// "tcp mesh", "p2p", "rpc".
const char* service_name(Service service);

inline constexpr uint32_t kHelloMagic = 0x484E4B4C;  // "LKNH"
inline constexpr uint32_t kHelloVersion = 3;         // 3: one hello for every service
inline constexpr uint32_t kHasSecret = 1;            // Hello::flags

struct Hello {
  uint32_t magic = kHelloMagic;
  uint32_t version = kHelloVersion;
  Service service = Service::mesh;
  uint32_t flags = 0;
  uint64_t group_hash = 0;
  int32_t size = 0;
  int32_t rank = 0;
  int32_t pid = 0;
  uint32_t reserved = 0;
  char host[64] = {};
};
static_assert(sizeof(Hello) == 104, "Hello is a wire format");

// Who says hello, and what a listener expects of the hellos it reads.
struct Endpoint {
  Service service = Service::mesh;
  std::string group;  // hashed into the hello
  int size = 1;
  int rank = 0;
  std::string host;  // this rank's host name, sent for peers' messages
  bool has_secret = false;
};

// This endpoint's hello (its pid is this process's).
Hello make_hello(const Endpoint& me);
// Why a hello received by `me` is unacceptable ("" when it is fine): not a lockstep peer, another
// protocol version, another service or group, another group size, or a rank out of range.
std::string hello_problem(const Hello& h, const Endpoint& me);
// The hello's host name.
std::string host_of(const Hello& h);

}  // namespace lockstep::net
