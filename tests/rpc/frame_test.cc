// The RPC wire's frames (src/rpc/frame.h): the header's exact bytes; FrameReader turning a stream
// of several frames back into identical frames however the stream is cut (all at once, byte by
// byte, in random pieces); write_frame and read_from over a real socket, a 64 MiB blob included;
// how a stream that ends is reported; and every frame the bounds refuse, on both sides.
#include "rpc/frame.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lockstep/rpc/errors.h"
#include "rpc/wire_bytes.h"
#include "support/messages.h"

namespace lockstep::rpc {
namespace {

using lockstep::testing::contains;
using lockstep::testing::message_of;

// Whether b holds exactly pattern_blob(n, seed)'s bytes; the first differing offset otherwise.
::testing::AssertionResult has_pattern(const Blob& b, size_t n, uint32_t seed) {
  if (b.nbytes != n) return ::testing::AssertionFailure() << b.nbytes << " bytes, not " << n;
  const auto* p = reinterpret_cast<const unsigned char*>(b.data);
  for (size_t i = 0; i < n; ++i)
    if (p[i] != pattern_byte(i, seed))
      return ::testing::AssertionFailure() << "byte " << i << " of " << n << " differs";
  return ::testing::AssertionSuccess();
}

struct Sent {
  FrameKind kind;
  uint64_t call_id;
  uint32_t lane;
  Message message;
  std::vector<uint32_t> seeds;  // each blob's pattern
};

Sent sent(FrameKind kind, uint64_t call_id, uint32_t lane, std::string body,
          std::vector<size_t> blob_sizes = {}) {
  Sent s{kind, call_id, lane, {}, {}};
  s.message.body = std::move(body);
  for (size_t n : blob_sizes) {
    s.seeds.push_back(static_cast<uint32_t>(call_id * 100 + s.seeds.size()));
    s.message.blobs.push_back(pattern_blob(n, s.seeds.back()));
  }
  return s;
}

// A frame's bytes as they go out: prefix, body, blobs.
std::string wire(const Sent& s) {
  std::string w = frame_prefix(s.kind, s.call_id, s.lane, s.message) + s.message.body;
  for (const Blob& b : s.message.blobs) w.append(reinterpret_cast<const char*>(b.data), b.nbytes);
  return w;
}

// Requests with blobs of several sizes (none, empty, one byte, more than the reader's 64 KiB
// scratch), replies, an error and a goodbye.
std::vector<Sent> several_frames() {
  std::vector<Sent> v;
  v.push_back(sent(FrameKind::request, 1, 0, "first request"));
  v.push_back(sent(FrameKind::request, 2, 3, "with blobs", {0, 1, 17, 4096, 70000, 0}));
  v.push_back(sent(FrameKind::reply, 1, 0, std::string(1000, 'r')));
  v.push_back(sent(FrameKind::reply, 2, 0, "", {5}));  // an empty body before a blob
  v.push_back(sent(FrameKind::request, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFF, "", {}));
  v.push_back(sent(FrameKind::error, 3, 0, std::string("err\0body", 8)));
  v.push_back(sent(FrameKind::request, 4, 1, std::string(100000, 'x'), {1 << 20}));
  v.push_back(sent(FrameKind::goodbye, 0, 0, ""));
  return v;
}

void expect_same(const std::vector<Sent>& want, const std::vector<Frame>& got) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    const FrameHeader& h = got[i].header;
    const Message& w = want[i].message;
    EXPECT_EQ(h.magic, FrameHeader::kMagic);
    EXPECT_EQ(h.kind, want[i].kind);
    EXPECT_EQ(h.flags, 0);
    EXPECT_EQ(h.call_id, want[i].call_id);
    EXPECT_EQ(h.lane, want[i].lane);
    EXPECT_EQ(h.body_bytes, w.body.size());
    EXPECT_EQ(h.blobs, w.blobs.size());
    EXPECT_EQ(got[i].message.body, w.body);
    ASSERT_EQ(got[i].message.blobs.size(), w.blobs.size());
    uint64_t total = 0;
    for (size_t b = 0; b < w.blobs.size(); ++b) {
      const Blob& blob = got[i].message.blobs[b];
      EXPECT_TRUE(has_pattern(blob, w.blobs[b].nbytes, want[i].seeds[b])) << "blob " << b;
      EXPECT_NE(blob.data, w.blobs[b].data);  // the reader's memory, not the sender's
      EXPECT_EQ(reinterpret_cast<uintptr_t>(blob.data) % 64, 0u) << "blob " << b;
      total += blob.nbytes;
    }
    EXPECT_EQ(h.blob_bytes, total);
  }
}

