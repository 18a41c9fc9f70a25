// Multi-version concurrency control, in DRAM only.
//
// A B-tree always holds each key's newest value, committed or not (its
// writer holds the key's exclusive lock until it ends). For each key changed
// by a transaction that some snapshot may not see yet, a VersionStore keeps
// a chain of versions, oldest first: the writer, and the value the key had
// before that write (nullopt: absent). A reader goes from the tree's value
// back to the newest value its ReadView sees (by binary search, V5).
//
// Invariants:
//  V1. A writer adds its version before it changes the tree, and a reader
//      reads the tree before the chain: a reader that saw a value written by
//      a transaction it must not see also finds that writer's version.
//  V2. A committed writer's version is removed (with every older version of
//      the key) only when every open snapshot sees the writer: it can no
//      longer change what any reader computes.
//  V3. An aborted writer's version stays until every open snapshot was taken
//      after the rollback ended (a reader may have read the tree before the
//      rollback restored it); readers skip it meanwhile.
//
//  V4. Past VersionBudget::limit bytes of versions, the purge cuts the
//      oldest open snapshot that holds it back (raises the floor above its
//      read_ts; every snapshot with that read_ts goes), again while over
//      budget, so the versions only those snapshots needed go. A cut
//      snapshot's later consistent reads fail with SnapshotTooOld instead
//      of reading values it must not see (CheckSnapshot). What stays over
//      the budget is what no snapshot holds: versions of writers still
//      active. Memory never grows without bound under a snapshot left open.
//  V5. A key's writers are serialized by its exclusive lock, so along its
//      chain (oldest first) the writers' end timestamps never decrease and
//      only the newest writer may still be active: a read of an old
//      snapshot finds its version by binary search, not by walking every
//      newer one.
//  V6. With pages as of an LSN enabled (TxnSystem::EnableAsOf), V4 moves the
//      snapshot instead of cutting it: it begins an epoch L
//      (buffer/page_versions.h), then copies, for every key whose chain
//      holds a writer the snapshot does not see, the value the snapshot
//      sees into its overlay (AsOfSnapshot). From then on the snapshot reads
//      the trees as of L with the overlay over them, and the floor rises past
//      it as for a cut, so the versions it held go. Exact: a key changed
//      before L by a writer the snapshot does not see has that writer's
//      version in its chain when the overlay is built (after L: V1, and the
//      purge kept every version this snapshot did not see), so the overlay
//      holds the key; the tree as of L holds, for any other key, every change
//      made before L, all by writers the snapshot sees (changes after L are
//      not in it). Memory: one page image per page changed after L, whatever
//      the number of changes, instead of a version per change, and the
//      overlay, both counted against the page budget; past it the epoch is
//      cut, the purge drops the snapshot's overlay, and its reads fail with
//      SnapshotTooOld. (The overlay is built under mu_: commits wait for it.)
//      Only a snapshot of transactions that have not written reads so: the
//      trees as of L do not hold a writer's own later changes.
//
// A version's `before` is the value's bytes, or for a value stored as an
// overflow chain, the chain's reference (the write retired the chain,
// btree.h): Visible reads such a chain from the index's tree. A chain
// retired by a transaction is released (TxnSystem::End, Purge) only once
// every open snapshot not cut sees that transaction's end, so no reader
// that may pick the version meets a freed chain (V2); a cut reader may, and
// its read then fails with SnapshotTooOld whatever the chain held (V4).
//
// Nothing here is persistent. After a restart no snapshot exists and the
// trees hold only committed values (recovery undoes the rest): restart reads
// nothing here, whatever the size of the data.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "btree/btree.h"
#include "buffer/buffer_pool.h"
#include "txn/lock_manager.h"

