// A rendezvous that misses ranks names the process its store turned away (src/store/refusals.h,
// [Refused while waiting]), within the grace of 3 s, not at LOCKSTEP_TIMEOUT: a rank started with
// another secret, a rank without one, a client of another protocol. A stray refused connection
// does not fail a job whose ranks all arrive. Real processes over env://.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "lockstep/group/init.h"
#include "support/child_mode.h"
#include "support/subprocess.h"

namespace lockstep::testing {
namespace {

using Env = std::map<std::string, std::optional<std::string>>;
using Clock = std::chrono::steady_clock;

// Child entry: joins via env:// and a barrier, and reports on stdout.
TEST(InitRefusalChild, DISABLED_Main) {
  try {
    auto pg = init_process_group();
    pg->barrier()->wait();
    std::printf("CHILD OK rank %d\n", pg->rank());
  } catch (const std::exception& e) {
    std::printf("CHILD ERROR %s\n", e.what());
    std::fflush(stdout);
    ::_exit(3);
  }
  std::fflush(stdout);
}

// LOCKSTEP_TIMEOUT is 60 s: an error before 15 s came from the refusal, not the timeout.
constexpr auto kTimeout = std::chrono::seconds(60);
constexpr auto kBound = std::chrono::seconds(15);

Env rank_env(int rank, int port, std::optional<std::string> secret) {
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", "2"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"LOCKSTEP_TIMEOUT", std::to_string(kTimeout.count())},
          {"LOCKSTEP_SECRET", std::move(secret)},
          {"LOCKSTEP_SECRET_FILE", std::nullopt},
          {"LOCKSTEP_USE_AGENT_STORE", std::nullopt},
          {"LOCKSTEP_RESTART_COUNT", std::nullopt}};
}

// Sends `bytes` on a connection to the store at `port` once it listens; closes it after.
void send_raw(int port, const std::string& bytes) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(bytes.size()));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::close(fd);
      return;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "the store on port " << port << " never listened";
}

// Rank 0 (the store's host) fails within kBound, naming the refused client and `reason`.
void expect_store_host_names(Child& rank0, Clock::time_point start, const std::string& reason) {
  const auto result = rank0.wait(kTimeout + std::chrono::seconds(30));
  const auto took = Clock::now() - start;
  EXPECT_EQ(result.exit_code, 3) << result.output;
  for (const std::string& part :
       {std::string("ranks [1] of 2 have not joined"), std::string("turned a process away"),
        std::string("dropped connection from 127.0.0.1:"), reason})
    EXPECT_NE(result.output.find(part), std::string::npos) << part << "\n" << result.output;
  EXPECT_LT(took, kBound) << "rank 0 waited for its timeout:\n" << result.output;
}

TEST(InitRefusal, ARankWithAnotherSecretIsNamedByTheStoreHost) {
  const int port = free_port();
  const auto start = Clock::now();
  Child rank0(child_argv("InitRefusalChild.DISABLED_Main"), rank_env(0, port, "secret-a"));
  Child rank1(child_argv("InitRefusalChild.DISABLED_Main"), rank_env(1, port, "secret-b"));
  expect_store_host_names(rank0, start, "does not know this store's secret");
  const auto one = rank1.wait(std::chrono::seconds(30));
  EXPECT_NE(one.output.find("secret differs from the store's"), std::string::npos) << one.output;
}

TEST(InitRefusal, ARankWithoutTheSecretIsNamedByTheStoreHost) {
  const int port = free_port();
  const auto start = Clock::now();
  Child rank0(child_argv("InitRefusalChild.DISABLED_Main"), rank_env(0, port, "secret-a"));
  Child rank1(child_argv("InitRefusalChild.DISABLED_Main"), rank_env(1, port, std::nullopt));
  expect_store_host_names(rank0, start, "does not know this store's secret");
}

TEST(InitRefusal, ARankWithASecretWhereTheStoreHasNoneIsNamed) {
  const int port = free_port();
  const auto start = Clock::now();
  Child rank0(child_argv("InitRefusalChild.DISABLED_Main"), rank_env(0, port, std::nullopt));
  Child rank1(child_argv("InitRefusalChild.DISABLED_Main"), rank_env(1, port, "secret-b"));
  expect_store_host_names(rank0, start, "it has a secret");
}

TEST(InitRefusal, AClientOfAnotherProtocolIsNamed) {
  const int port = free_port();
  const auto start = Clock::now();
  Child rank0(child_argv("InitRefusalChild.DISABLED_Main"), rank_env(0, port, std::nullopt));
  send_raw(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_store_host_names(rank0, start, "not a lockstep store client");
}

// A port scanner refused before every rank arrived: the job still forms.
TEST(InitRefusal, AStrayRefusedConnectionDoesNotFailAJobWhoseRanksArrive) {
  const int port = free_port();
  Child rank0(child_argv("InitRefusalChild.DISABLED_Main"), rank_env(0, port, "secret-a"));
  send_raw(port, "SSH-2.0-scanner\r\n");
  Child rank1(child_argv("InitRefusalChild.DISABLED_Main"), rank_env(1, port, "secret-a"));
  for (Child* c : {&rank0, &rank1}) {
    const auto result = c->wait(std::chrono::seconds(60));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(result.output.find("CHILD OK"), std::string::npos) << result.output;
  }
}

}  // namespace
}  // namespace lockstep::testing
