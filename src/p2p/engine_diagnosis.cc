// The p2p engine's deadlines and diagnoses: detaching timed-out ops, asking the peers involved what
// they are doing with this rank, and the texts of timeout and mismatch errors (see engine.h).
#include <algorithm>
#include <sstream>

#include "lockstep/core/error.h"
#include "p2p/engine_state.h"

namespace lockstep::p2p {

namespace {

// How long a timed-out post waits for its peers' answers before it fails without them.
constexpr std::chrono::milliseconds kReplyGrace{1000};
// How long ops that timed out are still reported to a peer's query.
constexpr std::chrono::seconds kRememberTimedOut{5};

// One line of a reply: what the answering rank has pending with the asker.
struct Line {
  char kind = 0;  // 'S' a send to the asker, 'R' a recv from it (or from any rank), 'U' a message
                  // from the asker that no recv matched yet
  uint32_t tag = 0;
  std::string text;
};

std::vector<Line> parse_reply(const std::string& reply) {
  std::vector<Line> lines;
  std::istringstream in(reply);
  std::string row;
  while (std::getline(in, row)) {
    auto a = row.find('\t');
    auto b = a == std::string::npos ? a : row.find('\t', a + 1);
    if (a != 1 || b == std::string::npos) continue;
    try {
      lines.push_back(
          {row[0], static_cast<uint32_t>(std::stoul(row.substr(2, b - 2))), row.substr(b + 1)});
    } catch (const std::exception&) {
      // not a line this engine writes: ignored
    }
  }
  return lines;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : sep) + p;
  return s;
}

std::string line_of(char kind, uint32_t tag, const std::string& text) {
  return detail::concat(kind, '\t', tag, '\t', text, '\n');
}

}  // namespace

std::string name_of(const Request& r) {
  if (!r.is_send && r.peer == kAnySource) return detail::concat("recv #", r.seq, " from any rank");
  return detail::concat(r.is_send ? "send #" : "recv #", r.seq,
                        r.is_send ? " to rank " : " from rank ", r.peer);
}

std::string describe(const Request& r) {
  return detail::concat(name_of(r), " (tag ", r.tag, ", ", dtype_name(r.dtype), " x ", r.count,
                        ")");
}

std::string Engine::State::op_text(const PendingOp& op) const {
  return describe(op.request);
}

std::string Engine::State::mismatch_text(const PendingOp& recv, int sender,
                                         const FrameHeader& h) const {
  const auto dtype = static_cast<DType>(h.dtype);
  return detail::concat(
      rank_text(rank), "'s ", name_of(recv.request), " (tag ", recv.request.tag, ") expects ",
      dtype_name(recv.request.dtype), " x ", recv.request.count, " (", recv.bytes,
      " bytes), but the send of ", rank_text(sender), " it matched (tag ", h.tag, ") carries ",
      dtype_name(dtype), " x ", h.count, " (", h.bytes,
      " bytes). Fix: post the same count and dtype on both sides of each message");
}

Clock::time_point Engine::State::next_wakeup() const {
  auto next = Clock::time_point::max();
  for (const auto& b : batches)
    next = std::min(next, b->diagnosing ? b->give_up : b->deadline.at());
  return next;
}

// Takes op out of every place that could still complete it.
void Engine::State::detach(const OpPtr& op) {
  const Request& r = op->request;
  std::erase(posted_recvs, op);
  for (auto& u : unexpected)
    if (u->claimed == op) u->claimed.reset();
  for (int q = 0; q < size; ++q) {
    Peer& p = peers[q];
    if (p.in_recv == op) {  // its payload is arriving: drop the rest
      p.in_recv.reset();
      p.in_dest = nullptr;
    }
    std::erase_if(p.awaiting_data, [&](const auto& kv) { return kv.second == op; });
  }
  if (r.is_send) {
    Peer& p = peers[r.peer];
    p.awaiting_cts.erase(op->id);
    for (size_t i = 0; i < p.out.size(); ++i) {
      OutFrame& f = p.out[i];
      if (f.completes != op) continue;
      if (f.written > 0) {
        p.poisoned = true;  // cut short; the stream cannot carry another frame
      } else if (f.header.kind == FrameKind::data) {
        queue_text(r.peer, FrameKind::cancel, f.header.id, "the send's deadline passed");
        p.out.erase(p.out.begin() + static_cast<long>(i));
      } else {
        p.out.erase(p.out.begin() + static_cast<long>(i));
      }
      break;
    }
  }
  op->stage = PendingOp::Stage::detached;
}

