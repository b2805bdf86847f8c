#include "c10d/store_adapter.h"

#include <c10/util/Exception.h>

#include "lockstep/core/error.h"

namespace lockstep::c10d_backend {
namespace {

std::vector<uint8_t> bytes(std::string_view text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string text(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::string key_list(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + k + "'";
  return out;
}

// Runs one c10d call, turning its errors into lockstep's.
template <class Fn>
auto guarded(const char* what, const std::vector<std::string>& keys, Fn&& fn) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    std::string message = e.what_without_backtrace();
    if (message.find("imeout") != std::string::npos ||
        message.find("timed out") != std::string::npos)
      throw TimeoutError(
          detail::concat("torch's store: ", what, " of ", key_list(keys), " timed out: ", message));
    throw NetworkError(
        detail::concat("torch's store: ", what, " of ", key_list(keys), " failed: ", message));
  } catch (const std::runtime_error& e) {
    throw NetworkError(
        detail::concat("torch's store: ", what, " of ", key_list(keys), " failed: ", e.what()));
  }
}

}  // namespace

C10dStore::C10dStore(c10::intrusive_ptr<::c10d::Store> store, std::chrono::milliseconds timeout)
    : store_(std::move(store)) {
  set_timeout(timeout);
}

void C10dStore::set(const std::string& key, std::string_view value) {
  guarded("set", {key}, [&] {
    store_->set(key, bytes(value));
    return 0;
  });
}

std::string C10dStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  return guarded("get", {key}, [&] { return text(store_->get(key)); });
}

int64_t C10dStore::add(const std::string& key, int64_t delta) {
  return guarded("add", {key}, [&] { return store_->add(key, delta); });
}

std::string C10dStore::compare_set(const std::string& key, std::string_view expected,
                                   std::string_view desired) {
  return guarded("compare_set", {key},
                 [&] { return text(store_->compareSet(key, bytes(expected), bytes(desired))); });
}

bool C10dStore::check(const std::vector<std::string>& keys) {
  return guarded("check", keys, [&] { return store_->check(keys); });
}

void C10dStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  // c10d reads a zero timeout as "none": poll once instead.
  std::chrono::milliseconds t = resolve(timeout);
  if (t.count() == 0) {
    if (!check(keys))
      throw TimeoutError("torch's store: wait of " + key_list(keys) + " timed out after 0 ms");
    return;
  }
  guarded("wait", keys, [&] {
    store_->wait(keys, t);
    return 0;
  });
}

bool C10dStore::delete_key(const std::string& key) {
  return guarded("delete", {key}, [&] { return store_->deleteKey(key); });
}

int64_t C10dStore::num_keys() {
  return guarded("getNumKeys", {}, [&] { return store_->getNumKeys(); });
}

std::vector<std::string> C10dStore::multi_get(const std::vector<std::string>& keys,
                                              std::chrono::milliseconds timeout) {
  wait(keys, timeout);
  std::vector<std::string> values;
  for (const auto& key : keys)
    values.push_back(guarded("get", {key}, [&] { return text(store_->get(key)); }));
  return values;
}

void C10dStore::multi_set(const std::vector<std::string>& keys,
                          const std::vector<std::string>& values) {
  LOCKSTEP_ENFORCE(keys.size() == values.size(), InvalidArgument, "multi_set: ", keys.size(),
                   " keys but ", values.size(), " values");
  for (size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
}

}  // namespace lockstep::c10d_backend
