// PrefixStore: forwards every call to the base store with "<prefix>/" in front of each key.
#include "lockstep/store/prefix_store.h"

#include "lockstep/core/error.h"

namespace lockstep {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {
  LOCKSTEP_ENFORCE(base_ != nullptr, InvalidArgument, "PrefixStore(\"", prefix_,
                   "\") needs a base store, got nullptr");
  set_timeout(base_->timeout());
}

std::vector<std::string> PrefixStore::full(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(full(k));
  return out;
}

void PrefixStore::set(const std::string& key, std::string_view value) {
  base_->set(full(key), value);
}

std::string PrefixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return base_->get(full(key), resolve(timeout));
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return base_->add(full(key), delta);
}

std::string PrefixStore::compare_set(const std::string& key, std::string_view expected,
                                     std::string_view desired) {
  return base_->compare_set(full(key), expected, desired);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  return base_->check(full(keys));
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  base_->wait(full(keys), resolve(timeout));
}

bool PrefixStore::delete_key(const std::string& key) {
  return base_->delete_key(full(key));
}

int64_t PrefixStore::num_keys() {
  return base_->num_keys();
}

std::vector<std::string> PrefixStore::multi_get(const std::vector<std::string>& keys,
                                                std::chrono::milliseconds timeout) {
  return base_->multi_get(full(keys), resolve(timeout));
}

void PrefixStore::multi_set(const std::vector<std::string>& keys,
                            const std::vector<std::string>& values) {
  base_->multi_set(full(keys), values);
}

}  // namespace lockstep
