// The records of an elastic job's rendezvous (elastic_sync.h has the keys), as pure functions of
// their text, so that reading what other launchers wrote (outside input) can be tested without a
// store.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/node_sync_records.h"

namespace lockstep::launcher {

// One launcher's registration for a round: "id \t host \t pid \t nproc \t max_restarts".
// `id` is unique in the job (the store's counter), `pid` the launcher's (names it on a host that
// runs several).
struct ElasticNode {
  int id = 0;
  std::string host;
  int pid = 0;
  int nproc = 1;
  int max_restarts = 0;
};

std::string elastic_entry(const ElasticNode& node);
// StoreError naming the entry when it is malformed.
ElasticNode parse_elastic_entry(const std::string& text);

// A closed round, written by the store's host: who is in it (in node-rank order: the host first,
// then the others by id) and what they share.
struct ElasticRound {
  int round = 0;
  std::string run_id;
  int master_port = 0;
  int restart_count = 0;  // restarts after failures before this round
  int max_restarts = 0;   // the host's
  std::vector<ElasticNode> members;
};

// "run_id \t master_port \t restart_count \t max_restarts" and one line per member.
std::string round_record(const ElasticRound& round);
// StoreError when malformed.
ElasticRound parse_round_record(int round, const std::string& text);

// How `node` ("node 1 (host-b, launcher pid 123)") is named in messages.
std::string describe_node(int node_rank, const ElasticNode& node);

// Where member `id` sits in `round`. ConfigError when it runs with another --max-restarts than
// the host; nullopt when it is not a member.
std::optional<WorldLayout> layout_in_round(const ElasticRound& round, int id, int max_restarts);

}  // namespace lockstep::launcher
