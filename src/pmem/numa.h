// NUMA placement of PM mappings and of the threads that write them (libnuma).
// On a machine with one node every call is a cheap no-op.
#pragma once

namespace subito::pmem {

// The node whose memory backs the page at addr, or -1 if unknown (page not
// yet faulted in, or NUMA unavailable).
int NumaNodeOf(const void* addr);

// Number of configured NUMA nodes (1 when NUMA is unavailable).
int NumaNodeCount();

// Restricts the calling thread to the CPUs of `node`. Returns false (and
// leaves the thread alone) on a single-node machine or for node < 0.
bool PinCurrentThreadToNode(int node);

}  // namespace subito::pmem
