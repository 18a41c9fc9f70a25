// PageId: a page of a space, the key of the buffer pool's page table, the
// per-page log's lookup and the page copies of old snapshots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace subito::buffer {

struct PageId {
  uint32_t space = 0;
  uint32_t page_no = 0;
  bool operator==(const PageId& o) const { return space == o.space && page_no == o.page_no; }
};
struct PageIdHash {
  size_t operator()(const PageId& p) const {
    return std::hash<uint64_t>()((uint64_t{p.space} << 32) | p.page_no);
  }
};

}  // namespace subito::buffer