namespace subito::txn {

struct TxnState {
  explicit TxnState(TxnId txn_id) : id(txn_id) {}
  const TxnId id;
  // 0 while active, then the commit (or abort) timestamp. `aborted` is set
  // before end_ts is published.
  std::atomic<uint64_t> end_ts{0};
  std::atomic<bool> aborted{false};
};

// What a consistent read sees: writers that committed at or before read_ts,
// and its own transaction's writes.
struct ReadView {
  uint64_t read_ts = 0;
  const TxnState* self = nullptr;
  bool Sees(const TxnState& writer) const {
    if (&writer == self) return true;
    const uint64_t ts = writer.end_ts.load(std::memory_order_acquire);
    return ts != 0 && ts <= read_ts && !writer.aborted.load(std::memory_order_acquire);
  }
};

class VersionStore;

// The memory the version stores of one database hold, and its limit (V4).
struct VersionBudget {
  explicit VersionBudget(uint64_t limit_bytes) : limit(limit_bytes) {}
  const uint64_t limit;  // 0: none
  std::atomic<int64_t> bytes{0};
  // Snapshots with a read_ts below it were cut, or moved to pages as of an
  // LSN (V6).
  std::atomic<uint64_t> floor{0};
  std::atomic<uint64_t> snapshots_cut{0}, snapshots_moved{0};
  // Every store charging this budget (V6 builds overlays from all).
  std::mutex stores_mu;
  std::set<VersionStore*> stores;
  bool over() const {
    const int64_t b = bytes.load(std::memory_order_relaxed);
    return limit != 0 && b > 0 && static_cast<uint64_t>(b) > limit;
  }
};

// A snapshot moved to pages as of an LSN (V6).
struct AsOfSnapshot {
  struct Value {
    std::optional<std::string> bytes;  // nullopt: the key is absent
    bool chain = false;                // bytes are a chain reference
  };
  using Overlay = std::map<std::string, Value, std::less<>>;
  uint64_t read_ts = 0;
  std::shared_ptr<buffer::PageVersions::Epoch> epoch;
  std::unordered_map<uint64_t, Overlay> overlays;  // by VersionStore::id()
  uint64_t overlay_bytes = 0;
  // SnapshotTooOld once the epoch was cut (its page images went).
  Status Check() const;
};

class VersionStore {
 public:
  explicit VersionStore(std::shared_ptr<VersionBudget> budget = nullptr);
  ~VersionStore();
  VersionStore(const VersionStore&) = delete;
  VersionStore& operator=(const VersionStore&) = delete;
  // The index's tree, for chains; detached before the tree goes (DROP).
  void AttachTree(btree::BTree* tree) {
    std::unique_lock lock(tree_mu_);
    tree_ = tree;
    detaching_.store(false);
  }
  // A garbage collection under way stops at its next chunk.
  void DetachTree() {
    detaching_.store(true);
    std::unique_lock lock(tree_mu_);
    tree_ = nullptr;
  }
  // Records that `writer` is about to change key, whose value is `before`
  // (a chain reference if before_chain). Nothing is added if the key's
  // newest version is already writer's; returns whether one was added
  // (writer's first change of the key, or its first since HandOver or
  // DropVersionsOf took its version away).
  bool Add(std::string_view key, const std::shared_ptr<TxnState>& writer,
           std::optional<std::string> before, bool before_chain = false);
  // OK, or SnapshotTooOld once the view's snapshot was cut (V4). A read of
  // a snapshot checks this after it has looked at the tree and the versions
  // (as Visible does): whatever the purge removed for a cut snapshot was
  // removed after the cut, so a read that finds its snapshot not cut at its
  // end read nothing the purge had taken.
  Status CheckSnapshot(const ReadView& view) const;
  // The value `view` sees, given the tree's value read just before (V1).
  // SnapshotTooOld if the view's snapshot was cut (V4), before or during
  // the call.
  Result<std::optional<std::string>> Visible(std::string_view key,
                                             std::optional<std::string> latest,
                                             const ReadView& view) const;
  // Whether `view` sees the tree's value of key, read just before (V1),
  // as it is: no version of key is kept. Visible would then return that
  // value; a caller that holds it as a view need not copy it. Checks the
  // snapshot (V4) as Visible does.
  Result<bool> SeesTreeValue(std::string_view key, const ReadView& view) const;
  // Hands a chain retired by an ended transaction to the tree's garbage
  // and frees it (no-op once the tree is detached).
  Status ReleaseChain(std::string_view ref);
  // Frees the tree's garbage chains (after a restart: RecoverChains), until
  // none is left, `stop` says so or the tree is being detached.
  Status CollectGarbage(const std::function<bool()>& stop = {});
  // The nearest key with versions after (forward) or before key; with
  // `inclusive`, key itself counts. No key: the first (forward) or last.
  std::optional<std::string> Neighbor(std::optional<std::string_view> key, bool forward,
                                      bool inclusive) const;
  // The writer rolled back (to a savepoint) its first change of key: the
  // tree holds the version's `before` again. The version passes to
  // `stand_in`, a state with the writer's id that the rollback ends,
  // aborted, once every key it takes back is back (TxnSystem::End): every
  // reader, the writer included, skips it from then on, and readers that
  // read the tree before the key's undo still find it (V3). The writer may
  // then give up the key's lock, and another transaction's version follow
  // it (V5 holds: the stand-in has ended, after every older writer).
  void HandOver(std::string_view key, const TxnState* writer,
                const std::shared_ptr<TxnState>& stand_in);
  // The writer's index was emptied by the undo of its bulk insert (txn
  // records, had_before 3), before which the index had no version: every
  // version of the writer goes (their `before` values were the writer's
  // own rows, which no longer exist anywhere). So do the versions it
  // handed to stand-ins (HandOver), which carry its id.
  void DropVersionsOf(const TxnState* writer);
  // Whether the key's newest version is another transaction's that has not
  // ended (its change may still be rolled back).
  bool ChangedByActiveOther(std::string_view key, const TxnState* self) const;
  // Whether the key has versions, every one an aborted writer's (or a
  // stand-in's), and the oldest one's value before it was absent: no
  // committed row had the key since (inserts taken back).
  bool AbortedInsertsOnly(std::string_view key) const;
  // V2, V3 for each key, given the oldest open snapshot's read_ts. The
  // store's lock is taken once per kPurgeBatch keys, not once per key: a
  // reader of the store (a scan checking each row's chain) waits at most one
  // batch, and the purge of a large transaction's keys does not trade the
  // lock with it key by key.
  static constexpr size_t kPurgeBatch = 64;
  void Purge(std::span<const std::string_view> keys, uint64_t oldest_read_ts);
  // V6: the values a snapshot at read_ts sees where they differ from the
  // trees' (a writer it does not see changed them).
  AsOfSnapshot::Overlay OverlayFor(uint64_t read_ts) const;
  // V6: the value `as_of` sees, given the tree's value as of its epoch.
  // Chains are read as of the epoch (the caller is in its ReadAsOf scope).
  Result<std::optional<std::string>> VisibleAsOf(const AsOfSnapshot& as_of, std::string_view key,
                                                 std::optional<std::string> latest) const;
  // V6: Neighbor among the keys of `as_of`'s overlay of this store.
  std::optional<std::string> NeighborAsOf(const AsOfSnapshot& as_of,
                                          std::optional<std::string_view> key, bool forward,
                                          bool inclusive) const;
  size_t keys() const;
  // Unique among the stores of this process (a key that outlives the store).
  uint64_t id() const { return id_; }
  // Versions examined by Visible since the start (V5: a test's measure).
  uint64_t versions_examined() const { return examined_.load(std::memory_order_relaxed); }