void Engine::State::check_deadlines() {
  const auto now = Clock::now();
  while (!recently_timed_out.empty() && now - recently_timed_out.front().at > kRememberTimedOut)
    recently_timed_out.pop_front();
  // Runs every progress round: no copy of the vector. op_done may remove the batch being looked
  // at (only that one): the index moves on only while it is still there.
  for (size_t i = 0; i < batches.size();) {
    const std::shared_ptr<Batch> b = batches[i];
    struct Advance {
      size_t& i;
      const std::vector<std::shared_ptr<Batch>>& all;
      const Batch* b;
      ~Advance() {
        if (i < all.size() && all[i].get() == b) ++i;
      }
    } advance{i, batches, b.get()};
    if (!b->diagnosing && now >= b->deadline.at()) {
      b->diagnosing = true;
      b->give_up = now + kReplyGrace;
      for (const OpPtr& op : b->ops) {
        if (op->done) continue;
        detach(op);
        const int peer = op->request.peer;
        if (peer == kAnySource || !peers[peer].gone.empty() || peers[peer].poisoned ||
            b->queries.count(peer))
          continue;
        uint64_t id = next_query++;
        b->queries[peer] = id;
        OutFrame q;
        q.header.kind = FrameKind::query;
        q.header.id = id;
        q.connect_by = b->give_up;
        queue(peer, std::move(q));
      }
    }
    if (!b->diagnosing) continue;
    bool answered = std::all_of(b->queries.begin(), b->queries.end(), [&](const auto& kv) {
      return peers[kv.first].replies.count(kv.second) || !peers[kv.first].gone.empty();
    });
    if (!answered && now < b->give_up) continue;
    const std::string text = timeout_text(*b);
    for (const auto& [peer, id] : b->queries) peers[peer].replies.erase(id);
    for (const OpPtr& op : b->ops) {
      if (op->done) continue;
      const int peer = op->request.peer;
      recently_timed_out.push_back(
          {peer, line_of(op->request.is_send ? 'S' : 'R', op->request.tag, op_text(*op)), now});
      op_done(op, std::make_exception_ptr(TimeoutError(text)));
    }
  }
}

std::string Engine::State::answer_query(int asker) const {
  std::string reply;
  for (const auto& b : batches)
    for (const OpPtr& op : b->ops) {
      const Request& r = op->request;
      if (op->done) continue;
      if (r.is_send && r.peer == asker) reply += line_of('S', r.tag, op_text(*op));
      if (!r.is_send && (r.peer == asker || r.peer == kAnySource))
        reply += line_of('R', r.tag, op_text(*op));
    }
  for (const auto& t : recently_timed_out)
    if (t.peer == asker || t.peer == kAnySource) reply += t.line;
  for (const auto& u : unexpected)
    if (u->source == asker)
      reply += line_of(
          'U', u->header.tag,
          detail::concat(dtype_name(static_cast<DType>(u->header.dtype)), " x ", u->header.count));
  return reply;
}

