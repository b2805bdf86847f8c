// Descriptors: the always-on mismatch check of the shm backend. Each rank publishes a small record
// of its op (kind, sequence number, dtype, reduce op, root, tag, algorithm, agreed bytes and a
// checksum of a _v counts array: the tcp backend's MessageHeader) before any data moves, and every
// rank compares the others' records with its own op. Any difference is a MismatchError worded as
// on tcp ("all_reduce #12: rank 1 sent 4000 bytes, rank 0 expected 4096 ...").
#pragma once

#include <cstdint>

#include "backends/shm/layout.h"
#include "comm/op.h"

namespace lockstep::shm {

// This rank's descriptor for op: payload_bytes is what it contributes.
Descriptor make_descriptor(const Op& op, uint64_t payload_bytes);
// A 64-bit hash of the fields every rank must agree on. Peers compare hashes first (one cache
// line, read together with the step) and whole descriptors only when the hashes differ.
uint64_t fingerprint(const Descriptor& d);

// Compares every other rank's descriptor (op parity `parity`) with op, whose descriptor has hash
// `mine`; for all_to_all also checks that each rank's send count to this rank equals this rank's
// recv count from it. Throws MismatchError on the first difference. REQUIRES every rank has
// published (its step reached the op's arrival).
void check_descriptors(const SegmentView& segment, int parity, const Op& op, int rank,
                       uint64_t mine);

}  // namespace lockstep::shm
