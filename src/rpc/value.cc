#include "lockstep/rpc/value.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <sstream>

#include "lockstep/core/error.h"
#include "rpc/message.h"

namespace lockstep::rpc {

namespace {
struct ElementInfo {
  const char* name;
  size_t bytes;
};
constexpr ElementInfo kElements[kElementTypes] = {
    {"float32", 4}, {"float64", 8}, {"float16", 2},   {"bfloat16", 2},
    {"int8", 1},    {"uint8", 1},   {"int16", 2},     {"int32", 4},
    {"int64", 8},   {"bool", 1},    {"complex64", 8}, {"complex128", 16}};
}  // namespace

size_t element_bytes(ElementType type) {
  auto i = static_cast<size_t>(type);
  return i < kElementTypes ? kElements[i].bytes : 0;
}

std::string_view element_name(ElementType type) {
  auto i = static_cast<size_t>(type);
  return i < kElementTypes ? kElements[i].name : "unknown";
}

namespace {

// Large received buffers are kept for the next message of the same size: a fresh 64 MiB buffer
// costs its page faults (about as long as the bytes take to arrive), and a training loop sends
// the same tensors' sizes again and again. Bounded: kKeptBuffers per size, kKeptBytes in all.
class BlobPool {
 public:
  static constexpr size_t kMinPooled = 1 << 20;
  static constexpr size_t kKeptBuffers = 4;
  static constexpr size_t kKeptBytes = size_t{1} << 30;

