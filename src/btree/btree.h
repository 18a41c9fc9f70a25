// BTree: a B+-tree in one space, keys and values as byte strings, keys
// ordered by memcmp (see key_encoding.h). Rows live in the leaves; leaves
// are linked both ways for scans.
//
// Every change is one mini-transaction (buffer/mtr.h): a split rewrites the
// node, its new sibling, the sibling links and the parent in ONE log record,
// so a crash leaves the whole split or none of it. The root never moves (a
// root split moves the root's records into two new children), so the root
// page number, kept in the space header's meta area, is written once.
//
// Space: a leaf under a quarter full is merged with a sibling under the same
// parent when both fit in 3/4 of a page; an emptied leaf is unlinked and its
// entry removed upward; a root with one child takes that child's place.
// Freed pages go on a free list in the space header and are reused first.
//
// Concurrency (docs/architecture.md): readers and writers whose change stays
// inside one leaf share the tree latch and latch pages (a reader one page at
// a time, such a writer its leaf); a change that splits, merges or touches
// overflow pages takes the tree latch exclusively. Underfull internal nodes
// merge with a sibling like leaves do. Values longer than fit inline (a quarter page per record) go
// to a chain of overflow pages written, replaced and freed in the same
// mini-transaction as the leaf record that points to them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "buffer/buffer_pool.h"
#include "buffer/mtr.h"

namespace subito::btree {

// The tree latch, writer-preferring: while a structure change waits for
// it, new shared holders wait too, so a split is not starved by a steady
// stream of reads and leaf-only writes. Shared holders must not nest.
class TreeLatch {
 public:
  void lock_shared() {
    while (exclusive_waiting_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
    mu_.lock_shared();
  }
  void unlock_shared() { mu_.unlock_shared(); }
  void lock() {
    exclusive_waiting_.fetch_add(1, std::memory_order_acq_rel);
    mu_.lock();
    exclusive_waiting_.fetch_sub(1, std::memory_order_acq_rel);
  }
  void unlock() { mu_.unlock(); }

 private:
  std::shared_mutex mu_;
  std::atomic<int> exclusive_waiting_{0};
};

enum class SeekMode { kFirst, kLast, kGE, kGT, kLE, kLT };

class BTree {
 public:
  // Makes a new, empty tree in a space that has no tree yet.
  static Result<std::unique_ptr<BTree>> Create(buffer::BufferPool* pool, uint32_t space_id);
  static Result<std::unique_ptr<BTree>> Open(buffer::BufferPool* pool, uint32_t space_id);

  Result<std::optional<std::string>> Get(std::string_view key);
  // Inserts, or replaces the value of an existing key.
  Status Put(std::string_view key, std::string_view value);
  // Returns false if the key was absent.
  Result<bool> Delete(std::string_view key);
  // Largest key + value stored inline in a leaf; longer values go to a chain
  // of overflow pages.
  uint32_t max_record() const;
  // Largest value (one operation is logged as one record).
  uint32_t max_value() const;
  uint32_t root() const { return root_; }
  // Keys in the tree (kept in the space header, updated with every change).
  Result<uint64_t> entries();
  // Levels: 1 for a lone leaf root.
  Result<uint32_t> height();

  // Estimates for the optimizer, from one root-to-leaf descent each:
  // Rank is the fraction of keys below `key`, taking sibling subtrees as
  // equally large; RandomKey picks a key by choosing a random child at
  // every level (nullopt: empty tree).
  Result<double> Rank(std::string_view key);
  Result<std::optional<std::string>> RandomKey(uint64_t random);

  class Cursor;

 private:
  BTree(buffer::BufferPool* pool, uint32_t space_id, uint32_t root)
      : pool_(pool), space_(space_id), root_(root) {}
  struct Entry {
    std::string key, value;
  };
  Result<buffer::PageHandle> Fetch(uint32_t page_no, buffer::Latch latch);
  Status CheckNode(uint32_t page_no, const buffer::PageHandle& h) const;
  // Root-to-leaf page numbers for key.
  Result<std::vector<uint32_t>> Path(std::string_view key);
  class Op;
  Status InsertAt(Op& op, std::vector<uint32_t> path, Entry entry);
  // The key's leaf, exclusively latched in op, copied into img; depth: the
  // path's length.
  Result<buffer::PageHandle*> LeafFor(Op& op, std::string_view key, std::vector<uint8_t>& img,
                                      size_t* depth);
  Result<bool> PutInLeaf(std::string_view key, std::string_view value);
  Result<std::optional<bool>> DeleteInLeaf(std::string_view key);
  Result<uint32_t> WriteOverflow(Op& op, std::string_view value);
  Status FreeOverflow(Op& op, std::string_view stored);
  Result<std::string> ReadValue(std::string_view stored);
  Status Rebalance(Op& op, std::vector<uint32_t> path);
  Status RemoveEmptyLeaf(Op& op, std::vector<uint32_t> path, uint32_t prev, uint32_t next);
  Status MergeInternal(Op& op, std::vector<uint32_t> path);
  Status CollapseRoot(Op& op);

  buffer::BufferPool* const pool_;
  const uint32_t space_;
  const uint32_t root_;
  TreeLatch latch_;  // shared: reads and leaf-only changes; exclusive: structure
  // Counts committed changes to the tree's pages (bumped after each Op's
  // Mtr commits, before its latches go). A cursor that saw the count before
  // copying a leaf may keep reading the copy while the count is unchanged.
  std::atomic<uint64_t> changes_{0};
  friend class Cursor;
};

// A position in the tree. It holds no latch between calls: each call
// re-checks its leaf and, if the leaf changed meanwhile, re-seeks from the
// last key, so it stays correct under concurrent inserts and deletes.
// A scan (Next/Prev) copies the leaf it steps in and serves the following
// steps from the copy as long as the tree has not changed at all since
// (BTree::changes_), which is exactly what re-reading the leaf would give.
class BTree::Cursor {
 public:
  explicit Cursor(BTree* tree) : tree_(tree) {}
  Status Seek(SeekMode mode, std::string_view key = {});
  Status Next();
  Status Prev();
  bool Valid() const { return valid_; }
  const std::string& key() const { return key_; }
  const std::string& value() const { return value_; }

 private:
  Status SeekLocked(SeekMode mode, std::string_view key);
  Status Load(const uint8_t* page, uint16_t slot);
  Status Step(bool forward);
  Status LoadAndCopy(const buffer::PageHandle& leaf, uint16_t slot, uint64_t changes);

  BTree* const tree_;
  bool valid_ = false;
  uint32_t leaf_ = 0;
  uint16_t slot_ = 0;
  uint64_t leaf_lsn_ = 0;
  std::string key_, value_;
  std::vector<uint8_t> copy_;  // of leaf_, taken when changes_ was copy_changes_
  uint64_t copy_changes_ = 0;
  bool copy_valid_ = false;
  uint8_t plain_steps_ = 0;  // steps since the seek that read the leaf in place
};

}  // namespace subito::btree
