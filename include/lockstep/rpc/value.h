// What an RPC carries: Value, a typed tree of None, bool, int, float, str, bytes, list, tuple,
// dict and tensors, the same set in C++ and in Python (lockstep.rpc). Nothing else crosses the
// wire: no pickle, no code, no object that is not data (docs/rpc.md, "The codec").
//
// A Tensor is a dense, row-major block of one element type. It travels as raw bytes beside the
// message, never copied into it: sending holds `owner` until the bytes are out, and a received
// tensor's bytes are a buffer of their own that the Value shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace lockstep::rpc {

// Element types of a Tensor (torch's names in docs/rpc.md's table).
enum class ElementType : uint8_t {
  f32 = 0,
  f64,
  f16,
  bf16,
  i8,
  u8,
  i16,
  i32,
  i64,
  boolean,
  c64,
  c128
};
inline constexpr int kElementTypes = 12;
size_t element_bytes(ElementType type);
// "float32", "int64", "bool", ...
std::string_view element_name(ElementType type);

struct Tensor {
  ElementType type = ElementType::f32;
  std::vector<int64_t> shape;
  // The bytes (shape's product × element_bytes), kept alive by owner.
  const std::byte* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<const void> owner;

  int64_t numel() const;
  // A tensor of its own zeroed bytes.
  static Tensor zeros(ElementType type, std::vector<int64_t> shape);
  // A copy of `values` (float32 or int64 element type, 1-d).
  static Tensor from(const std::vector<float>& values);
  static Tensor from(const std::vector<int64_t>& values);
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(data);
  }
  template <class T>
  T* mutable_as() const {  // for tensors this process made (zeros, from)
    return reinterpret_cast<T*>(const_cast<std::byte*>(data));
  }
};

class Value;
using List = std::vector<Value>;
struct Tuple {
  std::vector<Value> items;
};
// A dict: keys in insertion order, as Python's.
using Dict = std::vector<std::pair<Value, Value>>;
struct Bytes {
  std::string data;
};

class Value {
 public:
  enum class Kind : uint8_t { none, boolean, integer, real, str, bytes, list, tuple, dict, tensor };

  Value() = default;  // None
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(Bytes b) : v_(std::move(b)) {}
  Value(List l) : v_(std::move(l)) {}
  Value(Tuple t) : v_(std::move(t)) {}
  Value(Dict d) : v_(std::move(d)) {}
  Value(Tensor t) : v_(std::move(t)) {}

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_none() const { return kind() == Kind::none; }

  // The held alternative; InvalidArgument naming both kinds when it is another.
  bool as_bool() const;
  int64_t as_int() const;
  double as_float() const;  // also of an int
  const std::string& as_str() const;
  const Bytes& as_bytes() const;
  const List& as_list() const;
  const Tuple& as_tuple() const;
  const Dict& as_dict() const;
  const Tensor& as_tensor() const;
  // The dict's value at a str key; InvalidArgument when there is none.
  const Value& at(std::string_view key) const;

  // Structural equality (tensors: type, shape and bytes).
  friend bool operator==(const Value& a, const Value& b);

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, Bytes, List, Tuple, Dict, Tensor>
      v_;
};

// "None", "int", "list", ...
std::string_view kind_name(Value::Kind kind);
// A short text of the value, for messages ("[1, 2.5, 'a']", "tensor(float32, [2, 3])").
std::string describe(const Value& value, size_t max_chars = 200);

}  // namespace lockstep::rpc