  void* take(size_t rounded) {
    std::lock_guard lock(mu_);
    auto it = free_.find(rounded);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    kept_ -= rounded;
    return p;
  }
  void give(void* p, size_t rounded) {
    {
      std::lock_guard lock(mu_);
      auto& list = free_[rounded];
      if (list.size() < kKeptBuffers && kept_ + rounded <= kKeptBytes) {
        list.push_back(p);
        kept_ += rounded;
        return;
      }
    }
    std::free(p);
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t kept_ = 0;
};

BlobPool& blob_pool() {
  static auto* pool = new BlobPool();  // outlives every buffer, also at exit
  return *pool;
}

}  // namespace

Blob allocate_blob(size_t nbytes) {
  // 64-byte aligned, so that a tensor made over it is aligned as torch's allocator aligns.
  size_t rounded = (std::max<size_t>(nbytes, 1) + 63) / 64 * 64;
  const bool pooled = rounded >= BlobPool::kMinPooled;
  if (pooled) rounded = (rounded + 4095) / 4096 * 4096;
  void* p = pooled ? blob_pool().take(rounded) : nullptr;
  if (!p) p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  std::shared_ptr<void> owner =
      pooled ? std::shared_ptr<void>(p, [rounded](void* q) { blob_pool().give(q, rounded); })
             : std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return Blob{static_cast<const std::byte*>(p), nbytes, std::move(owner)};
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor Tensor::zeros(ElementType type, std::vector<int64_t> shape) {
  Tensor t{type, std::move(shape), nullptr, 0, nullptr};
  t.nbytes = static_cast<size_t>(t.numel()) * element_bytes(type);
  Blob b = allocate_blob(t.nbytes);
  std::memset(const_cast<std::byte*>(b.data), 0, t.nbytes);
  t.data = b.data;
  t.owner = std::move(b.owner);
  return t;
}

Tensor Tensor::from(const std::vector<float>& values) {
  Tensor t = zeros(ElementType::f32, {static_cast<int64_t>(values.size())});
  if (!values.empty()) std::memcpy(t.mutable_as<float>(), values.data(), t.nbytes);
  return t;
}

Tensor Tensor::from(const std::vector<int64_t>& values) {
  Tensor t = zeros(ElementType::i64, {static_cast<int64_t>(values.size())});
  if (!values.empty()) std::memcpy(t.mutable_as<int64_t>(), values.data(), t.nbytes);
  return t;
}

std::string_view kind_name(Value::Kind kind) {
  static const char* const names[] = {"None",  "bool", "int",   "float", "str",
                                      "bytes", "list", "tuple", "dict",  "tensor"};
  return names[static_cast<size_t>(kind)];
}

namespace {
[[noreturn]] void wrong_kind(Value::Kind want, Value::Kind got) {
  throw InvalidArgument(
      detail::concat("rpc: expected a ", kind_name(want), " value, got a ", kind_name(got)));
}
}  // namespace

#define LOCKSTEP_VALUE_AS(fn, T, kind_)           \
  const T& Value::fn() const {                    \
    if (auto* p = std::get_if<T>(&v_)) return *p; \
    wrong_kind(Kind::kind_, kind());              \
  }
LOCKSTEP_VALUE_AS(as_str, std::string, str)
LOCKSTEP_VALUE_AS(as_bytes, Bytes, bytes)
LOCKSTEP_VALUE_AS(as_list, List, list)
LOCKSTEP_VALUE_AS(as_tuple, Tuple, tuple)
LOCKSTEP_VALUE_AS(as_dict, Dict, dict)
LOCKSTEP_VALUE_AS(as_tensor, Tensor, tensor)
#undef LOCKSTEP_VALUE_AS

bool Value::as_bool() const {
  if (auto* p = std::get_if<bool>(&v_)) return *p;
  wrong_kind(Kind::boolean, kind());
}

int64_t Value::as_int() const {
  if (auto* p = std::get_if<int64_t>(&v_)) return *p;
  wrong_kind(Kind::integer, kind());
}

double Value::as_float() const {
  if (auto* p = std::get_if<double>(&v_)) return *p;
  if (auto* p = std::get_if<int64_t>(&v_)) return static_cast<double>(*p);
  wrong_kind(Kind::real, kind());
}

const Value& Value::at(std::string_view key) const {
  for (const auto& [k, v] : as_dict())
    if (k.kind() == Kind::str && k.as_str() == key) return v;
  throw InvalidArgument(detail::concat("rpc: the dict has no key '", key, "'"));
}

bool operator==(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::none:
      return true;
    case Value::Kind::boolean:
      return a.as_bool() == b.as_bool();
    case Value::Kind::integer:
      return a.as_int() == b.as_int();
    case Value::Kind::real:
      return a.as_float() == b.as_float();
    case Value::Kind::str:
      return a.as_str() == b.as_str();
    case Value::Kind::bytes:
      return a.as_bytes().data == b.as_bytes().data;
    case Value::Kind::list:
      return a.as_list() == b.as_list();
    case Value::Kind::tuple:
      return a.as_tuple().items == b.as_tuple().items;
    case Value::Kind::dict:
      return a.as_dict() == b.as_dict();
    case Value::Kind::tensor: {
      const Tensor &x = a.as_tensor(), &y = b.as_tensor();
      return x.type == y.type && x.shape == y.shape && x.nbytes == y.nbytes &&
             (x.nbytes == 0 || std::memcmp(x.data, y.data, x.nbytes) == 0);
    }
  }
  return false;
}

namespace {
void describe_to(const Value& v, std::ostringstream& out, size_t max_chars) {
  if (static_cast<size_t>(out.tellp()) > max_chars) return;
  auto items = [&](const std::vector<Value>& xs, const char* open, const char* close) {
    out << open;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (i) out << ", ";
      if (static_cast<size_t>(out.tellp()) > max_chars) {
        out << "...";
        break;
      }
      describe_to(xs[i], out, max_chars);
    }
    out << close;
  };
  switch (v.kind()) {
    case Value::Kind::none:
      out << "None";
      break;
    case Value::Kind::boolean:
      out << (v.as_bool() ? "True" : "False");
      break;
    case Value::Kind::integer:
      out << v.as_int();
      break;
    case Value::Kind::real:
      out << v.as_float();
      break;
    case Value::Kind::str:
      out << "'" << v.as_str() << "'";
      break;
    case Value::Kind::bytes:
      out << "bytes(" << v.as_bytes().data.size() << ")";
      break;
    case Value::Kind::list:
      items(v.as_list(), "[", "]");
      break;
    case Value::Kind::tuple:
      items(v.as_tuple().items, "(", ")");
      break;
    case Value::Kind::dict: {
      out << "{";
      bool first = true;
      for (const auto& [k, x] : v.as_dict()) {
        if (!first) out << ", ";
        first = false;
        if (static_cast<size_t>(out.tellp()) > max_chars) {
          out << "...";
          break;
        }
        describe_to(k, out, max_chars);
        out << ": ";
        describe_to(x, out, max_chars);
      }
      out << "}";
      break;
    }
    case Value::Kind::tensor: {
      const Tensor& t = v.as_tensor();
      out << "tensor(" << element_name(t.type) << ", [";
      for (size_t i = 0; i < t.shape.size(); ++i) out << (i ? ", " : "") << t.shape[i];
      out << "])";
      break;
    }
  }
}
}  // namespace

std::string describe(const Value& value, size_t max_chars) {
  std::ostringstream out;
  describe_to(value, out, max_chars);
  std::string s = out.str();
  if (s.size() > max_chars + 3) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace lockstep::rpc
