// BTree::Builder: fills an empty tree from entries in ascending key order,
// bottom up. Each node is filled in memory (to 15/16 of its page, so that
// later inserts do not split every node at once) and written once, as one
// mini-transaction of its own that logs the node's image, instead of one
// descent, one leaf copy and one log record per entry.
//
// Invariants:
//   B1. Until Finish, no page the builder writes is reachable from the
//       root: the tree reads as empty, and its key count is unchanged.
//       Finish's last mini-transaction writes the top node's records into
//       the root page (the root never moves) and the count into the space
//       header, so a crash or an error leaves either the whole tree or an
//       empty one beside unreachable pages. Its callers build trees that
//       nobody uses before they finish (a table being loaded, an index
//       being created), which are dropped whole if they do not.
//   B2. Keys strictly ascend (Add refuses any other with InvalidArgument
//       and changes nothing), so the tree holds no duplicate.
//   B3. The tree is empty when the builder begins and nobody else changes
//       it until Finish returns.
//   B4. A node is written only once its right sibling's page is known:
//       leaves are linked both ways as in any tree, the last leaf's next
//       is 0. A node's separator in its parent is the first key of the
//       node to its right (full keys, no truncation).
// Values too long for a leaf go to overflow chains as Put would write them,
// reachable from nothing until their leaf is written (an exception to C1 in
// btree.h that B1 makes harmless: an unfinished tree is dropped whole). New
// pages come from the end of the space, never from its free list (B3: an
// empty tree; a table that once had rows keeps its freed pages).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "btree/btree.h"

namespace subito::btree {

class BTree::Builder {
 public:
  // The first Add fails with InvalidArgument if the tree is not empty, and
  // Finish if it changed meanwhile (B3).
  explicit Builder(BTree* tree);
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  Status Add(std::string_view key, std::string_view value);
  // Makes everything added the tree's content (B1). The builder is spent.
  Status Finish();
  uint64_t added() const { return added_; }
  // The last key added (empty before the first).
  const std::string& last_key() const { return last_key_; }

 private:
  // The node being filled at one level; page_no 0 while it has none (the
  // first node of a level gets a page only if the level grows a second
  // node; else it becomes the root).
  struct Level {
    std::vector<uint8_t> image;
    uint32_t page_no = 0;
  };
  void Begin(uint32_t level);
  bool Fits(uint32_t level, size_t key, size_t value) const;
  // Appends a record to the level's node, which has room (Fits).
  void Append(uint32_t level, std::string_view key, std::string_view value);
  // In the parent level: `right` follows `left` from `key` on.
  Status AddSeparator(uint32_t level, std::string_view key, uint32_t left, uint32_t right);
  // The level's node is full: it gets its page (if it has none yet) and
  // the page of the node that follows it, is written, and that node
  // begins (leaves linked both ways, B4). Returns the two pages.
  Result<std::pair<uint32_t, uint32_t>> CloseNode(uint32_t level);
  Result<uint32_t> NewPage();
  Status CheckEmpty();
  // Writes the level's node at its page, one mini-transaction.
  Status WriteNode(uint32_t level);
  // The leaf value for `value`: inline, or a chain reference.
  Result<std::string> Store(std::string_view key, std::string_view value);

  BTree* const t_;
  const uint32_t ps_;
  std::vector<Level> levels_;  // by node level, 0: leaves
  std::string last_key_;
  uint64_t added_ = 0;
  bool spent_ = false;
  Status error_;  // the first failure; every later call returns it
};

}  // namespace subito::btree
