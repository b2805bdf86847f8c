// The JSON of flight-recorder dumps and Chrome traces, on nlohmann::json (Debian:
// nlohmann-json3-dev): writing a document, parsing one, and reading its members with errors that
// name the member. Every nlohmann::json::exception becomes an InvalidArgument here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace lockstep::debug::json {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;  // members in insertion order, for the writers

// The document as text ending in '\n'; indent < 0 for one line. Bytes that are not UTF-8 become
// U+FFFD instead of failing the dump.
std::string to_text(const OrderedJson& doc, int indent = -1);

// Parses one JSON document. Throws InvalidArgument with the byte offset of the first error.
Json parse(std::string_view text);

// Members of an object. Each throws InvalidArgument naming `key` when `obj` is not an object, the
// member is missing, or it has another type.
const Json& member(const Json& obj, std::string_view key);
int64_t integer(const Json& obj, std::string_view key);
uint64_t unsigned_integer(const Json& obj, std::string_view key);  // rejects negatives
int int32(const Json& obj, std::string_view key);                  // rejects out-of-range values
const std::string& string(const Json& obj, std::string_view key);
const Json::array_t& array(const Json& obj, std::string_view key);

}  // namespace lockstep::debug::json
