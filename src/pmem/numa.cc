#include "pmem/numa.h"

#include <numa.h>
#include <numaif.h>

namespace subito::pmem {

int NumaNodeCount() {
  if (numa_available() < 0) return 1;
  return numa_num_configured_nodes();
}

int NumaNodeOf(const void* addr) {
  if (numa_available() < 0) return -1;
  int node = -1;
  // MPOL_F_NODE | MPOL_F_ADDR: the node of the page holding addr.
  if (get_mempolicy(&node, nullptr, 0, const_cast<void*>(addr), MPOL_F_NODE | MPOL_F_ADDR) != 0) {
    return -1;
  }
  return node;
}

bool PinCurrentThreadToNode(int node) {
  if (node < 0 || NumaNodeCount() <= 1) return false;
  return numa_run_on_node(node) == 0;
}

}  // namespace subito::pmem
