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
// merge with a sibling like leaves do.
//
// Overflow chains (chains.cc). A value longer than fits inline (a quarter
// page per record) goes to a chain of pages, named in its leaf record by a
// reference (u32 length, u32 first page). A chain of at most chunk_bytes()
// is written in the mini-transaction that links it; a longer one is first
// written by Prepare, chunk by chunk from its end, each chunk's
// mini-transaction making the part written so far the content of a build
// slot in the space header, and then linked (clearing the slot) in one
// more. A chain that leaves a leaf (replaced, deleted) is never freed in
// that mini-transaction: with ChainMoves (transactions, their rollback and
// recovery's undo) it joins the retired list, from which Restore puts it
// back (undo) and Release hands it to garbage (purge, once no snapshot can
// read it); without, it goes to garbage at once. Garbage is freed in chunks
// by CollectGarbage, which the tree's owner calls (engine: the purge
// thread), so every other change stays one mini-transaction. No value's
// size is bounded by the log or the pool.
//   C1. Every chain is reachable from exactly one of: a leaf record, a build
//       slot, the retired list, the garbage list (each move is one Mtr).
//       The exception: chains of a tree a Builder is filling are reachable
//       from nothing until their leaf is written (builder.h B1: such a tree
//       is dropped whole if it does not finish).
//   C2. A chain is freed only from the garbage list, by CollectGarbage,
//       which first waits until no reader pins it. A reader of a leaf's
//       chain pins it (its first page) before it lets go of the leaf (and
//       tree) latch that made the chain reachable, reads it without them,
//       then unpins it; a chain reaches garbage only once no leaf names it,
//       so no pin can follow the collector's check. A retired chain is read
//       (ReadChain) only by readers whose snapshot keeps the purge from
//       releasing it. (Format-1 chains, freed in the operation that drops
//       them, are read under the latches.)
//   C3. Restore is idempotent: a key already holding the chain is left
//       alone; the chain it replaces is retired, not freed, so an older undo
//       record of the same transaction can restore that one in turn.
//   C4. After a restart no snapshot exists and every loser has been undone:
//       RecoverChains sends the build slots and the whole retired list to
//       garbage, except the chains named by the undo of transactions kept
//       prepared (txn_records.h P1), which their end releases or restores.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
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
  // Whether the key is in the tree: Get without reading the value.
  Result<bool> Contains(std::string_view key);

  // The chains a change took out of leaves (retired) or put back
  // (restored), as references; filled only by changes that committed.
  struct ChainMoves {
    std::vector<std::string> retired, restored;
  };
  class Prepared;
  // Inserts, or replaces the value of an existing key. The chain of the
  // value replaced is retired when moves is given, else freed.
  Status Put(std::string_view key, std::string_view value, ChainMoves* moves = nullptr);
  // As Put, with a value whose chain Prepare wrote.
  Status Put(std::string_view key, Prepared value, ChainMoves* moves = nullptr);
  // Returns false if the key was absent.
  Result<bool> Delete(std::string_view key, ChainMoves* moves = nullptr);
  // Writes the chain of a value longer than chunk_bytes(), not yet linked
  // to any key (in a build slot; at most kBuildSlots at once per tree). It
  // waits for log space between chunks, so the caller must hold nothing
  // that a log relief needs.
  Result<Prepared> Prepare(std::string_view value);
  // Undo (C3): makes key hold the retired chain `ref` again.
  Status Restore(std::string_view key, std::string_view ref, ChainMoves* moves);
  // The reference to key's chain, if its value is a (retirable) chain.
  Result<std::optional<std::string>> ChainOf(std::string_view key);
  // Whether a value of this size may be stored as a chain (else it is
  // inline and ChainOf need not look).
  bool MayChain(size_t key_size, size_t value_size) const {
    return key_size + 1 + value_size > max_record();
  }
  static bool IsChainRef(std::string_view stored);
  // The value of a chain (retired ones too: C2).
  Result<std::string> ReadChain(std::string_view ref);
  // A retired chain no snapshot can read any more goes to garbage.
  Status Release(std::string_view ref);
  // Frees garbage chains, a chunk per mini-transaction, until none is left
  // or `stop` says so.
  Status CollectGarbage(const std::function<bool()>& stop = {});
  bool has_garbage();
  // Cheap: whether a chain went to garbage since CollectGarbage last found
  // none (also after RecoverChains).
  bool garbage_hint() const { return garbage_hint_.load(std::memory_order_relaxed); }
  // InvalidArgument for a key too long for this tree.
  Status CheckKey(std::string_view key) const;
  // C4: at start, after the undo of losers.
  // `kept`, if given, receives the references of `keep` found retired.
  Status RecoverChains(const std::vector<std::string>& keep = {},
                       std::set<std::string>* kept = nullptr);
  // Largest key + value stored inline in a leaf; longer values go to a chain
  // of overflow pages.
  uint32_t max_record() const;
  // Largest value (the length field of a chain reference).
  uint32_t max_value() const { return 0xffffffffu; }
  // The longest chain written in the mini-transaction that links it.
  uint64_t chunk_bytes() const;
  uint32_t root() const { return root_; }
  // Keys in the tree: counted in memory with every committed change, from
  // the space header's copy at open (a statistic, docs/formats/page.md).
  // The copy is written only when the count has moved more than
  // CountSlack(copy) away from it, by a change of the count that holds the
  // header anyway, and by PersistEntries: a change of a key latches its leaf
  // alone. A crash loses at most about CountSlack of the count, which stays
  // off (and is persisted so) until Recount.
  Result<uint64_t> entries();
  static uint64_t CountSlack(uint64_t stored) { return std::max<uint64_t>(64, stored / 32); }
  // Writes the count to the space header if the copy there differs (an
  // owner's clean close; with no change running, the copy is then exact).
  Status PersistEntries();
  // Counts the keys leaf by leaf (the tree latch taken per 64 leaves) and
  // makes that the count, in memory and in the header (ANALYZE TABLE), so a
  // crash's drift goes: exact when no change runs meanwhile; a change during
  // the walk is counted twice where the walk saw it. Corruption when the
  // leaf chain does not ascend.
  Status Recount();
  // Whether the tree holds no key (its root is an empty leaf): exact, from
  // the pages, unlike the count after a crash.
  Result<bool> Empty();
  // Levels: 1 for a lone leaf root.
  Result<uint32_t> height();
  // Whether the tree is a lone empty root leaf, with no free pages and no
  // chains (built, retired or garbage): the state ResetToEmpty restores.
  Result<bool> Pristine();
  // Makes the tree a pristine lone empty root leaf again, in one
  // mini-transaction, whatever it holds: the pages it used besides the root
  // stay in the space, reachable from nothing (not reused). For undoing a
  // bulk insert into a tree that was pristine and that nobody else changed
  // since (txn/txn_records.h, had_before 3). Every leaf hint of the tree
  // dies with it (the tree takes a new id).
  Status ResetToEmpty();

  // Estimates for the optimizer, from one root-to-leaf descent each:
  // Rank is the fraction of keys below `key`, taking sibling subtrees as
  // equally large; RandomKey picks a key by choosing a random child at
  // every level (nullopt: empty tree).
  Result<double> Rank(std::string_view key);
  // Keys in [lo, hi) (hi absent: to the end), counted up to `limit`: one
  // descent, then the leaves' slot counts (no entry is read).
  Result<uint64_t> CountUpTo(std::string_view lo, std::optional<std::string_view> hi,
                             uint64_t limit);
  Result<std::optional<std::string>> RandomKey(uint64_t random);

  class Cursor;
  class Builder;

 private:
  BTree(buffer::BufferPool* pool, uint32_t space_id, uint32_t root, uint64_t entries)
      : pool_(pool),
        space_(space_id),
        root_(root),
        id_(NextId()),
        entries_(entries),
        stored_entries_(entries) {}
  // Whether `count` has moved past the slack of the header's copy.
  bool CountDrifted(uint64_t count) const {
    const uint64_t stored = stored_entries_.load(std::memory_order_relaxed);
    const int64_t off = static_cast<int64_t>(count - stored);
    return static_cast<uint64_t>(off < 0 ? -off : off) > CountSlack(NotBelowZero(stored));
  }
  // The in-memory count may go below zero after a crash took increments
  // that later deletes take again; it reads (and is written) as zero.
  static uint64_t NotBelowZero(uint64_t count) {
    return static_cast<int64_t>(count) < 0 ? 0 : count;
  }
  static uint64_t NextId() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }
  struct Entry {
    std::string key, value;
  };
  Result<buffer::PageHandle> Fetch(uint32_t page_no, buffer::Latch latch);
  Status CheckNode(uint32_t page_no, const buffer::PageHandle& h) const;
  // Root-to-leaf page numbers for key.
  Result<std::vector<uint32_t>> Path(std::string_view key);
  // The leaf for key, latched with `latch` (the nodes above are read shared,
  // one at a time): one fetch per level; with `path`, the pages descended
  // through, root to leaf, are appended to it. The caller holds latch_.
  Result<buffer::PageHandle> LeafPage(std::string_view key, buffer::Latch latch,
                                      std::vector<uint32_t>* path = nullptr);
  // The leaf for key from the hint if it holds, else by a descent, which
  // leaves the hint for the next lookup of key.
  Result<buffer::PageHandle> FindLeaf(std::string_view key, buffer::Latch latch);
  // A leaf that holds `key`'s place, fetched without a descent when this
  // thread last met `key` in this tree (NoteLeaf) and the leaf, checked
  // again now, still spans it; nullopt otherwise. A key past the last leaf's
  // end (or before the first's) takes the hint of the key met before it
  // there: rows loaded in key order descend once per leaf, not per row. The
  // caller holds latch_.
  std::optional<buffer::PageHandle> HintedLeaf(std::string_view key, buffer::Latch latch);
  // `node`: the leaf's bytes (whether it is the first or last leaf).
  void NoteLeaf(std::string_view key, uint32_t leaf, const uint8_t* node);
  class Op;
  Status InsertAt(Op& op, std::vector<uint32_t> path, Entry entry);
  // The key's leaf, exclusively latched in op; is_root: whether that leaf
  // is the root.
  Result<buffer::PageHandle*> LeafFor(Op& op, std::string_view key, bool* is_root);
  Result<bool> PutInLeaf(std::string_view key, std::string_view value);
  Result<std::optional<bool>> DeleteInLeaf(std::string_view key);
  Result<uint32_t> WriteChain(Op& op, std::string_view value);
  // A stored value leaves its leaf: a chain is retired or made garbage.
  Status DropStored(Op& op, std::string_view stored);
  Status FreeFormat1Chain(Op& op, uint32_t page_no);
  Result<buffer::PageHandle*> ChainHead(Op& op, uint32_t page_no);
  Status PushRetired(Op& op, uint32_t head);
  Status UnlinkRetired(Op& op, uint32_t head);
  Status PushGarbage(Op& op, uint32_t head);
  Status FreeGarbageChunk(Op& op, buffer::PageHandle* meta, uint32_t head, uint32_t per);
  uint32_t ChunkPages() const;
  uint32_t AcquireSlot();
  void ReleaseSlot(uint32_t slot);
  void DiscardSlot(uint32_t slot);
  Result<std::string> ReadValue(std::string_view stored);
  Status Rebalance(Op& op, std::vector<uint32_t> path);
  Status RemoveEmptyLeaf(Op& op, std::vector<uint32_t> path, uint32_t prev, uint32_t next);
  Status MergeInternal(Op& op, std::vector<uint32_t> path);
  Status CollapseRoot(Op& op);

  buffer::BufferPool* const pool_;
  const uint32_t space_;
  const uint32_t root_;
  // Unique in the process (leaf hints); ResetToEmpty takes a new one, under
  // latch_ held exclusively.
  std::atomic<uint64_t> id_;
  TreeLatch latch_;  // shared: reads and leaf-only changes; exclusive: structure
  // Counts committed changes to the tree's pages (bumped after each Op's
  // Mtr commits, before its latches go). A cursor that saw the count before
  // copying a leaf may keep reading the copy while the count is unchanged.
  std::atomic<uint64_t> changes_{0};
  // The key count as of the last committed Op (added after its Mtr commits,
  // while it still latches its pages; two's complement: see NotBelowZero),
  // and the count last written to the space header (or read from it: the
  // header holds it not below zero).
  std::atomic<uint64_t> entries_;
  std::atomic<uint64_t> stored_entries_;
  std::mutex recount_mu_;  // one Recount at a time
  std::mutex slot_mu_;     // build slots in use (bits)
  std::condition_variable slot_cv_;
  uint32_t slots_busy_ = 0;
  std::mutex garbage_mu_;  // one CollectGarbage at a time
  // Set when a chain goes to garbage, cleared when the list is found empty:
  // tells the owner that CollectGarbage has work.
  std::atomic<bool> garbage_hint_{false};
  // Chains being read outside the latches (C2), by first page.
  void Pin(uint32_t head);
  void Unpin(uint32_t head);
  bool Pinned(uint32_t head);
  std::mutex pins_mu_;
  std::condition_variable unpinned_;
  std::multiset<uint32_t> pins_;
  friend class Cursor;
  friend class Builder;
};

