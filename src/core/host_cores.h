// How many cores the ranks of this host have: for the wait policies (spin for a peer, or hand the
// core over at once) and the launcher's defaults. Every backend and the launcher ask here, so they
// agree on what "oversubscribed" means.
#pragma once

#include <string_view>

namespace lockstep::detail {

// Cores this process may run on (its affinity mask): what `--nproc-per-node auto` starts.
int process_cores();

// Cores the ranks of this host run on together: the cores online, or fewer where this process's
// cgroup confines it to a cpuset (a container). Not the affinity mask: mpirun binds each rank to
// a core of its own, and ranks that each have a core do not oversubscribe the host.
int host_cores();

// Whether ranks_on_host ranks leave some rank without a core of its own. Unknown (< 1): true,
// the safe answer (a wait then yields at once rather than spinning).
bool oversubscribed(int ranks_on_host);

// The number of cores in a cpuset list ("0-3,8,10-11"); 0 when the text is not one.
int count_cpu_list(std::string_view list);

}  // namespace lockstep::detail
