// The records the launchers of a multi-node job read from node 0's store
// (src/launcher/node_sync_records.h): every node's registration for an attempt, read into the
// attempt's world layout, and an attempt's failure report.
//
// Input: a byte for this node's rank and --max-restarts, then the records, separated by NUL
// bytes (the first NUL-separated piece doubles as the failure report). Checked: a malformed
// record is a lockstep error (never another exception), a layout adds up (offset and world size
// within the sum of the nodes' process counts), and what node_entry and failure_report write
// reads back unchanged.
#include "fuzz_input.h"
#include "launcher/node_sync_records.h"
#include "lockstep/core/error.h"

using namespace lockstep;
using namespace lockstep::launcher;

namespace {

void check_layout(const WorldLayout& layout, const std::vector<std::string>& entries) {
  if (layout.nodes.size() != entries.size()) fuzz::broken("a layout lost nodes");
  int64_t total = 0;
  for (const NodeInfo& n : layout.nodes) {
    if (n.nproc < 1) fuzz::broken("a node with no processes was accepted");
    total += n.nproc;
  }
  if (layout.world_size != total || layout.rank_offset < 0 || layout.rank_offset > total)
    fuzz::broken("a layout does not add up");
}

void check_round_trips(const std::vector<std::string>& pieces) {
  NodeInfo node{pieces.empty() ? "" : pieces[0], 4, 2};
  if (node.host.find('\t') != std::string::npos) return;  // hostnames have no tabs
  WorldLayout back = parse_world_layout({node_entry(node, "run", 29501)}, 0, 2);
  if (back.nodes[0].host != node.host || back.world_size != 4 || back.master_port != 29501)
    fuzz::broken("node_entry does not read back");
  RemoteFailure failure{.node_rank = 3, .exit_code = -9, .what = node.host, .restartable = false};
  RemoteFailure again = parse_failure_report(failure_report(failure));
  if (again.node_rank != 3 || again.exit_code != -9 || again.restartable)
    fuzz::broken("failure_report does not read back");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int node_rank = data[0] & 7;
  const int max_restarts = data[0] >> 3;
  const std::vector<std::string> pieces = fuzz::split(fuzz::as_text(data + 1, size - 1), '\0');
  try {
    const WorldLayout layout = parse_world_layout(pieces, node_rank, max_restarts);
    check_layout(layout, pieces);
  } catch (const Error&) {
    // StoreError or ConfigError naming the node: what NodeSync::join throws.
  }
  if (!pieces.empty()) (void)parse_failure_report(pieces[0]);
  check_round_trips(pieces);
  return 0;
}