// A chain written by Prepare, held in a build slot until Put links it;
// destroyed unlinked, it goes to garbage.
class BTree::Prepared {
 public:
  Prepared(Prepared&& o) noexcept : tree_(o.tree_), slot_(o.slot_), ref_(std::move(o.ref_)) {
    o.tree_ = nullptr;
  }
  Prepared& operator=(Prepared&&) = delete;
  Prepared(const Prepared&) = delete;
  ~Prepared() {
    if (tree_ != nullptr) tree_->DiscardSlot(slot_);
  }

 private:
  friend class BTree;
  friend class BTree::Builder;
  Prepared(BTree* tree, uint32_t slot) : tree_(tree), slot_(slot) {}
  BTree* tree_;  // null once linked or moved from
  uint32_t slot_;
  std::string ref_;
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
  ~Cursor();
  Cursor(const Cursor&) = delete;
  Cursor& operator=(const Cursor&) = delete;
  Status Seek(SeekMode mode, std::string_view key = {});
  Status Next();
  Status Prev();
  bool Valid() const { return valid_; }
  // Views, which may point into the cursor's copy of its leaf: they stay
  // put until the cursor is called again (any call but the accessors), and
  // are kept by copying them. After a call that leaves the cursor invalid
  // they still show the entry before.
  std::string_view key() const { return key_; }
  std::string_view value() const { return value_; }
  // Forgets the place and the leaf copy (the pages it read are no longer
  // the ones to read: buffer::ReadAsOf); the next call must be a Seek.
  void Reset() {
    valid_ = false;
    copy_valid_ = false;
  }

