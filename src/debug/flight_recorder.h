// FlightRecorder: a group's last N ops, with their state and timing, for the dump that a timeout
// or an error leaves behind (docs/diagnostics.md) and for the watchdog's stall warnings.
//
// [Recorder cost] Recording is on the path of every op, so it allocates nothing and formats
// nothing: each op fills one slot of a fixed ring of atomics (a seqlock per slot) and reads the
// clock three times: the coarse clock when queued (it may read up to a timer tick early), the
// precise one when started and ended. A send or recv of the p2p engine reads no clock here: it
// is given the coarse steady times its caller read anyway (OpJournal), and stores them as they
// are; read() turns them into Unix time with the offset between the clocks at that moment. Its
// fast path is a microsecond or so per shm round trip, of which clock reads per op were a
// measurable share. Its times are good to a timer tick. Strings are made only by snapshot(), which
// the watchdog and the dump call, never the op path.
//
// Thread-safety: on_queued and on_p2p_posted are called by the issuing thread (under the group's
// issue lock, so one at a time); on_started/on_ended by whichever thread runs the op (one at a
// time, in issue order); on_p2p_ended by the p2p engine, beside them (the engine's sends and recvs
// are never running(): that is the queue's op). snapshot(), running() and progress() may be
// called from any thread at any time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/op.h"
#include "comm/op_journal.h"

namespace lockstep::debug {

enum class OpState : uint8_t { queued, started, completed, failed };
std::string_view op_state_name(OpState state);
// Parses the names op_state_name gives; nullopt for anything else.
std::optional<OpState> parse_op_state(std::string_view name);

// One op as the dump and the trace show it. Times are microseconds since the Unix epoch (so that
// dumps from several processes share one timeline); 0 means "not yet".
struct OpRecord {
  uint64_t id = 0;        // the recorder's running number of this op (0, 1, 2, ...)
  uint64_t seq = 0;       // the op's sequence number (collectives: the group's; p2p: per pair)
  std::string op;         // "all_reduce", "all_gather_v", "send", ...
  std::string dtype;      // "f32", ...
  std::string reduce_op;  // "sum", ...; empty for ops that do not reduce
  int root = -1;          // rooted ops only
  int peer = -1;          // send/recv only
  uint64_t count = 0;     // elements (for per-rank-count ops: the sum over ranks)
  uint64_t bytes = 0;     // count * element size
  OpState state = OpState::queued;
  int64_t enqueued_us = 0;
  int64_t started_us = 0;
  int64_t ended_us = 0;

  bool collective() const { return op != "send" && op != "recv"; }
  // "all_reduce #57"
  std::string label() const;
  // "all_reduce #57 (f32, 1048576 elements)"
  std::string summary() const;
};

// Counts of this group's collectives (p2p ops are not counted), in the order ops move through.
struct Progress {
  uint64_t entered = 0;    // collectives the application issued: the next one gets seq `entered`
  uint64_t started = 0;    // collectives that began to run
  uint64_t completed = 0;  // collectives that finished successfully (they finish in order)
};

// Microseconds since the Unix epoch.
int64_t now_us();

class FlightRecorder final : public OpJournal {
 public:
  // Keeps the last `capacity` ops (at least 1).
  explicit FlightRecorder(size_t capacity);
  ~FlightRecorder() override;
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Records op as queued and returns its id (store it in op.record_id).
  uint64_t on_queued(const Op& op);
  void on_started(const Op& op);
  void on_ended(const Op& op, bool ok);
  // OpJournal: the p2p engine's sends and recvs.
  uint64_t on_p2p_posted(const Op& op, Clock::time_point posted) override;
  void on_p2p_ended(uint64_t id, bool ok, Clock::time_point ended) override;

  // The ops still in the ring, oldest first.
  std::vector<OpRecord> snapshot() const;
  // The op running now, if any.
  std::optional<OpRecord> running() const;
  // The record of op `id` if it is still in the ring.
  std::optional<OpRecord> find(uint64_t id) const;
  Progress progress() const;
  size_t capacity() const { return capacity_; }
  // Ops recorded since construction (more than capacity() once the ring has wrapped).
  uint64_t recorded() const { return next_id_.load(std::memory_order_relaxed); }

 private:
  struct Slot;
  Slot& slot(uint64_t id) const;
  std::optional<OpRecord> read(const Slot& s) const;
  // Fills the next slot with op in `state`; returns its id.
  uint64_t record(const Op& op, OpState state, int64_t enqueued_us, int64_t started_us,
                  uint32_t flags = 0);
  void set_state(uint64_t id, OpState state, bool start, int64_t at_us);

  size_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<uint64_t> running_{~uint64_t{0}};
  std::atomic<uint64_t> entered_{0}, started_{0}, completed_{0};
};

}  // namespace lockstep::debug
