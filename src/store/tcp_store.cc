// TcpStore: each call is one request and one reply on the client's connection, under a mutex.
// Blocking calls send their timeout along; the server answers "timed out" at that deadline, and
// the client waits a little longer than that (kReplyGrace) before giving up on the connection.
#include "lockstep/store/tcp_store.h"

#include <mutex>

#include "lockstep/core/error.h"
#include "net/auth.h"
#include "net/bind.h"
#include "store/client_connection.h"
#include "store/protocol.h"
#include "store/reply_check.h"
#include "store/store_semantics.h"

namespace lockstep {

using store_proto::Command;
using store_proto::kMaxKeyBytes;
using store_proto::kMaxValueBytes;
using store_proto::Message;
namespace sd = store_detail;

namespace {

// How much longer than a blocking call's timeout the client waits for the server's answer.
constexpr milliseconds kReplyGrace{5'000};

void check_key(const std::string& key) {
  LOCKSTEP_ENFORCE(key.size() <= kMaxKeyBytes, InvalidArgument, "TcpStore key of ", key.size(),
                   " bytes (starting '", key.substr(0, 40), "') exceeds the limit of ",
                   kMaxKeyBytes, " bytes");
}

void check_value(const std::string& key, size_t size) {
  LOCKSTEP_ENFORCE(size <= kMaxValueBytes, InvalidArgument, "TcpStore value of ", size,
                   " bytes for key '", key.substr(0, 40), "' exceeds the limit of ", kMaxValueBytes,
                   " bytes; split it over several keys");
}

void check_keys(const std::vector<std::string>& keys) {
  LOCKSTEP_ENFORCE(keys.size() <= store_proto::kMaxKeysPerRequest, InvalidArgument,
                   "TcpStore request with ", keys.size(), " keys exceeds the limit of ",
                   store_proto::kMaxKeysPerRequest, " keys per call; split it");
  for (const auto& k : keys) check_key(k);
}

Message request(Command c, int64_t number, std::vector<std::string> strings) {
  return Message{.code = static_cast<uint8_t>(c), .number = number, .strings = std::move(strings)};
}

}  // namespace

struct TcpStore::Impl {
  std::unique_ptr<TcpStoreServer> server;  // destroyed after the connection
  uint16_t port = 0;
  std::mutex mu;
  std::unique_ptr<sd::ClientConnection> conn;

  // One request/reply; turns "timed out" and "error" replies into exceptions, and checks that
  // the reply carries `strings` strings.
  Message call(const char* op, const Message& req, milliseconds timeout, size_t strings);
};

Message TcpStore::Impl::call(const char* op, const Message& req, milliseconds timeout,
                             size_t strings) {
  Message reply;
  {
    std::lock_guard<std::mutex> lock(mu);
    reply = conn->call(op, req, Deadline::after(timeout));
  }
  return sd::checked_reply(op, std::move(reply), strings, conn->where());
}

TcpStore::TcpStore(const TcpStoreOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->port = options.port;
  if (options.is_server) {
    impl_->server = std::make_unique<TcpStoreServer>(
        TcpStoreServerOptions{.bind_host = net::bind_address_for(options.host, "store server"),
                              .port = options.port,
                              .secret = options.secret});
    impl_->port = impl_->server->port();
  }
  set_timeout(options.timeout);
  impl_->conn = std::make_unique<sd::ClientConnection>(
      options.host, impl_->port, Deadline::after(options.timeout), options.secret);
}

TcpStore::~TcpStore() = default;

uint16_t TcpStore::port() const {
  return impl_->port;
}

std::string TcpStore::local_address() const {
  return impl_->conn->local_address();
}

void TcpStore::set(const std::string& key, std::string_view value) {
  check_key(key);
  check_value(key, value.size());
  impl_->call("set", request(Command::set, 0, {key, std::string(value)}), timeout(), 0);
}

std::string TcpStore::get(const std::string& key, milliseconds timeout) {
  check_key(key);
  timeout = resolve(timeout);
  auto reply =
      impl_->call("get", request(Command::get, timeout.count(), {key}), timeout + kReplyGrace, 1);
  return std::move(reply.strings[0]);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  return impl_->call("add", request(Command::add, delta, {key}), timeout(), 0).number;
}

std::string TcpStore::compare_set(const std::string& key, std::string_view expected,
                                  std::string_view desired) {
  check_key(key);
  check_value(key, expected.size());
  check_value(key, desired.size());
  auto req = request(Command::compare_set, 0, {key, std::string(expected), std::string(desired)});
  return std::move(impl_->call("compare_set", req, timeout(), 1).strings[0]);
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  check_keys(keys);
  return impl_->call("check", request(Command::check, 0, keys), timeout(), 0).number != 0;
}

void TcpStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  check_keys(keys);
  timeout = resolve(timeout);
  impl_->call("wait", request(Command::wait, timeout.count(), keys), timeout + kReplyGrace, 0);
}

bool TcpStore::delete_key(const std::string& key) {
  check_key(key);
  return impl_->call("delete_key", request(Command::delete_key, 0, {key}), timeout(), 0).number !=
         0;
}

int64_t TcpStore::num_keys() {
  return impl_->call("num_keys", request(Command::num_keys, 0, {}), timeout(), 0).number;
}

std::vector<std::string> TcpStore::multi_get(const std::vector<std::string>& keys,
                                             milliseconds timeout) {
  check_keys(keys);
  timeout = resolve(timeout);
  auto req = request(Command::multi_get, timeout.count(), keys);
  return impl_->call("multi_get", req, timeout + kReplyGrace, keys.size()).strings;
}

void TcpStore::multi_set(const std::vector<std::string>& keys,
                         const std::vector<std::string>& values) {
  sd::check_multi_set_sizes(keys.size(), values.size(), "TcpStore");
  check_keys(keys);
  std::vector<std::string> strings;
  strings.reserve(2 * keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    check_value(keys[i], values[i].size());
    strings.push_back(keys[i]);
    strings.push_back(values[i]);
  }
  impl_->call("multi_set", request(Command::multi_set, 0, std::move(strings)), timeout(), 0);
}

}  // namespace lockstep

namespace lockstep {

std::string job_secret_from_environment() {
  return auth::secret_from_environment();
}

}  // namespace lockstep
