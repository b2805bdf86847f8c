// The decisions of lockstep doctor's multi-node checks (src/cli/doctor_verdicts.h), fed what the
// resolver and the clocks return: the job's node count, a host name's loopback address with one
// node and with several, and a peer's clock skew corrected for the store round trip.
#include "cli/doctor_verdicts.h"

#include <gtest/gtest.h>
#include <netdb.h>
#include <sys/socket.h>

#include <string>

namespace lockstep::cli::doctor {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What getaddrinfo returns for `name`, as text (the resolver's real answer).
std::string first_address(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &list) != 0 || !list) return "";
  char host[NI_MAXHOST] = {};
  ::getnameinfo(list->ai_addr, list->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
  ::freeaddrinfo(list);
  return host;
}

TEST(DoctorVerdicts, NodeShape) {
  // lockstep run / torchrun: GROUP_WORLD_SIZE and GROUP_RANK win.
  NodeShape s = node_shape(3, 2, 6, 5, 2);
  EXPECT_EQ(s.nodes, 3);
  EXPECT_EQ(s.node_rank, 2);
  // Hand-set variables: WORLD_SIZE / LOCAL_WORLD_SIZE ranks per node.
  s = node_shape(-1, -1, 8, 5, 4);
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.node_rank, 1);
  s = node_shape(-1, -1, 2, 1, 2);
  EXPECT_EQ(s.nodes, 1);
  EXPECT_EQ(s.node_rank, 0);
  // Without LOCAL_WORLD_SIZE, one rank per node (init_process_group's assumption).
  s = node_shape(-1, -1, 4, 3, -1);
  EXPECT_EQ(s.nodes, 4);
  EXPECT_EQ(s.node_rank, 3);
}

TEST(DoctorVerdicts, LoopbackAddresses) {
  for (const char* a :
       {"127.0.0.1", "127.0.1.1", "127.255.0.9", "::1", "[::1]", "::ffff:127.0.1.1"})
    EXPECT_TRUE(is_loopback(a)) << a;
  for (const char* a : {"10.231.0.1", "192.0.2.1", "128.0.0.1", "::ffff:10.0.0.1", "fe80::1", "vm",
                        "", "127.0.0.1.example"})
    EXPECT_FALSE(is_loopback(a)) << a;
  EXPECT_TRUE(names_this_machine_only("localhost"));
  EXPECT_TRUE(names_this_machine_only("127.0.0.1"));
  EXPECT_FALSE(names_this_machine_only("10.231.0.1"));
  EXPECT_FALSE(names_this_machine_only("node0"));
}

// Debian maps the host name to 127.0.1.1: fine for one node, the classic "connection refused"
// with several, unless the master is loopback too (all nodes on this machine).
TEST(DoctorVerdicts, HostNameOnLoopback) {
  Verdict one = hostname_verdict("vm", "127.0.1.1", 1, false);
  EXPECT_EQ(one.status, Status::ok);
  EXPECT_TRUE(contains(one.text, "'vm' resolves to 127.0.1.1")) << one.text;
  EXPECT_TRUE(contains(one.text, "fine for a job on one node")) << one.text;

  Verdict several = hostname_verdict("vm", "127.0.1.1", 3, false);
  EXPECT_EQ(several.status, Status::problem);
  EXPECT_TRUE(contains(several.text,
                       "'vm' resolves to 127.0.1.1, a loopback address, in a "
                       "3-node job"))
      << several.text;
  EXPECT_TRUE(contains(several.text, "connection refused")) << several.text;
  EXPECT_TRUE(contains(several.fix, "/etc/hosts")) << several.fix;
  EXPECT_TRUE(contains(several.fix, "LOCKSTEP_SOCKET_ADDR=")) << several.fix;
  EXPECT_TRUE(contains(several.fix, "--master-addr")) << several.fix;

  Verdict same_machine = hostname_verdict("vm", "127.0.1.1", 2, true);
  EXPECT_EQ(same_machine.status, Status::ok);
  EXPECT_TRUE(contains(same_machine.text, "all 2 nodes run on this machine")) << same_machine.text;

  Verdict routable = hostname_verdict("node3", "10.231.0.4", 3, false);
  EXPECT_EQ(routable.status, Status::ok);
  EXPECT_EQ(routable.text, "'node3' resolves to 10.231.0.4");
}

// The resolver's own answer for a loopback name, fed to the decision.
TEST(DoctorVerdicts, ResolvedLoopbackNameWithSeveralNodes) {
  const std::string address = first_address("localhost");
  ASSERT_FALSE(address.empty()) << "localhost does not resolve here";
  EXPECT_TRUE(is_loopback(address)) << address;
  EXPECT_EQ(hostname_verdict("localhost", address, 2, false).status, Status::problem);
  EXPECT_EQ(hostname_verdict("localhost", address, 1, false).status, Status::ok);
}

TEST(DoctorVerdicts, SkewIsTheReadingMinusTheRoundTripsMidpoint) {
  // A 4 s round trip; the peer read its clock at our 1002 s: no skew, though the reading is 2 s
  // behind the reply's arrival and 2 s ahead of the request.
  Skew s = clock_skew(1000 * kSecond, 1002 * kSecond, 1004 * kSecond);
  EXPECT_DOUBLE_EQ(s.seconds, 0.0);
  EXPECT_DOUBLE_EQ(s.uncertainty, 2.0);
  // A fast round trip (2 ms), the peer 2.5 s ahead / 1.5 s behind.
  s = clock_skew(1000 * kSecond, 1002 * kSecond + 501'000'000, 1000 * kSecond + 2'000'000);
  EXPECT_NEAR(s.seconds, 2.5, 1e-9);
  EXPECT_NEAR(s.uncertainty, 0.001, 1e-12);
  s = clock_skew(1000 * kSecond, 998 * kSecond + 501'000'000, 1000 * kSecond + 2'000'000);
  EXPECT_NEAR(s.seconds, -1.5, 1e-9);
}

TEST(DoctorVerdicts, SkewVerdicts) {
  Verdict ok = skew_verdict("node 1 (h1)", clock_skew(0, 300'000'000, 2'000'000), 1.0);
  EXPECT_EQ(ok.status, Status::ok);
  EXPECT_EQ(ok.text, "node 1 (h1)'s clock is +0.299 s from node 0's (store round trip 2.0 ms)");

  Verdict ahead = skew_verdict("node 2 (h2)", clock_skew(0, 2'501'000'000, 2'000'000), 1.0);
  EXPECT_EQ(ahead.status, Status::problem);
  EXPECT_TRUE(contains(ahead.text, "node 2 (h2)'s clock is +2.500 s from node 0's")) << ahead.text;
  EXPECT_TRUE(contains(ahead.fix, "chrony")) << ahead.fix;

  // A skew that rounds to zero has no sign.
  EXPECT_EQ(seconds_text(-0.0001), "+0.000 s");
  EXPECT_EQ(seconds_text(-0.0006), "-0.001 s");

  Verdict behind = skew_verdict("node 2 (h2)", clock_skew(0, -3 * kSecond, 0), 1.0);
  EXPECT_EQ(behind.status, Status::problem);
  EXPECT_TRUE(contains(behind.text, "-3.000 s")) << behind.text;

  // 1.2 s apart, but the round trip took 1 s: it may be 0.7 s, so only a note.
  Verdict unsure = skew_verdict("node 1", clock_skew(0, 1'700'000'000, kSecond), 1.0);
  EXPECT_EQ(unsure.status, Status::note);
  EXPECT_TRUE(contains(unsure.text, "too slow to tell")) << unsure.text;
}

}  // namespace
}  // namespace lockstep::cli::doctor
