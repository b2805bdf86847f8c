#include "debug/flight_recorder.h"

#include <time.h>

#include <chrono>
#include <numeric>

#include "comm/op_identity.h"
#include "lockstep/core/error.h"

namespace lockstep::debug {

namespace {

constexpr uint64_t kWriting = ~uint64_t{0};  // a slot's id while its fields change
constexpr uint64_t kNone = ~uint64_t{0};

// The clock as of the last timer tick (a few ns to read, against about 25 for the precise one on
// a VM): good enough for when an op was queued, and never later than a precise reading after it.
int64_t coarse_now_us() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1'000;
}

uint64_t elements(const Op& op) {
  if (!op.counts.empty()) return std::accumulate(op.counts.begin(), op.counts.end(), uint64_t{0});
  return op.count;
}

// kind | variable | dtype | reduce op, one byte each; kSteadyTimes in the variable byte.
uint32_t pack_shape(const Op& op) {
  return static_cast<uint32_t>(op.kind) | (op.variable ? 1u : 0u) << 8 |
         static_cast<uint32_t>(op.dtype) << 16 | static_cast<uint32_t>(op.reduce_op) << 24;
}
// The slot's times are steady-clock microseconds (a p2p op's coarse readings), not Unix ones.
constexpr uint32_t kSteadyTimes = 2u << 8;

int64_t steady_us(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

}  // namespace

// One op's fields, each an atomic so that readers on other threads never race with the writer
// (relaxed stores compile to plain moves on x86). `id` is the seqlock word. One cache line: an op
// touches one line of the ring, and the end of one op (on the engine's thread) never shares a
// line with the next op being recorded (on the caller's).
struct alignas(64) FlightRecorder::Slot {
  std::atomic<uint64_t> id{kWriting};
  std::atomic<uint64_t> seq{0};
  std::atomic<uint32_t> shape{0};
  std::atomic<int32_t> root{-1};
  std::atomic<int32_t> peer{-1};
  std::atomic<uint8_t> state{0};
  std::atomic<uint64_t> count{0};
  std::atomic<int64_t> enqueued_us{0};
  std::atomic<int64_t> started_us{0};
  std::atomic<int64_t> ended_us{0};
};

std::string_view op_state_name(OpState state) {
  switch (state) {
    case OpState::queued:
      return "queued";
    case OpState::started:
      return "started";
    case OpState::completed:
      return "completed";
    case OpState::failed:
      return "failed";
  }
  return "unknown";
}

std::optional<OpState> parse_op_state(std::string_view name) {
  for (OpState s : {OpState::queued, OpState::started, OpState::completed, OpState::failed})
    if (op_state_name(s) == name) return s;
  return std::nullopt;
}

std::string OpRecord::label() const {
  std::string l = op + " #" + std::to_string(seq);
  if (op == "send") l += " to rank " + std::to_string(peer);
  if (op == "recv") l += " from rank " + std::to_string(peer);
  return l;
}

std::string OpRecord::summary() const {
  if (op == "barrier") return label();
  return detail::concat(label(), " (", dtype, ", ", count, count == 1 ? " element)" : " elements)");
}

int64_t now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

FlightRecorder::FlightRecorder(size_t capacity)
    : capacity_(capacity == 0 ? 1 : capacity), slots_(std::make_unique<Slot[]>(capacity_)) {
  static_assert(sizeof(Slot) == 64, "a slot is one cache line");
}

FlightRecorder::~FlightRecorder() = default;

FlightRecorder::Slot& FlightRecorder::slot(uint64_t id) const {
  return slots_[id % capacity_];
}

uint64_t FlightRecorder::record(const Op& op, OpState state, int64_t enqueued_us,
                                int64_t started_us, uint32_t flags) {
  uint64_t id = next_id_.load(std::memory_order_relaxed);
  Slot& s = slot(id);
  s.id.store(kWriting, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.seq.store(op.seq, std::memory_order_relaxed);
  s.shape.store(pack_shape(op) | flags, std::memory_order_relaxed);
  s.root.store(is_rooted(op.kind) ? op.root : -1, std::memory_order_relaxed);
  s.peer.store(op.peer, std::memory_order_relaxed);
  s.count.store(elements(op), std::memory_order_relaxed);
  s.state.store(static_cast<uint8_t>(state), std::memory_order_relaxed);
  s.enqueued_us.store(enqueued_us, std::memory_order_relaxed);
  s.started_us.store(started_us, std::memory_order_relaxed);
  s.ended_us.store(0, std::memory_order_relaxed);
  s.id.store(id, std::memory_order_release);
  next_id_.store(id + 1, std::memory_order_relaxed);
  return id;
}

uint64_t FlightRecorder::on_queued(const Op& op) {
  const uint64_t id = record(op, OpState::queued, coarse_now_us(), 0);
  if (!is_p2p(op.kind)) entered_.store(op.seq + 1, std::memory_order_relaxed);
  return id;
}

uint64_t FlightRecorder::on_p2p_posted(const Op& op, Clock::time_point posted) {
  // [Recorder cost]: the p2p fast path stores the caller's reading, flagged as steady.
  const int64_t at = steady_us(posted);
  return record(op, OpState::started, at, at, kSteadyTimes);
}

void FlightRecorder::on_p2p_ended(uint64_t id, bool ok, Clock::time_point ended) {
  set_state(id, ok ? OpState::completed : OpState::failed, false, steady_us(ended));
}

void FlightRecorder::set_state(uint64_t id, OpState state, bool start, int64_t at_us) {
  Slot& s = slot(id);
  // More than capacity() ops queued behind this one have overwritten its slot: nothing to update.
  if (s.id.load(std::memory_order_acquire) != id) return;
  (start ? s.started_us : s.ended_us).store(at_us, std::memory_order_relaxed);
  s.state.store(static_cast<uint8_t>(state), std::memory_order_release);
}

void FlightRecorder::on_started(const Op& op) {
  set_state(op.record_id, OpState::started, true, now_us());
  running_.store(op.record_id, std::memory_order_release);
  if (!is_p2p(op.kind)) started_.store(op.seq + 1, std::memory_order_relaxed);
}

void FlightRecorder::on_ended(const Op& op, bool ok) {
  set_state(op.record_id, ok ? OpState::completed : OpState::failed, false, now_us());
  running_.store(kNone, std::memory_order_release);
  if (ok && !is_p2p(op.kind)) completed_.store(op.seq + 1, std::memory_order_relaxed);
}

std::optional<OpRecord> FlightRecorder::read(const Slot& s) const {
  uint64_t id = s.id.load(std::memory_order_acquire);
  if (id == kWriting) return std::nullopt;
  uint32_t shape = s.shape.load(std::memory_order_relaxed);
  auto kind = static_cast<OpKind>(shape & 0xff);
  auto dtype = static_cast<DType>((shape >> 16) & 0xff);
  OpRecord r{.id = id,
             .seq = s.seq.load(std::memory_order_relaxed),
             .op = std::string(op_kind_name(kind)) + ((shape >> 8) & 1 ? "_v" : ""),
             .dtype = std::string(dtype_name(dtype)),
             .root = s.root.load(std::memory_order_relaxed),
             .peer = s.peer.load(std::memory_order_relaxed),
             .count = s.count.load(std::memory_order_relaxed),
             .state = static_cast<OpState>(s.state.load(std::memory_order_acquire)),
             .enqueued_us = s.enqueued_us.load(std::memory_order_relaxed),
             .started_us = s.started_us.load(std::memory_order_relaxed),
             .ended_us = s.ended_us.load(std::memory_order_relaxed)};
  if (shape & kSteadyTimes) {
    // Unix time as of now: the steady reading plus the clocks' offset at this read, which is what
    // a Unix reading at the time would have been unless the wall clock was set since.
    const int64_t offset = now_us() - steady_us(Clock::now());
    for (int64_t* t : {&r.enqueued_us, &r.started_us, &r.ended_us})
      if (*t != 0) *t += offset;
  }
  if (is_reducing(kind)) r.reduce_op = reduce_op_name(static_cast<ReduceOp>(shape >> 24));
  r.bytes = r.count * element_size(dtype);
  if (kind == OpKind::barrier) r.dtype.clear();
  std::atomic_thread_fence(std::memory_order_acquire);
  if (s.id.load(std::memory_order_relaxed) != id) return std::nullopt;  // overwritten meanwhile
  return r;
}

std::vector<OpRecord> FlightRecorder::snapshot() const {
  uint64_t end = next_id_.load(std::memory_order_acquire);
  uint64_t begin = end > capacity_ ? end - capacity_ : 0;
  std::vector<OpRecord> out;
  out.reserve(static_cast<size_t>(end - begin));
  for (uint64_t id = begin; id < end; ++id)
    if (auto r = read(slot(id)); r && r->id == id) out.push_back(std::move(*r));
  return out;
}

std::optional<OpRecord> FlightRecorder::find(uint64_t id) const {
  auto r = read(slot(id));
  if (r && r->id == id) return r;
  return std::nullopt;
}

std::optional<OpRecord> FlightRecorder::running() const {
  uint64_t id = running_.load(std::memory_order_acquire);
  if (id == kNone) return std::nullopt;
  return find(id);
}

Progress FlightRecorder::progress() const {
  return {.entered = entered_.load(std::memory_order_relaxed),
          .started = started_.load(std::memory_order_relaxed),
          .completed = completed_.load(std::memory_order_relaxed)};
}

}  // namespace lockstep::debug