 private:
  Status SeekLocked(SeekMode mode, std::string_view key);
  Status Load(const uint8_t* page, uint16_t slot);
  // Reads the chain Load left pending, after the latches are released.
  Status Finish(Status st);
  Status Step(bool forward);
  Status LoadAndCopy(const buffer::PageHandle& leaf, uint16_t slot, uint64_t changes);
  // A forward scan steps from leaf `from` to leaf `to`. Once it has stepped
  // to a leaf a few pages further in the file kSequentialHops times in a
  // row (the leaves of a built tree or of an ascending load lie so), the
  // pages from `to` on are read ahead in one read (BufferPool::ReadAhead):
  // twice as many as the hops so far, up to kReadAheadPages, so that a
  // short range scan reads little more than it uses.
  void NoteLeafHop(uint32_t from, uint32_t to);
  static constexpr uint32_t kSequentialGap = 4;
  static constexpr uint32_t kSequentialHops = 4;
  static constexpr uint32_t kReadAheadPages = 64;

  BTree* const tree_;
  bool valid_ = false;
  uint32_t leaf_ = 0;
  uint16_t slot_ = 0;
  uint64_t leaf_lsn_ = 0;
  // The current entry: in copy_ when it was read there, else in key_buf_
  // and value_buf_ (a latched frame's bytes are copied out; a chain's value
  // is read into value_buf_).
  std::string_view key_, value_;
  std::string key_buf_, value_buf_;
  // Of leaf_, taken when changes_ was copy_changes_: its header and slots,
  // then its heap (the gap between is never read, nor initialized).
  std::unique_ptr<uint8_t[]> copy_;
  uint64_t copy_changes_ = 0;
  bool copy_valid_ = false;
  uint8_t plain_steps_ = 0;       // steps since the seek that read the leaf in place
  uint32_t sequential_hops_ = 0;  // NoteLeafHop's, since the last Seek
  std::string pending_ref_;       // a chain to read once the latches are gone (pinned)
};

}  // namespace subito::btree