TEST(FrameHeader, ItsBytesAreTheWireFormat) {
  Message m;
  m.body = "abc";
  m.blobs.push_back(pattern_blob(5, 0));
  m.blobs.push_back(pattern_blob(0, 0));
  const std::string want = raw({'L', 'R', 'P', 'C', 1, 0, 2, 0}) + le(3, 4) + le(7, 4) +
                           le(0x0102030405060708, 8) + le(5, 8) + le(5, 8) + le(0, 8);
  EXPECT_EQ(frame_prefix(FrameKind::request, 0x0102030405060708, 7, m), want);
  EXPECT_EQ(frame_prefix(FrameKind::goodbye, 0, 0, Message{}),
            raw({'L', 'R', 'P', 'C', 4, 0, 0, 0}) + std::string(24, '\0'));
  EXPECT_STREQ(frame_kind_name(FrameKind::error), "error");
  EXPECT_STREQ(frame_kind_name(static_cast<FrameKind>(9)), "unknown");
}

TEST(FrameReaderFeed, AStreamInOnePiece) {
  const std::vector<Sent> frames = several_frames();
  std::string stream;
  for (const Sent& s : frames) stream += wire(s);
  FrameReader reader;
  std::vector<Frame> out;
  reader.feed(stream.data(), stream.size(), out);
  expect_same(frames, out);
  EXPECT_FALSE(reader.mid_frame());
}

TEST(FrameReaderFeed, AStreamByteByByteCompletesEachFrameAtItsLastByte) {
  const std::vector<Sent> frames = several_frames();
  FrameReader reader;
  std::vector<Frame> out;
  for (size_t f = 0; f < frames.size(); ++f) {
    const std::string w = wire(frames[f]);
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(out.size(), f);
      reader.feed(w.data() + i, 1, out);
      if (i + 1 < w.size() && !reader.mid_frame()) {
        ADD_FAILURE() << "frame " << f << " not mid-frame after " << i + 1 << " of " << w.size();
        return;
      }
    }
    ASSERT_EQ(out.size(), f + 1);
    EXPECT_FALSE(reader.mid_frame());
  }
  expect_same(frames, out);
}

TEST(FrameReaderFeed, AStreamInRandomPieces) {
  const std::vector<Sent> frames = several_frames();
  std::string stream;
  for (const Sent& s : frames) stream += wire(s);
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    // Small pieces for some seeds, up to whole frames for others.
    std::uniform_int_distribution<size_t> piece(0, seed % 2 ? 100 : 200000);
    FrameReader reader;
    std::vector<Frame> out;
    for (size_t at = 0; at < stream.size();) {
      size_t n = std::min(piece(rng), stream.size() - at);
      reader.feed(stream.data() + at, n, out);  // 0-byte pieces included
      at += n;
    }
    expect_same(frames, out);
    EXPECT_FALSE(reader.mid_frame());
  }
}

// ---- Refused frames ------------------------------------------------------------------------

FrameHeader header(FrameKind kind, uint32_t body, uint16_t blobs, uint64_t blob_bytes) {
  FrameHeader h;
  h.kind = kind;
  h.body_bytes = body;
  h.blobs = blobs;
  h.blob_bytes = blob_bytes;
  return h;
}

