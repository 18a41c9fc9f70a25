// The B+-tree tests' harness: the storage stack with the tree of space 1,
// and checks of a tree against a std::map model.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "btree/btree.h"
#include "storage_stack.h"

namespace subito::btree::test_harness {

inline constexpr uint32_t kPs = 4096;

// The storage stack plus the tree of space 1 (created, or opened after
// page recovery).
struct Harness : test::StorageStack {
  explicit Harness(const std::string& dir, uint64_t pool_pages = 32, uint64_t log_bytes = 4 << 20)
      : StorageStack(dir, {kPs, pool_pages * kPs, 4096 + log_bytes, 1, 16}) {}
  Status Open(bool create) {
    SUBITO_RETURN_IF_ERROR(StorageStack::Open());
    if (!create) SUBITO_RETURN_IF_ERROR(Recover());
    auto t = create ? BTree::Create(pool.get(), 1) : BTree::Open(pool.get(), 1);
    if (!t.ok()) return t.status();
    tree = std::move(*t);
    return Status::OK();
  }
  // flush: a clean close (the tree's count to its header, every page
  // written); else as a crash leaves it.
  void Close(bool flush) {
    if (flush && tree) {
      EXPECT_TRUE(tree->PersistEntries().ok());
    }
    tree.reset();
    StorageStack::Close(flush);
  }
  std::unique_ptr<BTree> tree;
};

using Model = std::map<std::string, std::string>;

inline void ExpectScansMatch(BTree& tree, const Model& m) {
  BTree::Cursor c(&tree);
  ASSERT_TRUE(c.Seek(SeekMode::kFirst).ok());
  for (auto it = m.begin(); it != m.end(); ++it) {
    ASSERT_TRUE(c.Valid()) << "forward scan ended early";
    ASSERT_EQ(c.key(), it->first);
    ASSERT_EQ(c.value(), it->second);
    ASSERT_TRUE(c.Next().ok());
  }
  EXPECT_FALSE(c.Valid());
  ASSERT_TRUE(c.Seek(SeekMode::kLast).ok());
  for (auto it = m.rbegin(); it != m.rend(); ++it) {
    ASSERT_TRUE(c.Valid()) << "backward scan ended early";
    ASSERT_EQ(c.key(), it->first);
    ASSERT_TRUE(c.Prev().ok());
  }
  EXPECT_FALSE(c.Valid());
}

// How the tree in dir was left: its header's count is exact after a clean
// close, within BTree::CountSlack after a crash.
enum class Left { kClean, kCrashed };

// Opens the tree in dir again (page recovery first) and compares it with m.
// After a crash the count is recounted: the close then leaves it exact.
inline void ExpectReopenedTreeMatches(const std::string& dir, const Model& m,
                                      Left left = Left::kClean) {
  Harness again(dir, 64);
  ASSERT_TRUE(again.Open(false).ok());
  ExpectScansMatch(*again.tree, m);
  const uint64_t count = *again.tree->entries();
  if (left == Left::kClean) {
    EXPECT_EQ(count, m.size());
  } else {
    const uint64_t off = count > m.size() ? count - m.size() : m.size() - count;
    EXPECT_LE(off, BTree::CountSlack(count)) << count << " keys counted for " << m.size();
    ASSERT_TRUE(again.tree->Recount().ok());
    EXPECT_EQ(*again.tree->entries(), m.size());
  }
  again.Close(true);
}

}  // namespace subito::btree::test_harness
