// The error frame's body (src/rpc/error_body.h): its layout, its round trip, the bodies it
// refuses, and the exception a caller raises for it, naming the worker and the call.
#include "rpc/error_body.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "lockstep/rpc/errors.h"
#include "lockstep/rpc/rpc.h"
#include "rpc/codec.h"
#include "rpc/codec_fixtures.h"
#include "support/messages.h"

namespace lockstep::rpc {
namespace {

using lockstep::testing::contains;
using lockstep::testing::message_of;

// ---- The error body ------------------------------------------------------------------------

const WorkerInfo kWorker{.name = "worker1", .id = 1, .host = "vm", .pid = 4711};

TEST(ErrorBody, RoundTripsEveryField) {
  const ErrorBody bodies[] = {
      {ErrorCode::remote_exception, "ValueError", "bad value \xC3\xA9", "Traceback:\n  line 1", {}},
      {ErrorCode::unknown_function, "ad", "has no function 'ad'", "", {"add", "mul", "get_params"}},
      {ErrorCode::unknown_object, "opt.step", "serves no object 'opt'", "", {"add"}},
      {ErrorCode::malformed, "", "it ends 3 bytes short", "", {}},
      {ErrorCode::shutting_down, "", "", "", {}}};
  for (const ErrorBody& b : bodies) {
    ErrorBody back = decode_error(received(encode_error(b)));
    EXPECT_EQ(back.code, b.code);
    EXPECT_EQ(back.type, b.type);
    EXPECT_EQ(back.message, b.message);
    EXPECT_EQ(back.traceback, b.traceback);
    EXPECT_EQ(back.registered, b.registered);
  }
}

TEST(ErrorBody, IsATupleOfCodeTypeMessageTracebackAndNames) {
  // Written from error_body.h's layout, not by encode_error.
  Message m = message(raw({0x08}) + le32(5) + raw({0x03}) + le64(2) + raw({0x05}) + le32(1) + "f" +
                      raw({0x05}) + le32(2) + "no" + raw({0x05}) + le32(0) + raw({0x07}) + le32(1) +
                      raw({0x05}) + le32(1) + "g");
  ErrorBody b = decode_error(m);
  EXPECT_EQ(b.code, ErrorCode::unknown_function);
  EXPECT_EQ(b.type, "f");
  EXPECT_EQ(b.message, "no");
  EXPECT_EQ(b.registered, std::vector<std::string>{"g"});
  EXPECT_EQ(encode_error(b).body, m.body);
}

TEST(ErrorBody, TextThatIsNotUtf8IsReplacedNotSentBroken) {
  ErrorBody b{ErrorCode::remote_exception, "T\xFF", "message \xC3", "", {}};
  ErrorBody back = decode_error(encode_error(b));
  EXPECT_EQ(back.type, "(text that is not UTF-8)");
  EXPECT_EQ(back.message, "(text that is not UTF-8)");
}

TEST(ErrorBodyRejects, BodiesThatAreNotErrorBodies) {
  auto body = [](const Value& v) { return encoded(v); };
  EXPECT_THROW(decode_error(body(Value("oops"))), CodecError);
  EXPECT_THROW(decode_error(body(Value(Tuple{{1, "", "", ""}}))), CodecError);
  EXPECT_TRUE(contains(message_of<CodecError>([&] {
                         decode_error(body(Value(Tuple{{1, "", "", "", List{}, 1}})));
                       }),
                       "a tuple of 5"));
  for (int code : {0, 6, -1})
    EXPECT_TRUE(contains(message_of<CodecError>([&] {
                           decode_error(body(Value(Tuple{{code, "", "", "", List{}}})));
                         }),
                         "unknown error code " + std::to_string(code)));
  EXPECT_THROW(decode_error(body(Value(Tuple{{1, "", "", "", List{1}}}))), CodecError);
  Message trailing = body(Value(Tuple{{1, "", "", "", List{}}}));
  trailing.body += raw({0x00});
  EXPECT_TRUE(contains(message_of<CodecError>([&] { decode_error(trailing); }), "bytes after"));
  Message cut = body(Value(Tuple{{1, "T", "M", "", List{"a"}}}));
  for (size_t n = 0; n < cut.body.size(); ++n) {
    Message c = cut;
    c.body.resize(n);
    EXPECT_THROW(decode_error(c), CodecError) << n;
  }
}

template <class E>
E raised(const ErrorBody& b, const std::string& what = "rpc_sync('worker1', 'add')") {
  std::exception_ptr e = to_exception(b, kWorker, what);
  try {
    std::rethrow_exception(e);
  } catch (const E& err) {
    return err;
  } catch (const std::exception& other) {
    ADD_FAILURE() << "raised " << typeid(other).name() << ": " << other.what();
  }
  throw std::logic_error("unreachable");
}

TEST(ErrorBody, BecomesTheExceptionOfItsCodeNamingTheWorkerAndTheCall) {
  const std::string who = "worker1 (rank 1 on host vm, pid 4711)";
  const std::string call = "rpc_sync('worker1', 'add')";
  {
    auto e = raised<RemoteError>({ErrorCode::remote_exception, "ValueError", "negative", "tb", {}});
    EXPECT_EQ(e.type(), "ValueError");
    EXPECT_EQ(e.message(), "negative");
    EXPECT_EQ(e.traceback(), "tb");
    EXPECT_EQ(e.worker(), "worker1");
    EXPECT_PRED2(contains, e.what(), call + ": it raised ValueError on " + who + ": negative");
    EXPECT_PRED2(contains, e.what(), "worker1's traceback:\ntb");
  }
  {
    auto e = raised<UnknownFunction>(
        {ErrorCode::unknown_function, "ad", "has no function 'ad'", "", {"add", "mul"}});
    EXPECT_EQ(e.function(), "ad");
    EXPECT_EQ(e.registered(), (std::vector<std::string>{"add", "mul"}));
    EXPECT_EQ(e.worker(), "worker1");
    EXPECT_PRED2(contains, e.what(), call + ": " + who + " has no function 'ad'");
    EXPECT_PRED2(contains, e.what(), "it registered 2: add, mul");
  }
  {
    auto e = raised<UnknownFunction>(
        {ErrorCode::unknown_object, "opt.step", "serves no object 'opt'", "", {}});
    EXPECT_EQ(e.function(), "opt.step");
    EXPECT_PRED2(contains, e.what(), who + " serves no object 'opt'");
    EXPECT_PRED2(contains, e.what(), "it registered 0: nothing");
  }
  {
    auto e = raised<CodecError>({ErrorCode::malformed, "", "it ends 3 bytes short", "", {}});
    EXPECT_EQ(e.worker(), "worker1");
    EXPECT_PRED2(contains, e.what(), call + ": " + who + " could not read the call: it ends 3");
  }
  {
    auto e = raised<ShutdownInProgress>({ErrorCode::shutting_down, "", "", "", {}});
    EXPECT_EQ(e.worker(), "worker1");
    EXPECT_PRED2(contains, e.what(), call + ": " + who + " is shutting down");
  }
  // Not a RemoteError for the other codes: the classes are told apart.
  EXPECT_THROW(std::rethrow_exception(to_exception({ErrorCode::shutting_down}, kWorker, call)),
               ShutdownInProgress);
  try {
    std::rethrow_exception(to_exception({ErrorCode::malformed}, kWorker, call));
  } catch (const RemoteError&) {
    ADD_FAILURE() << "a malformed call became a RemoteError";
  } catch (const CodecError&) {
  }
}

TEST(ErrorBody, NameListsAreCapped) {
  EXPECT_EQ(name_list({}), "nothing");
  EXPECT_EQ(name_list({"a", "b"}), "a, b");
  EXPECT_EQ(name_list({"a", "b", "c", "d"}, 2), "a, b and 2 more");
}

}  // namespace
}  // namespace lockstep::rpc
