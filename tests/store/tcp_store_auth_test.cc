// The store's authentication (src/net/auth.h, store/protocol.h) with real sockets: clients that
// know the job's secret get in; one without it, or with another, gets an AuthError that says so
// and is refused without harming the job; a raw client that speaks the protocol but forges or
// replays a proof is dropped before any key is read or written. The secret never appears in an
// error.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "lockstep/core/error.h"
#include "lockstep/store/tcp_store.h"
#include "net/auth.h"
#include "store/refusals.h"
#include "store_test_util.h"

namespace lockstep::store_test {
namespace {

constexpr const char* kSecret = "correct horse battery staple";
constexpr const char* kOther = "incorrect mule";

// Nonces and proofs are both 32 bytes.
std::string bytes_of(const auth::Nonce& n) {
  return std::string(n.begin(), n.end());
}

class TcpStoreAuth : public ::testing::Test {
 protected:
  std::unique_ptr<TcpStore> client(const std::string& secret) {
    return std::make_unique<TcpStore>(
        TcpStoreOptions{.port = server_.port(), .timeout = milliseconds(5'000), .secret = secret});
  }
  // The job goes on: a client with the secret still writes and reads.
  void expect_job_unharmed() {
    job_->set("probe", "alive");
    EXPECT_EQ(client(kSecret)->get("probe", milliseconds(5'000)), "alive");
  }
  // Opens a raw connection, sends a hello with `nonce`, and returns the server's nonce.
  auth::Nonce raw_hello(int fd, const auth::Nonce& nonce) {
    raw_send(fd, "LKST" + le(2, 4) + bytes_of(nonce));
    const std::string hello = raw_read(fd, 8 + 4 + 32 + 32);
    EXPECT_EQ(hello.substr(8, 4), le(1, 4)) << "the server must say it needs a secret";
    auth::Nonce theirs;
    std::copy(hello.begin() + 12, hello.begin() + 44, theirs.begin());
    // The server proved it knows the secret, bound to this client's nonce.
    auth::Proof proof;
    std::copy(hello.begin() + 44, hello.end(), proof.begin());
    EXPECT_TRUE(auth::check(kSecret, auth::Role::server, nonce, theirs, proof));
    return theirs;
  }

  TcpStoreServer server_{{.bind_host = "127.0.0.1", .port = 0, .secret = kSecret}};
  std::unique_ptr<TcpStore> job_ = client(kSecret);
};

TEST_F(TcpStoreAuth, ClientsWithTheSecretGetIn) {
  job_->set("k", "v");
  EXPECT_EQ(client(kSecret)->get("k", milliseconds(5'000)), "v");
}

TEST_F(TcpStoreAuth, AClientWithoutTheSecretGetsAnAuthErrorSayingSo) {
  try {
    client("");
    FAIL() << "a client without the secret got in";
  } catch (const AuthError& e) {
    EXPECT_CONTAINS(e.what(), "requires the job's secret, and this process has none");
    EXPECT_CONTAINS(e.what(), "LOCKSTEP_SECRET_FILE");
  }
  expect_job_unharmed();
}

TEST_F(TcpStoreAuth, AClientWithAnotherSecretGetsAnAuthErrorNamingTheFix) {
  try {
    client(kOther);
    FAIL() << "a client with another secret got in";
  } catch (const AuthError& e) {
    EXPECT_CONTAINS(e.what(), "secret differs from the store's");
    EXPECT_CONTAINS(e.what(), "--secret-file");
    EXPECT_NOT_CONTAINS(e.what(), kSecret);
    EXPECT_NOT_CONTAINS(e.what(), kOther);
  }
  expect_job_unharmed();
}

TEST_F(TcpStoreAuth, AClientWithASecretRefusesAServerWithout) {
  TcpStoreServer open{{.bind_host = "127.0.0.1", .port = 0, .secret = ""}};
  try {
    TcpStore c(
        TcpStoreOptions{.port = open.port(), .timeout = milliseconds(5'000), .secret = kSecret});
    FAIL() << "a client trusted a server that could not prove the secret";
  } catch (const AuthError& e) {
    EXPECT_CONTAINS(e.what(), "runs without a secret, but this process has one");
  }
}

// A raw client that speaks the protocol but cannot prove the secret: its forged proof (zeros, as
// a client without a secret sends) and the request behind it get nothing, and no key is written.
TEST_F(TcpStoreAuth, AForgedProofIsDroppedBeforeAnyRequestIsServed) {
  auto fd = raw_connect(server_.port());
  raw_hello(fd.get(), auth::make_nonce());
  const std::string set =
      std::string(1, '\x01') + le(0, 8) + le(2, 4) + le(5, 8) + "stolen" + le(1, 8) + "x";
  raw_send(fd.get(), std::string(32, '\0') + set);
  size_t seen = 0;
  EXPECT_TRUE(closed_by_peer(fd.get(), milliseconds(3'000), &seen));
  EXPECT_EQ(seen, 0u) << "the server answered a client that failed authentication";
  EXPECT_FALSE(job_->check({"stolen"}));
  expect_job_unharmed();
  // Counted in the store for `lockstep doctor`, with the refusing server's line (its address).
  const Refusals refused = read_refusals(*job_);
  EXPECT_EQ(refused.count, 1);
  EXPECT_CONTAINS(refused.last, "dropped connection from 127.0.0.1:");
  EXPECT_CONTAINS(refused.last, "does not know the job's secret");
}

// A proof is bound to both nonces: one made for another connection's server nonce (a replay) is
// refused, while the right one for this connection is accepted.
TEST_F(TcpStoreAuth, AReplayedProofIsRefusedAndAFreshOneAccepted) {
  const auth::Nonce mine = auth::make_nonce();
  auto first = raw_connect(server_.port());
  const auth::Nonce first_server = raw_hello(first.get(), mine);
  const auth::Proof recorded = auth::prove(kSecret, auth::Role::client, first_server, mine);

  auto second = raw_connect(server_.port());
  const auth::Nonce second_server = raw_hello(second.get(), mine);
  ASSERT_NE(first_server, second_server) << "the server reused a nonce";
  raw_send(second.get(), bytes_of(recorded));
  size_t seen = 0;
  EXPECT_TRUE(closed_by_peer(second.get(), milliseconds(3'000), &seen)) << "replay accepted";

  // The genuine proof on the first connection works: a num_keys request is answered.
  raw_send(first.get(), bytes_of(recorded) + std::string(1, '\x08') + le(0, 8) + le(0, 4));
  const std::string reply = raw_read(first.get(), 13);
  EXPECT_EQ(reply[0], '\0') << "status ok";
}

class SecretFromEnvironment : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("LOCKSTEP_SECRET");
    ::unsetenv("LOCKSTEP_SECRET_FILE");
  }
  void TearDown() override { SetUp(); }
  std::filesystem::path file_ =
      std::filesystem::temp_directory_path() / ("lockstep-secret-" + std::to_string(::getpid()));
};

TEST_F(SecretFromEnvironment, NoneSetMeansNoSecret) {
  EXPECT_EQ(job_secret_from_environment(), "");
}

TEST_F(SecretFromEnvironment, TheVariableComesFirstThenTheFileWithoutItsNewline) {
  { std::ofstream(file_) << "from the file\n"; }
  ::setenv("LOCKSTEP_SECRET_FILE", file_.c_str(), 1);
  EXPECT_EQ(job_secret_from_environment(), "from the file");
  ::setenv("LOCKSTEP_SECRET", "from the variable", 1);
  EXPECT_EQ(job_secret_from_environment(), "from the variable");
  std::filesystem::remove(file_);
}

TEST_F(SecretFromEnvironment, AnUnreadableOrEmptyFileIsAConfigErrorNamingIt) {
  ::setenv("LOCKSTEP_SECRET_FILE", file_.c_str(), 1);
  try {
    job_secret_from_environment();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), file_.string());
    EXPECT_CONTAINS(e.what(), "cannot be read");
  }
  { std::ofstream(file_) << "\n"; }
  try {
    job_secret_from_environment();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_CONTAINS(e.what(), "is empty");
  }
  std::filesystem::remove(file_);
}

TEST(JobSecret, MadeSecretsAreLongRandomAndDistinct) {
  const std::string a = auth::make_secret(), b = auth::make_secret();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace lockstep::store_test
