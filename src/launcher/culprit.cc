#include "launcher/culprit.h"

#include <algorithm>
#include <memory>
#include <set>

#include "debug/status_keys.h"
#include "group/attempt_scope.h"
#include "lockstep/store/prefix_store.h"
#include "lockstep/store/tcp_store.h"

namespace lockstep::launcher {

std::optional<Culprit> read_culprit(TcpStore& store, const std::string& run_id, int attempt,
                                    int world_size) {
  std::vector<debug::Blame> blames;
  try {
    std::shared_ptr<Store> base(&store, [](Store*) {});  // not owned
    PrefixStore scoped(attempt_prefix(run_id, std::to_string(attempt)), base);
    blames = debug::read_blames(scoped, world_size);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::set<int> blamed, reporters;
  for (const auto& b : blames) {
    reporters.insert(b.reporter);
    blamed.insert(b.culprits.begin(), b.culprits.end());
  }
  Culprit culprit;
  for (int r : blamed)
    if (!reporters.count(r)) culprit.ranks.push_back(r);
  if (culprit.ranks.empty()) return std::nullopt;
  culprit.waiting_ranks.assign(reporters.begin(), reporters.end());
  culprit.op = blames.front().op;
  return culprit;
}

}  // namespace lockstep::launcher