std::string Engine::State::timeout_text(const Batch& b) const {
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(b.deadline.at() - b.posted).count();
  std::vector<std::string> parts;
  for (const OpPtr& op : b.ops) {
    if (op->done) continue;
    const Request& r = op->request;
    const std::string me = detail::concat(rank_text(rank), " waits in ", op_text(*op));
    if (r.peer == kAnySource) {
      std::vector<std::string> tags;
      for (const auto& u : unexpected)
        tags.push_back(detail::concat(rank_text(u->source), " sent tag ", u->header.tag));
      parts.push_back(me + ": no rank sent it a message with tag " + std::to_string(r.tag) +
                      (tags.empty() ? "" : " (unmatched here: " + join(tags, ", ") + ")"));
      continue;
    }
    const int peer = r.peer;
    const Peer& p = peers[peer];
    auto q = b.queries.find(peer);
    const std::string* reply = nullptr;
    if (q != b.queries.end()) {
      auto it = p.replies.find(q->second);
      if (it != p.replies.end()) reply = &it->second;
    }
    if (!reply && !p.gone.empty()) {
      parts.push_back(me + "; " + p.gone);
      continue;
    }
    if (!reply) {
      parts.push_back(detail::concat(me, "; ", rank_text(peer),
                                     " did not answer within a second (its process may be "
                                     "stuck, or overloaded)"));
      continue;
    }
    std::vector<std::string> its_sends, its_recvs, its_held, their_sends;
    for (const Line& l : parse_reply(*reply)) {
      if (l.kind == 'S') its_sends.push_back(l.text);
      if (l.kind == 'R') its_recvs.push_back(l.text);
      if (l.kind == 'U' && l.tag != r.tag) its_held.push_back(detail::concat("tag ", l.tag));
    }
    std::vector<std::string> other_tags;  // messages from the peer held here, unmatched
    for (const auto& u : unexpected)
      if (u->source == peer && u->header.tag != r.tag)
        other_tags.push_back(detail::concat("tag ", u->header.tag));
    const std::string it = detail::concat(rank_text(peer), " waits in ", join(its_recvs, ", "));
    if (!r.is_send && !other_tags.empty()) {
      parts.push_back(detail::concat(me, ", but the messages ", rank_text(peer), " sent it carry ",
                                     join(other_tags, ", "),
                                     ": a tag mismatch. Fix: use the same tag on both sides"));
    } else if (r.is_send && !its_held.empty()) {
      parts.push_back(detail::concat(me, ", but ", rank_text(peer), " holds messages of ",
                                     join(its_held, ", "), " from it unmatched, and ",
                                     its_recvs.empty() ? "posts no recv" : it,
                                     ": a tag mismatch. Fix: use the same tag on both sides"));
    } else if (!r.is_send && its_sends.empty() && !its_recvs.empty()) {
      parts.push_back(
          detail::concat(me, "; ", it,
                         ": both ranks receive first, and neither sends (a deadlock). Fix: post "
                         "the sends first (send and isend return at once), or post both with "
                         "batch_isend_irecv"));
    } else if (r.is_send && its_recvs.empty() && !its_sends.empty()) {
      parts.push_back(detail::concat(
          me, "; ", rank_text(peer), " waits in ", join(its_sends, ", "),
          ": both ranks send first and wait, and a large message needs its recv posted (a "
          "deadlock). Fix: post the recvs before waiting for the sends, or use "
          "batch_isend_irecv"));
    } else if (its_sends.empty() && its_recvs.empty()) {
      parts.push_back(detail::concat(me, "; ", rank_text(peer), " has posted no ",
                                     r.is_send ? "recv from " : "send to ", rank_text(rank),
                                     " (it may be computing, in a collective, or it skipped "
                                     "this message)"));
    } else {
      std::vector<std::string> all = its_sends;
      all.insert(all.end(), its_recvs.begin(), its_recvs.end());
      parts.push_back(
          detail::concat(me, "; ", rank_text(peer), " has pending with it: ", join(all, ", ")));
    }
  }
  return detail::concat(detail::WorkAccess::description(b.work), ": timed out after ", waited,
                        " ms: ", join(parts, "; "));
}

}  // namespace lockstep::p2p
