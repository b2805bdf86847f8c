// The JSON of flight-recorder dumps (on nlohmann::json): strings are escaped so that any text
// survives, every field round trips, and a malformed dump is refused with an InvalidArgument that
// names the file and what is wrong (never a crash or a silently wrong dump).
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "debug/flight_recorder_dump.h"
#include "debug/flight_recorder_json.h"
#include "debug/trace_merge.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {
namespace {

Dump sample() {
  OpRecord op{.id = std::numeric_limits<uint64_t>::max(),
              .seq = 7,
              .op = "all_reduce",
              .dtype = "f32",
              .reduce_op = "sum",
              .root = -1,
              .peer = -1,
              .count = 1ull << 40,
              .bytes = 4ull << 40,
              .state = OpState::failed,
              .enqueued_us = 1'700'000'000'000'001,
              .started_us = 1'700'000'000'000'002,
              .ended_us = -1};
  return {.group = "default",
          .rank = 1,
          .size = 2,
          .global_rank = 5,
          .host = "node-1",
          .pid = 4242,
          .backend = "tcp",
          .reason = "timed out",
          .dumped_us = 1'700'000'000'000'003,
          .capacity = 8,
          .recorded = 9,
          .progress = {.entered = 8, .completed = 7},
          .ops = {op}};
}

// The InvalidArgument message of parsing text as a dump from "bad.json"; "" when it parsed.
std::string error_of(const std::string& text) {
  try {
    dump_from_json(text, "bad.json");
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

// The sample dump with one member changed (or removed, when value is discarded) by edit.
template <typename Edit>
std::string edited(Edit edit) {
  json::Json doc = json::Json::parse(dump_to_json(sample()));
  edit(doc);
  return doc.dump();
}

TEST(DumpJson, EveryFieldRoundTripsIncludingExtremeIntegers) {
  Dump d = sample();
  Dump back = dump_from_json(dump_to_json(d), "x.json");
  EXPECT_EQ(back.group, d.group);
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.size, 2);
  EXPECT_EQ(back.global_rank, 5);
  EXPECT_EQ(back.host, d.host);
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.backend, "tcp");
  EXPECT_EQ(back.reason, d.reason);
  EXPECT_EQ(back.dumped_us, d.dumped_us);
  EXPECT_EQ(back.capacity, 8u);
  EXPECT_EQ(back.recorded, 9u);
  EXPECT_EQ(back.progress.entered, 8u);
  EXPECT_EQ(back.progress.completed, 7u);
  ASSERT_EQ(back.ops.size(), 1u);
  const OpRecord& r = back.ops[0];
  EXPECT_EQ(r.id, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(r.seq, 7u);
  EXPECT_EQ(r.op, "all_reduce");
  EXPECT_EQ(r.dtype, "f32");
  EXPECT_EQ(r.reduce_op, "sum");
  EXPECT_EQ(r.root, -1);
  EXPECT_EQ(r.peer, -1);
  EXPECT_EQ(r.count, 1ull << 40);
  EXPECT_EQ(r.bytes, 4ull << 40);
  EXPECT_EQ(r.state, OpState::failed);
  EXPECT_EQ(r.enqueued_us, 1'700'000'000'000'001);
  EXPECT_EQ(r.started_us, 1'700'000'000'000'002);
  EXPECT_EQ(r.ended_us, -1);
}

TEST(DumpJson, FileStartsWithItsFormatAndVersion) {
  std::string text = dump_to_json(sample());
  EXPECT_EQ(text.rfind("{\n \"format\": \"lockstep-flight-recorder\",\n \"version\": 1,", 0), 0u)
      << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(DumpJson, QuotesNewlinesControlsAndUnicodeAreEscapedAndSurvive) {
  Dump d = sample();
  d.reason = "line 1\nsaid \"no\"\tback\\slash \x01 caf\xc3\xa9 \xf0\x9f\x98\x80";
  d.host = "h\"x";
  std::string text = dump_to_json(d);
  EXPECT_NE(text.find(R"("reason": "line 1\nsaid \"no\"\tback\\slash \u0001 caf)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("host": "h\"x")"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x01'), std::string::npos);  // no raw control character in the file
  EXPECT_NE(text.find("caf\xc3\xa9 \xf0\x9f\x98\x80"), std::string::npos);  // UTF-8 kept as is
  Dump back = dump_from_json(text, "x.json");
  EXPECT_EQ(back.reason, d.reason);
  EXPECT_EQ(back.host, d.host);
  // \u escapes (a surrogate pair included) written by another tool decode to UTF-8.
  std::string escaped = edited([](json::Json& j) { j["reason"] = "PLACEHOLDER"; });
  escaped.replace(escaped.find("PLACEHOLDER"), 11, R"(caf\u00e9 \ud83d\ude00 \/)");
  EXPECT_EQ(dump_from_json(escaped, "x.json").reason, "caf\xc3\xa9 \xf0\x9f\x98\x80 /");
}

TEST(DumpJson, BytesThatAreNotUtf8DoNotFailTheDump) {
  Dump d = sample();
  d.reason = "bad \xff byte";
  std::string text;
  ASSERT_NO_THROW(text = dump_to_json(d));
  EXPECT_EQ(dump_from_json(text, "x.json").reason, "bad \xef\xbf\xbd byte");  // U+FFFD
}

TEST(DumpJson, MalformedJsonIsNamedWithItsOffset) {
  std::string good = dump_to_json(sample());
  struct Case {
    std::string text;
    std::string message;
  };
  for (const Case& c :
       {Case{good.substr(0, good.size() / 2), "invalid JSON at byte"},
        Case{"{\"format\": \"lockstep-flight-recorder\",}", "invalid JSON at byte 38"},
        Case{good + "x", "invalid JSON at byte"}, Case{"", "invalid JSON at byte 0"},
        Case{"{\"format\": \"lockstep-flight-recorder\x01\"}", "invalid JSON"},
        Case{std::string(100000, '['), "invalid JSON"}}) {
    std::string error = error_of(c.text);
    EXPECT_EQ(error.rfind("bad.json: ", 0), 0u) << error;
    EXPECT_NE(error.find(c.message), std::string::npos) << c.text.substr(0, 60) << ": " << error;
  }
}

TEST(DumpJson, OtherJsonIsNotADump) {
  for (std::string text : {"[1, 2]", "{\"traceEvents\": []}", "{\"format\": 3}",
                           "{\"format\": \"something-else\"}", "\"lockstep-flight-recorder\""})
    EXPECT_NE(error_of(text).find("bad.json: not a lockstep flight-recorder dump"),
              std::string::npos)
        << text << ": " << error_of(text);
}

TEST(DumpJson, EachMissingFieldIsNamed) {
  for (const char* key :
       {"group", "rank", "size", "global_rank", "host", "pid", "backend", "reason", "dumped_us",
        "capacity", "recorded", "entered", "completed", "ops"}) {
    std::string error = error_of(edited([&](json::Json& j) { j.erase(key); }));
    EXPECT_NE(error.find(std::string("bad.json: JSON: member \"") + key + "\" is missing"),
              std::string::npos)
        << error;
  }
  for (const char* key : {"id", "seq", "op", "dtype", "reduce_op", "root", "peer", "count", "bytes",
                          "state", "enqueued_us", "started_us", "ended_us"}) {
    std::string error = error_of(edited([&](json::Json& j) { j["ops"][0].erase(key); }));
    EXPECT_NE(error.find(std::string("bad.json: ops[0]: JSON: member \"") + key + "\" is missing"),
              std::string::npos)
        << error;
  }
}

TEST(DumpJson, WrongTypesAndValuesAreNamed) {
  struct Case {
    std::string text;
    std::string message;
  };
  for (const Case& c : {
           Case{edited([](json::Json& j) { j["rank"] = "1"; }),
                "member \"rank\" must be an integer, found a string"},
           Case{edited([](json::Json& j) { j["rank"] = 1.5; }),
                "member \"rank\" must be an integer, found a number with a fraction"},
           Case{edited([](json::Json& j) { j["host"] = nullptr; }),
                "member \"host\" must be a string, found null"},
           Case{edited([](json::Json& j) { j["ops"] = json::Json::object(); }),
                "member \"ops\" must be an array, found an object"},
           Case{edited([](json::Json& j) { j["ops"][0]["count"] = -4; }),
                "ops[0]: JSON: member \"count\" must not be negative, found -4"},
           Case{edited([](json::Json& j) { j["pid"] = 1ll << 40; }),
                "member \"pid\" is out of range: 1099511627776"},
           Case{
               edited([](json::Json& j) { j["dumped_us"] = std::numeric_limits<uint64_t>::max(); }),
               "member \"dumped_us\" is too large"},
           Case{edited([](json::Json& j) { j["ops"][0]["state"] = "lost"; }),
                "has state \"lost\"; expected queued, started, completed or failed"},
           Case{edited([](json::Json& j) { j["ops"][0] = 3; }),
                "ops[0]: JSON: expected an object holding \"id\", found an integer"},
           Case{edited([](json::Json& j) { j["rank"] = 2; }), "rank 2 is not in a group of size 2"},
       }) {
    std::string error = error_of(c.text);
    EXPECT_EQ(error.rfind("bad.json: ", 0), 0u) << error;
    EXPECT_NE(error.find(c.message), std::string::npos) << error;
  }
}

// Found by fuzz/flight_recorder_fuzz.cc: a dump whose times were -2^63 and 2^63-1 parsed, and
// `lockstep trace` then subtracted them (signed overflow, undefined behaviour) for the timeline.
TEST(DumpJson, TimesBeyondAnyClockAreRefused) {
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_NE(error_of(edited([&](json::Json& j) {
              j["ops"][0]["started_us"] = huge;
            })).find("member \"started_us\" is not a time in microseconds since 1970"),
            std::string::npos);
  EXPECT_NE(error_of(edited([&](json::Json& j) {
              j["ops"][0]["enqueued_us"] = -huge - 1;
            })).find("\"enqueued_us\" is not a time"),
            std::string::npos);
  EXPECT_NE(error_of(edited([&](json::Json& j) { j["dumped_us"] = huge; })).find("dumped_us"),
            std::string::npos);
  // The extremes that remain can be merged: the trace subtracts them without overflowing.
  const int64_t edge = int64_t{1} << 61;
  Dump d = dump_from_json(edited([&](json::Json& j) {
                            j["ops"][0]["enqueued_us"] = -edge;
                            j["ops"][0]["started_us"] = edge;
                          }),
                          "edge.json");
  EXPECT_NE(chrome_trace({d}, trace_verdict({d})).find("\"queued_us\":4611686018427387904"),
            std::string::npos);
}

// Found with fuzz/flight_recorder_fuzz.cc (a hand-made input; the fuzzer had not reached it): a
// dump claiming a group of 2 billion ranks made the verdict allocate a slot per rank (16 GB).
TEST(DumpJson, AGroupLargerThanAnyJobIsRefused) {
  EXPECT_NE(error_of(edited([](json::Json& j) {
              j["size"] = 2'000'000'000;
            })).find("a group of size 2000000000 is not one a job can have (1 to 1048576 ranks)"),
            std::string::npos);
}

}  // namespace
}  // namespace lockstep::debug
