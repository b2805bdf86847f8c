// The TcpStore server against clients that misbehave: wrong handshakes, garbage, requests cut off
// by a disconnect, and length fields far beyond the limits. Each such connection is dropped, and
// the server keeps serving everyone else. Raw requests are encoded by hand here, independently of
// the implementation, so these tests also pin the wire format.
#include <fstream>
#include <thread>

#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "store/protocol.h"
#include "store_test_util.h"

namespace lockstep::store_test {
namespace {

std::string handshake() {
  return "LKST" + le(2, 4);
}
// The client's hello: the handshake and its nonce; then its proof (zeros: the server here has no
// secret, and ignores it).
std::string client_hello() {
  return handshake() + std::string(32, '\x5a');
}
std::string no_proof() {
  return std::string(32, '\0');
}
// Request header: command code, number (timeout or delta), string count.
std::string header(uint8_t command, int64_t number, uint32_t count) {
  return std::string(1, static_cast<char>(command)) + le(static_cast<uint64_t>(number), 8) +
         le(count, 4);
}
std::string str(std::string_view s) {
  return le(s.size(), 8) + std::string(s);
}

constexpr uint8_t kSet = 1, kGet = 2, kMultiGet = 9;

long vm_size_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7));
  return -1;
}

class TcpStoreRobustness : public ::testing::Test {
 protected:
  std::unique_ptr<TcpStore> client() {
    return std::make_unique<TcpStore>(
        TcpStoreOptions{.port = server_.port(), .timeout = milliseconds(10'000)});
  }
  net::Fd handshaken_raw() {
    auto fd = raw_connect(server_.port());
    raw_send(fd.get(), client_hello());
    // The server's hello: the handshake, flags (0: no secret), its nonce and its (empty) proof.
    const std::string hello = raw_read(fd.get(), 8 + 4 + 32 + 32);
    EXPECT_EQ(hello.substr(0, 8), handshake());
    EXPECT_EQ(hello.substr(8, 4), le(0, 4));
    EXPECT_EQ(hello.substr(8 + 4 + 32), no_proof());
    raw_send(fd.get(), no_proof());
    return fd;
  }
  // The server still answers an existing client and a new one.
  void expect_serving() {
    old_->set("probe", "alive");
    EXPECT_EQ(client()->get("probe", milliseconds(5000)), "alive");
  }
  void expect_dropped(int fd) {
    size_t seen = 0;
    EXPECT_TRUE(closed_by_peer(fd, milliseconds(3000), &seen)) << "server kept the connection";
    EXPECT_EQ(seen, 0u) << "server answered a bad request";
  }

  TcpStoreServer server_{{.bind_host = "127.0.0.1", .port = 0}};
  std::unique_ptr<TcpStore> old_ = client();
};

TEST_F(TcpStoreRobustness, HandshakeAndRequestFollowTheDocumentedWireFormat) {
  auto fd = handshaken_raw();
  raw_send(fd.get(), header(kSet, 0, 2) + str("wire") + str("format"));
  EXPECT_EQ(raw_read(fd.get(), 13), std::string(1, '\0') + le(0, 8) + le(0, 4));  // ok, 0, none
  raw_send(fd.get(), header(kGet, 1000, 1) + str("wire"));
  EXPECT_EQ(raw_read(fd.get(), 13 + 8 + 6),
            std::string(1, '\0') + le(0, 8) + le(1, 4) + str("format"));
  raw_send(fd.get(), header(kGet, 50, 1) + str("never"));
  EXPECT_EQ(raw_read(fd.get(), 13 + 8 + 5),
            std::string(1, '\1') + le(50, 8) + le(1, 4) + str("never"));
  EXPECT_EQ(old_->get("wire", milliseconds(5000)), "format");
}

TEST_F(TcpStoreRobustness, HttpRequestIsDroppedSilently) {
  auto fd = raw_connect(server_.port());
  raw_send(fd.get(), "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
  expect_dropped(fd.get());
  expect_serving();
}

TEST_F(TcpStoreRobustness, BinaryGarbageIsDropped) {
  std::string garbage;
  uint32_t x = 12345;
  for (int i = 0; i < 4096; ++i)
    garbage.push_back(static_cast<char>((x = x * 1103515245 + 12345) >> 16));
  garbage[0] = '\x7f';
  auto fd = raw_connect(server_.port());
  raw_send(fd.get(), garbage);
  expect_dropped(fd.get());
  expect_serving();
}

TEST_F(TcpStoreRobustness, WrongProtocolVersionIsDropped) {
  auto fd = raw_connect(server_.port());
  raw_send(fd.get(), "LKST" + le(99, 4));
  expect_dropped(fd.get());
  expect_serving();
}

// Clients that vanish after part of the handshake, a header, a length or a key, while another
// client is parked on a get: the server drops each and still answers the parked client.
TEST_F(TcpStoreRobustness, ClientsVanishingMidRequestLeaveTheServerServing) {
  auto waiter = client();
  std::string answer;
  std::thread parked([&] { answer = waiter->get("after", milliseconds(10'000)); });
  std::string request =
      client_hello() + no_proof() + header(kSet, 0, 2) + str("key") + str("value");
  for (size_t cut :
       {3, 8 + 5, 40 + 4, 72 + 4, 72 + 13 + 4, 72 + 13 + 8 + 1, 72 + 13 + 11 + 8 + 2}) {
    auto fd = raw_connect(server_.port());
    raw_send(fd.get(), request.substr(0, cut));
    std::this_thread::sleep_for(milliseconds(20));
    fd.reset();
  }
  expect_serving();
  EXPECT_FALSE(old_->check({"key"}));
  client()->set("after", "served");
  parked.join();
  EXPECT_EQ(answer, "served");
}

TEST_F(TcpStoreRobustness, HugeKeyLengthDropsTheConnection) {
  auto fd = handshaken_raw();
  raw_send(fd.get(), header(kSet, 0, 2) + le(uint64_t{1} << 40, 8));
  expect_dropped(fd.get());
  expect_serving();
}

TEST_F(TcpStoreRobustness, ValueLengthOverTheLimitDropsTheConnection) {
  auto fd = handshaken_raw();
  raw_send(fd.get(), header(kSet, 0, 2) + str("k") + le(store_proto::kMaxValueBytes + 1, 8));
  expect_dropped(fd.get());
  auto fd2 = handshaken_raw();
  raw_send(fd2.get(), header(kSet, 0, 2) + le(store_proto::kMaxKeyBytes + 1, 8));
  expect_dropped(fd2.get());
  expect_serving();
}

TEST_F(TcpStoreRobustness, MalformedHeadersDropTheConnection) {
  auto too_many = handshaken_raw();
  raw_send(too_many.get(), header(kMultiGet, 1000, 0xffffffffu));
  expect_dropped(too_many.get());
  auto unknown = handshaken_raw();
  raw_send(unknown.get(), header(200, 0, 0));
  expect_dropped(unknown.get());
  auto wrong_count = handshaken_raw();
  raw_send(wrong_count.get(), header(kGet, 1000, 5));
  expect_dropped(wrong_count.get());
  expect_serving();
}

// A length within the limit but not backed by data must not make the server reserve it.
TEST_F(TcpStoreRobustness, DeclaredValueLengthIsNotAllocatedUpFront) {
  constexpr uint64_t kDeclared = 200ull << 20;
  long before = vm_size_kib();
  auto fd = handshaken_raw();
  raw_send(fd.get(), header(kSet, 0, 2) + str("big") + le(kDeclared, 8) + std::string(1024, 'x'));
  std::this_thread::sleep_for(milliseconds(50));
  expect_serving();  // the server has read the partial request by now
  long after = vm_size_kib();
  EXPECT_LT(after - before, 64 * 1024) << "VmSize grew by " << (after - before) << " KiB";
  fd.reset();
  expect_serving();
  EXPECT_FALSE(old_->check({"big"}));
}

TEST_F(TcpStoreRobustness, ASecondRequestBeforeTheAnswerDropsTheConnection) {
  auto fd = handshaken_raw();
  raw_send(fd.get(), header(kGet, 5000, 1) + str("pending") + header(kGet, 5000, 1) + str("x"));
  expect_dropped(fd.get());
  expect_serving();
}

}  // namespace
}  // namespace lockstep::store_test
