// Where a rank's data-plane listener is (src/net/listener_record.h): what is published, read back
// exactly, and what a malformed record is refused with.
#include "net/listener_record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "lockstep/core/error.h"
#include "support/messages.h"

namespace lockstep::testing {
namespace {

auth::Nonce nonce(uint8_t fill) {
  auth::Nonce n;
  n.fill(fill);
  return n;
}

TEST(ListenerRecord, WhatIsPublishedIsReadBack) {
  const std::string text = net::format_listener_record("10.0.0.7", 4711, "node-b", nonce(0xab));
  const net::ListenerRecord r = net::parse_listener_record(text, 2);
  EXPECT_EQ(r.host, "10.0.0.7");
  EXPECT_EQ(r.port, 4711);
  EXPECT_EQ(r.address, "10.0.0.7:4711");
  EXPECT_EQ(r.hostname, "node-b");
  EXPECT_EQ(r.pid, ::getpid());
  EXPECT_EQ(r.challenge, nonce(0xab));
}

TEST(ListenerRecord, AnIpv6AddressIsBracketedInTheAddressOnly) {
  const net::ListenerRecord r =
      net::parse_listener_record(net::format_listener_record("fe80::1", 80, "h", nonce(1)), 0);
  EXPECT_EQ(r.address, "[fe80::1]:80");
  EXPECT_EQ(r.host, "fe80::1");
  EXPECT_EQ(r.port, 80);
}

TEST(ListenerRecord, KeysAreScopedByGroupServiceAndRank) {
  EXPECT_EQ(net::listener_key("default", net::Service::mesh, 3), "default/net/mesh/3");
  EXPECT_EQ(net::listener_key("default/1", net::Service::p2p, 0), "default/1/net/p2p/0");
}

TEST(ListenerRecord, AMalformedRecordNamesTheRank) {
  const std::string good = net::format_listener_record("h", 1, "n", nonce(2));
  const std::string hex = good.substr(good.rfind('|') + 1);
  const std::vector<std::string> malformed = {"garbage",
                                              "h:1|n|12",
                                              "h:1|n|12|" + hex + "|x",
                                              "h:0|n|12|" + hex,
                                              "h:70000|n|12|" + hex,
                                              ":1|n|12|" + hex,
                                              "h:1|n|pid|" + hex,
                                              "h:1|n|12|zz",
                                              "h|n|12|" + hex};
  for (const std::string& bad : malformed) {
    try {
      net::parse_listener_record(bad, 5);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const NetworkError& e) {
      EXPECT_TRUE(contains(e.what(), "rank 5 published a malformed address '" + bad + "'"))
          << e.what();
    }
  }
}

}  // namespace
}  // namespace lockstep::testing