 private:
  struct Version {
    std::shared_ptr<TxnState> writer;
    std::optional<std::string> before;
    bool before_chain = false;
  };
  // A key's versions, oldest first (V5). Most keys have one at a time (a
  // writer's, purged soon after it ends): it is kept inline, so a key's
  // first version allocates no vector.
  class Chain {
   public:
    bool empty() const { return n_ == 0; }
    size_t size() const { return n_; }
    Version& operator[](size_t i) { return i == 0 ? first_ : more_[i - 1]; }
    const Version& operator[](size_t i) const { return i == 0 ? first_ : more_[i - 1]; }
    const Version& front() const { return first_; }
    Version& back() { return (*this)[n_ - 1]; }
    const Version& back() const { return (*this)[n_ - 1]; }
    void push_back(Version v) {
      if (n_ == 0) {
        first_ = std::move(v);
      } else {
        more_.push_back(std::move(v));
      }
      ++n_;
    }
    // Keeps the oldest n (n <= size()).
    void resize(size_t n) {
      if (n == 0) first_ = Version{};
      more_.resize(n > 0 ? n - 1 : 0);
      n_ = n;
    }

   private:
    Version first_;
    std::vector<Version> more_;
    size_t n_ = 0;
  };
  // What a version and a key cost against the budget (V4).
  static int64_t Cost(const Version& v) {
    return static_cast<int64_t>(sizeof(Version) + (v.before ? v.before->size() : 0));
  }
  // Versions [0, top) of chain c (every writer ended, V5): the count of the
  // oldest ones `view` sees, up to the first it does not. Adds the versions
  // looked at to *examined.
  static size_t SeenBelow(const Chain& c, size_t top, const ReadView& view, uint64_t* examined);
  // `value`, unless the view was cut meanwhile (V4).
  Result<std::optional<std::string>> CheckedValue(std::optional<std::string> value,
                                                  const ReadView& view) const;
  // Purge's work for one key; returns the bytes freed. Caller holds mu_.
  int64_t PurgeLocked(std::string_view key, uint64_t oldest_read_ts);
  static int64_t KeyCost(std::string_view key) {
    return static_cast<int64_t>(key.size() + 96);  // the map node, roughly
  }
  void Charge(int64_t bytes) {
    if (budget_) budget_->bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  const std::shared_ptr<VersionBudget> budget_;
  const uint64_t id_;
  mutable std::atomic<uint64_t> examined_{0};
  mutable std::shared_mutex tree_mu_;  // exclusive: attach, detach
  btree::BTree* tree_ = nullptr;
  std::atomic<bool> detaching_{false};
  mutable std::shared_mutex mu_;
  // chains_.size(), readable without mu_: readers of an index with no old
  // versions (the common case) skip the lock. Changed under mu_; a reader
  // that saw a tree change through its page latch also sees the count
  // that the writer raised before making it (V1).
  std::atomic<size_t> chain_count_{0};
  std::map<std::string, Chain, std::less<>> chains_;
};

// Timestamps, open snapshots and the purge queue shared by all transactions.
class TxnSystem {
 public:
  explicit TxnSystem(TxnId first_id, std::shared_ptr<VersionBudget> budget = nullptr)
      : budget_(std::move(budget)), next_id_(first_id) {}
  std::shared_ptr<TxnState> Begin() {
    return std::make_shared<TxnState>(next_id_.fetch_add(1, std::memory_order_relaxed));
  }
  // A snapshot: its read_ts stays registered until CloseSnapshot.
  uint64_t OpenSnapshot();
  // V6: from now on, snapshots over the budget move to pages as of an LSN
  // of this pool instead of being cut.
  void EnableAsOf(buffer::BufferPool* pool) {
    std::lock_guard lock(mu_);
    pool_ = pool;
  }
  // The snapshot's state once it moved to pages as of an LSN (V6); null if
  // it did not (it reads the versions, or it was cut).
  std::shared_ptr<const AsOfSnapshot> AsOf(uint64_t read_ts) const;
  // Snapshots that moved and are still open, and their overlays' bytes.
  uint64_t moved_snapshots() const;
  uint64_t overlay_bytes() const;
  // One more reference to an open snapshot (each needs its CloseSnapshot).
  void RetainSnapshot(uint64_t read_ts);
  void CloseSnapshot(uint64_t read_ts);
  // The latest timestamp handed out.
  uint64_t Now() const {
    std::lock_guard lock(mu_);
    return clock_;
  }
  using KeyRef = std::pair<std::shared_ptr<VersionStore>, std::string>;
  // Publishes the writer's end (commit: visible to snapshots opened from now
  // on) and queues the keys it wrote and the chains it retired (as
  // references) for purge. An aborted writer's end record is durable by
  // now: its undo, which names those chains, will not run again.
  void End(const std::shared_ptr<TxnState>& writer, bool committed, std::vector<KeyRef> keys,
           std::vector<KeyRef> chains = {});
  // Purges the keys and releases the chains of every ended transaction that
  // all open snapshots see. Returns the number of keys visited. `stop`
  // cuts a long garbage collection short (the next start finishes it).
  size_t Purge(const std::function<bool()>& stop = {});
  // Chains whose release failed (freed at the next start instead).
  uint64_t chain_release_failures() const {
    return chain_release_failures_.load(std::memory_order_relaxed);
  }
  size_t purge_backlog() const;
  uint64_t active_snapshots() const;