std::string bytes_of(const FrameHeader& h) {
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

// The CodecError feeding `stream` raises.
std::string refusal(const std::string& stream) {
  return message_of<CodecError>([&] {
    FrameReader reader;
    std::vector<Frame> out;
    reader.feed(stream.data(), stream.size(), out);
  });
}

TEST(FrameRejects, AWrongMagicOrKind) {
  std::string w = wire(sent(FrameKind::reply, 1, 0, "x"));
  for (size_t i = 0; i < 4; ++i) {
    std::string bad = w;
    bad[i] ^= 0x20;  // "lRPC", "LrPC", ...
    EXPECT_TRUE(contains(refusal(bad), "does not start with lockstep rpc's magic")) << i;
  }
  for (int kind : {0, 5, 255}) {
    std::string bad = w;
    bad[4] = static_cast<char>(kind);
    EXPECT_TRUE(contains(refusal(bad), "unknown frame kind " + std::to_string(kind)));
  }
  // A frame good in all but its magic, after good frames: the good ones still arrive.
  std::string stream = wire(sent(FrameKind::reply, 1, 0, "ok")) + w;
  stream[stream.size() - w.size()] = 'X';
  FrameReader reader;
  std::vector<Frame> out;
  EXPECT_THROW(reader.feed(stream.data(), stream.size(), out), CodecError);
  EXPECT_EQ(out.size(), 1u);
}

TEST(FrameRejects, FramesPastTheBoundsAtTheirHeader) {
  // The header alone is enough: nothing is allocated for what it announces.
  EXPECT_TRUE(contains(refusal(bytes_of(header(FrameKind::request, kMaxBody + 1, 0, 0))),
                       "a body of 67108865 bytes (at most 67108864)"));
  EXPECT_TRUE(
      contains(refusal(bytes_of(header(FrameKind::request, 0xFFFFFFFF, 0, 0))), "a body of"));
  EXPECT_TRUE(contains(refusal(bytes_of(header(FrameKind::request, 0, kMaxBlobs + 1, 0))),
                       "4097 tensors (at most 4096)"));
  EXPECT_TRUE(contains(refusal(bytes_of(header(FrameKind::reply, 0, 0xFFFF, 0))), "65535 tensors"));
  EXPECT_TRUE(contains(refusal(bytes_of(header(FrameKind::reply, 0, 1, kMaxBlobBytes + 1))),
                       "17179869185 tensor bytes"));
  EXPECT_TRUE(
      contains(refusal(bytes_of(header(FrameKind::reply, 0, 1, ~uint64_t{0}))), "tensor bytes"));
  // At the bounds themselves the header passes (the frame is then waiting for its sizes).
  for (const FrameHeader& h : {header(FrameKind::request, 1, kMaxBlobs, 0),
                               header(FrameKind::reply, 1, 1, kMaxBlobBytes)}) {
    FrameReader reader;
    std::vector<Frame> out;
    std::string b = bytes_of(h);
    EXPECT_NO_THROW(reader.feed(b.data(), b.size(), out));
    EXPECT_TRUE(reader.mid_frame());
  }
}

TEST(FrameRejects, BlobSizesThatDoNotAddUpToTheHeader) {
  const auto with_sizes = [](uint64_t total, std::vector<uint64_t> sizes) {
    std::string s =
        bytes_of(header(FrameKind::request, 0, static_cast<uint16_t>(sizes.size()), total));
    for (uint64_t n : sizes) s += le(n, 8);
    return s;
  };
  EXPECT_TRUE(contains(refusal(with_sizes(10, {4, 5})),
                       "its tensor sizes add up to 9 bytes, its header says 10"));
  EXPECT_TRUE(contains(refusal(with_sizes(8, {4, 5})), "add up to 9 bytes"));
  EXPECT_NE(refusal(with_sizes(1, {0})), "");
  // Sizes that wrap around 2^64 to the header's total are refused, not added up modulo 2^64.
  EXPECT_NE(refusal(with_sizes(4, {~uint64_t{0}, 5})), "");
  EXPECT_NE(refusal(with_sizes(kMaxBlobBytes, {kMaxBlobBytes, kMaxBlobBytes, 0})), "");
  EXPECT_NE(refusal(with_sizes(0, {uint64_t{1} << 63, uint64_t{1} << 63})), "");
  // Sizes that do add up pass, and the frame then waits for its body.
  FrameReader reader;
  std::vector<Frame> out;
  std::string ok = with_sizes(9, {4, 5});
  EXPECT_NO_THROW(reader.feed(ok.data(), ok.size(), out));
  EXPECT_TRUE(reader.mid_frame());
  EXPECT_TRUE(out.empty());
}

TEST(FrameRejects, AGoodbyeThatCarriesData) {
  EXPECT_TRUE(contains(refusal(bytes_of(header(FrameKind::goodbye, 1, 0, 0))),
                       "a goodbye that carries data"));
  EXPECT_TRUE(contains(refusal(bytes_of(header(FrameKind::goodbye, 0, 1, 0))),
                       "a goodbye that carries data"));
  EXPECT_NE(refusal(bytes_of(header(FrameKind::goodbye, 0, 1, 0)) + le(0, 8)), "");
}

TEST(FramePrefix, RefusesMessagesPastTheBounds) {
  Message big;
  big.body.assign(kMaxBody + 1, 'b');
  EXPECT_TRUE(contains(message_of<CodecError>([&] { frame_prefix(FrameKind::request, 1, 0, big); }),
                       "a message body of 67108865 bytes"));
  big.body.pop_back();
  EXPECT_EQ(frame_prefix(FrameKind::request, 1, 0, big).size(), sizeof(FrameHeader));

  Message many;
  many.blobs.resize(kMaxBlobs + 1);
  EXPECT_TRUE(contains(message_of<CodecError>([&] { frame_prefix(FrameKind::reply, 1, 0, many); }),
                       "a message of 4097 tensors"));
  many.blobs.pop_back();
  EXPECT_EQ(frame_prefix(FrameKind::reply, 1, 0, many).size(), sizeof(FrameHeader) + 8 * kMaxBlobs);

  // Blob sizes only: frame_prefix reads no blob's bytes.
  Message huge;
  huge.blobs = {Blob{nullptr, kMaxBlobBytes, nullptr}, Blob{nullptr, 1, nullptr}};
  EXPECT_TRUE(contains(message_of<CodecError>([&] { frame_prefix(FrameKind::reply, 1, 0, huge); }),
                       "a message of 17179869185 tensor bytes"));
  huge.blobs.pop_back();
  EXPECT_NO_THROW(frame_prefix(FrameKind::reply, 1, 0, huge));
  // Sizes whose sum wraps around 2^64 (to 0 here) are past the bounds, not an empty message.
  Message wraps;
  wraps.blobs = {Blob{nullptr, size_t{1} << 63, nullptr}, Blob{nullptr, size_t{1} << 63, nullptr}};
  EXPECT_THROW(frame_prefix(FrameKind::reply, 1, 0, wraps), CodecError);
}

// ---- Over a socket -------------------------------------------------------------------------

struct SocketPair {
  int reader = -1, writer = -1;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      ADD_FAILURE() << "socketpair: " << std::strerror(errno);
      return;
    }
    reader = fds[0];
    writer = fds[1];
    int flags = ::fcntl(reader, F_GETFL);
    EXPECT_EQ(::fcntl(reader, F_SETFL, flags | O_NONBLOCK), 0);
  }
  ~SocketPair() {
    if (reader >= 0) ::close(reader);
    close_writer();
  }
  void close_writer() {
    if (writer >= 0) ::close(writer);
    writer = -1;
  }
};

