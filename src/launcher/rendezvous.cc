#include "launcher/rendezvous.h"

#include "launcher/elastic_sync.h"
#include "launcher/node_sync.h"

namespace lockstep::launcher {

std::unique_ptr<Rendezvous> make_rendezvous(const LaunchOptions& options, SignalCatcher& signals) {
  if (options.elastic) return std::make_unique<ElasticSync>(options, signals);
  return std::make_unique<NodeSync>(options, signals);
}

}  // namespace lockstep::launcher