 private:
  struct Ended {
    uint64_t end_ts = 0;
    std::vector<KeyRef> keys, chains;
  };
  std::atomic<uint64_t> chain_release_failures_{0};
  uint64_t OldestReadTs() const;  // caller holds mu_
  // V4: cuts the oldest snapshots that hold back the purge while the
  // versions are over budget (V6: moves them). Caller holds mu_.
  void CutSnapshotsOverBudget();
  // V6: the snapshot at read_ts moves to pages as of an LSN. Caller holds mu_.
  void MoveSnapshot(uint64_t read_ts);
  const std::shared_ptr<VersionBudget> budget_;
  std::atomic<TxnId> next_id_;
  mutable std::mutex mu_;
  uint64_t clock_ = 0;
  // Open snapshots: read_ts -> how many. Snapshots opened between two
  // commits share one entry (no allocation under mu_ for them).
  std::map<uint64_t, uint64_t> snapshots_;
  uint64_t open_snapshots_ = 0;
  buffer::BufferPool* pool_ = nullptr;                       // V6, if enabled
  std::map<uint64_t, std::shared_ptr<AsOfSnapshot>> moved_;  // by read_ts, while open
  std::deque<Ended> ended_;                                  // in end_ts order
  std::mutex purge_mu_;                                      // one purge at a time
};

}  // namespace subito::txn