// Calls read_from whenever the socket is readable until `frames` frames are in or it ends.
FrameReader::Status read_until(FrameReader& reader, int fd, std::vector<Frame>& out, size_t frames,
                               std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  for (;;) {
    FrameReader::Status s = reader.read_from(fd, out);
    if (s != FrameReader::Status::more || out.size() >= frames) return s;
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "no frame after " << limit.count() << " s (" << out.size() << " in)";
      return s;
    }
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 1000);
  }
}

TEST(FrameSocket, FramesWithA64MiBBlobArriveExactlyFromAnotherThread) {
  SocketPair sp;
  std::vector<Sent> frames;
  frames.push_back(sent(FrameKind::request, 7, 2, "args", {3, size_t{64} << 20, 100, 0}));
  frames.push_back(sent(FrameKind::reply, 8, 0, std::string(70000, 'y'), {65536}));
  frames.push_back(sent(FrameKind::goodbye, 0, 0, ""));
  std::vector<int> written;
  std::thread sender([&] {
    for (const Sent& s : frames)
      written.push_back(write_frame(sp.writer, frame_prefix(s.kind, s.call_id, s.lane, s.message),
                                    s.message, Deadline::after(std::chrono::seconds(60))));
    sp.close_writer();
  });
  FrameReader reader;
  std::vector<Frame> out;
  FrameReader::Status s = read_until(reader, sp.reader, out, frames.size() + 1);
  sender.join();
  EXPECT_EQ(written, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(s, FrameReader::Status::closed);
  EXPECT_EQ(reader.error(), 0);  // it ended at a frame boundary
  expect_same(frames, out);
}

TEST(FrameSocket, ManyBlobsGoOutInSeveralSendmsgCalls) {
  // More blobs than one sendmsg takes (IOV_MAX, 1024 on Linux).
  SocketPair sp;
  std::vector<size_t> sizes(kMaxBlobs);
  for (size_t i = 0; i < sizes.size(); ++i) sizes[i] = i % 7;
  std::vector<Sent> frames{sent(FrameKind::request, 9, 0, "many", sizes)};
  int written = -1;
  std::thread sender([&] {
    const Sent& s = frames[0];
    written = write_frame(sp.writer, frame_prefix(s.kind, s.call_id, s.lane, s.message), s.message,
                          Deadline::after(std::chrono::seconds(60)));
  });
  FrameReader reader;
  std::vector<Frame> out;
  read_until(reader, sp.reader, out, 1);
  sender.join();
  EXPECT_EQ(written, 0);
  expect_same(frames, out);
}

TEST(FrameSocket, AWriterWithNoReaderTimesOutAtItsDeadline) {
  SocketPair sp;
  int flags = ::fcntl(sp.writer, F_GETFL);
  ASSERT_EQ(::fcntl(sp.writer, F_SETFL, flags | O_NONBLOCK), 0);
  Sent s = sent(FrameKind::request, 1, 0, "", {size_t{16} << 20});
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(write_frame(sp.writer, frame_prefix(s.kind, 1, 0, s.message), s.message,
                        Deadline::after(std::chrono::milliseconds(200))),
            ETIMEDOUT);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(190));
}

