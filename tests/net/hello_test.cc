// The data plane's hello (src/net/hello.h): what a listener accepts and why it drops the rest.
#include "net/hello.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "support/messages.h"

namespace lockstep::testing {
namespace {

const net::Endpoint kListener{
    .service = net::Service::p2p, .group = "g", .size = 4, .rank = 0, .host = "node-a"};

net::Hello from_rank(int rank) {
  net::Endpoint e = kListener;
  e.rank = rank;
  e.host = "node-b";
  e.has_secret = true;
  return net::make_hello(e);
}

TEST(DataHello, APeerOfTheSameGroupAndServiceIsAccepted) {
  const net::Hello h = from_rank(3);
  EXPECT_EQ(net::hello_problem(h, kListener), "");
  EXPECT_EQ(h.pid, ::getpid());
  EXPECT_EQ(net::host_of(h), "node-b");
  EXPECT_EQ(h.flags & net::kHasSecret, net::kHasSecret);
}

TEST(DataHello, EachWayOfNotFittingIsNamed) {
  net::Hello h = from_rank(1);
  h.magic ^= 1;
  EXPECT_TRUE(contains(net::hello_problem(h, kListener), "not a lockstep peer"));
  h = from_rank(1);
  h.version = 2;
  EXPECT_TRUE(contains(net::hello_problem(h, kListener), "protocol version 2 (this is 3)"));
  h = from_rank(1);
  h.service = net::Service::mesh;
  EXPECT_TRUE(contains(net::hello_problem(h, kListener),
                       "another service (tcp mesh, this listener is for the p2p)"));
  h = from_rank(1);
  h.group_hash ^= 1;
  EXPECT_TRUE(contains(net::hello_problem(h, kListener), "another group"));
  h = from_rank(1);
  h.size = 5;
  EXPECT_TRUE(contains(net::hello_problem(h, kListener), "group size 5 (this group has 4)"));
  for (int bad : {-1, 4}) {
    h = from_rank(1);
    h.rank = bad;
    EXPECT_TRUE(contains(net::hello_problem(h, kListener), "claims rank " + std::to_string(bad)));
  }
}

TEST(DataHello, ALongHostNameIsCutNotOverrun) {
  net::Endpoint e = kListener;
  e.host = std::string(200, 'h');
  const net::Hello h = net::make_hello(e);
  EXPECT_EQ(net::host_of(h), std::string(sizeof(h.host) - 1, 'h'));
}

}  // namespace
}  // namespace lockstep::testing