TEST(FrameSocket, APeerThatClosesAtAFrameBoundaryEndsTheStreamCleanly) {
  SocketPair sp;
  Sent s = sent(FrameKind::reply, 5, 0, "done", {10});
  const std::string w = wire(s);
  ASSERT_EQ(::write(sp.writer, w.data(), w.size()), static_cast<ssize_t>(w.size()));
  sp.close_writer();
  FrameReader reader;
  std::vector<Frame> out;
  EXPECT_EQ(read_until(reader, sp.reader, out, 2), FrameReader::Status::closed);
  EXPECT_EQ(reader.error(), 0);
  expect_same({s}, out);
}

TEST(FrameSocket, APeerThatClosesMidFrameIsAnEpipe) {
  Sent s = sent(FrameKind::request, 5, 0, std::string(300, 'b'), {200000});
  const std::string w = wire(s);
  const size_t prefix = sizeof(FrameHeader) + 8;
  // Cut in the header, in the blob sizes, in the body, in a small part of the blob and in the
  // blob's large remainder (which read_from reads straight into the blob).
  for (size_t cut : {size_t{1}, size_t{31}, prefix - 3, prefix + 100, prefix + 300 + 10,
                     w.size() - 100000, w.size() - 1}) {
    SCOPED_TRACE("closed after " + std::to_string(cut) + " of " + std::to_string(w.size()));
    SocketPair sp;
    std::thread sender([&] {
      size_t at = 0;
      while (at < cut) {
        ssize_t n = ::write(sp.writer, w.data() + at, cut - at);
        if (n <= 0) break;
        at += static_cast<size_t>(n);
      }
      sp.close_writer();
    });
    FrameReader reader;
    std::vector<Frame> out;
    FrameReader::Status st = read_until(reader, sp.reader, out, 1);
    sender.join();
    EXPECT_EQ(st, FrameReader::Status::closed);
    EXPECT_EQ(reader.error(), EPIPE);
    EXPECT_TRUE(out.empty());
  }
}

TEST(FrameSocket, AReadErrorIsReportedWithItsErrno) {
  // A pipe's write end cannot be read: read(2) fails with EBADF.
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
  FrameReader reader;
  std::vector<Frame> out;
  EXPECT_EQ(reader.read_from(fds[1], out), FrameReader::Status::failed);
  EXPECT_EQ(reader.error(), EBADF);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(FrameSocket, NothingYetIsMore) {
  SocketPair sp;
  FrameReader reader;
  std::vector<Frame> out;
  EXPECT_EQ(reader.read_from(sp.reader, out), FrameReader::Status::more);
  EXPECT_FALSE(reader.mid_frame());
  const std::string w = wire(sent(FrameKind::reply, 1, 0, "x"));
  ASSERT_EQ(::write(sp.writer, w.data(), 10), 10);
  EXPECT_EQ(reader.read_from(sp.reader, out), FrameReader::Status::more);
  EXPECT_TRUE(reader.mid_frame());
  ASSERT_EQ(::write(sp.writer, w.data() + 10, w.size() - 10), static_cast<ssize_t>(w.size() - 10));
  EXPECT_EQ(reader.read_from(sp.reader, out), FrameReader::Status::more);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message.body, "x");
}

}  // namespace
}  // namespace lockstep::rpc
