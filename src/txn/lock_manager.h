// LockManager: row locks for transactions. A lock names one index key
// (space id + encoded key); it is shared (locking reads) or exclusive
// (writes). Locks are held until the transaction ends (ReleaseAll), except
// a key lock its holder gives back with Release (the key lock an insert
// took that a rollback to a savepoint took back, as InnoDB's implicit lock
// goes with the record; an entry lock a locking read took whose wait then
// failed, L11) and a range given back with GiveBackRange (L11).
//
// Rules:
//  L1. Shared is compatible with shared; exclusive with nothing. A
//      transaction's own locks never conflict with its requests: holding X
//      covers S, and S is upgraded to X when no one else holds the key.
//  L2. Grants are first-come: a new request waits behind earlier waiters it
//      conflicts with, so writers are not starved by a stream of readers.
//      An upgrade waits only for the other holders.
//  L3. A request that must wait first checks the waits-for graph; if waiting
//      would close a cycle, the requester is the victim: Lock returns
//      Deadlock and the caller rolls its transaction back.
//  L4. A wait longer than its timeout returns TimedOut (MariaDB's
//      innodb_lock_wait_timeout semantics: the statement fails, the
//      transaction may go on).
//  L9. Row locks held by all transactions take at most the memory budget
//      (SetMemoryBudget; counted as kLockCost bytes plus twice the key per
//      lock): a request for a lock its transaction does not hold yet fails
//      with TooManyLocks past it (InnoDB's "lock table full"), before any
//      entry is made. A request that waited is granted even past it (at
//      most one lock per waiting transaction); range locks are not counted.
//  L5. A request whose `interrupted` check holds returns Interrupted instead
//      of waiting, and a waiter re-checks it whenever Wake names its
//      transaction (KILL of the statement): the statement fails at once.
//  L12. releases() counts the calls that gave up or weakened a key lock
//      (ReleaseAll, Release, Downgrade), each counted under the manager's
//      mutex before the call returns: a caller that reads the count, then
//      gets a key lock, and reads the same count again knows that no
//      transaction gave up a lock in between, so any transaction holding
//      the key exclusive before the lock was granted still holds it.
//
// Range locks (next-key locking, docs/architecture.md): a locking read at
// REPEATABLE READ also holds the key ranges it scanned, so that no other
// transaction can add a key there before it ends (no phantoms):
//  L6. A range lock neither waits for nor blocks key locks or other range
//      locks; it conflicts only with other transactions' inserts (L7, L8).
//  L7. An insert of a key waits (WaitForRanges) while another transaction
//      holds a range of the same space that contains the key, under L3-L5's
//      deadlock detection, timeout and interrupt rules: once before the key
//      goes into the tree, and once after it is there.
//  L11. A range a locking read took on its way to a key whose lock it then
//      failed to get (a timeout, an interrupt) is given back (GiveBackRange),
//      as InnoDB's next-key request, gap and record together, keeps
//      nothing when its wait fails. Ranges taken for keys the read passed
//      or returned stay until the transaction ends, and so do those before
//      a secondary entry whose own lock was granted when the wait for its
//      row fails (InnoDB keeps the secondary record's next-key lock),
//      unless another transaction's uncommitted change is on that entry
//      (InnoDB's implicit lock on it): then the entry's new lock goes too.
//  L8. LockRange never waits; its caller reads the range again after it.
//      An insert's second check and that read are ordered (both do a
//      read-modify-write of one atomic count of ranges, after the range's
//      registration and after the key's insertion): either the read finds the key (whose row lock
//      the reader then waits for), or the second check finds the range and the insert waits for the
//      range's end. No phantom either way. With no range held anywhere, an insert's checks take no
//      mutex.
//  L10. When a key lock request or an insert's range check (L7) is about
//      to wait, the wait hook (if set) hears of each transaction it waits
//      for, once it is queued, under the manager's mutex: every one it
//      names still holds or waits for the key (as InnoDB reports under its
//      lock mutex). The hook must not call back into the manager. MariaDB's
//      parallel replication uses it to roll back, later and from another
//      thread, a transaction that holds a lock an earlier one (in commit
//      order) waits for (thd_rpl_deadlock_check). Holders that block it
//      only after a wake-up (another's upgrade) are not reported.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "subito/status.h"

namespace subito::txn {

using TxnId = uint64_t;
enum class LockMode { kShared, kExclusive };

// Encoded keys from `lo` to `hi`; an absent bound is unbounded.
struct KeyRange {
  std::optional<std::string> lo, hi;
  bool lo_inclusive = true, hi_inclusive = true;
  bool Contains(std::string_view key) const;
  bool Covers(const KeyRange& other) const;  // every key of `other` is in this one
  bool operator==(const KeyRange&) const = default;
};

// What one LockRange call changed in its transaction's ranges of a space
// (L11): nothing (the range was held already), a new range, or the
// transaction's newest range extended at one end (its bound before).
struct RangeGrant {
  enum class Kind { kNone, kAdded, kExtendedHi, kExtendedLo };
  Kind kind = Kind::kNone;
  uint32_t space = 0;
  KeyRange held;  // the transaction's newest range in the space after the call
  std::optional<std::string> old_bound;
  bool old_inclusive = true;
};

struct LockStats {
  uint64_t granted_at_once = 0, waits = 0, deadlocks = 0, timeouts = 0;
  uint64_t refused_at_once = 0;  // busy, and the caller would not wait
  uint64_t interrupted = 0;
  uint64_t ranges = 0;                           // range locks held now (after merging)
  uint64_t insert_waits = 0;                     // inserts that waited for a range lock (L7)
  uint64_t memory_bytes = 0, memory_budget = 0;  // L9
  uint64_t refused_over_budget = 0;
};

class LockManager {
 public:
  LockManager() = default;
  LockManager(const LockManager&) = delete;
  LockManager& operator=(const LockManager&) = delete;
  // L9. 0: no limit.
  void SetMemoryBudget(uint64_t bytes) {
    std::lock_guard lk(mu_);
    budget_ = bytes;
  }
  static constexpr uint64_t kLockCost = 320;
  using WaitHook = std::function<void(TxnId waiter, TxnId holder)>;
  // L10. Set before any transaction begins.
  void SetWaitHook(WaitHook hook) {
    std::lock_guard lk(mu_);
    wait_hook_ = std::move(hook);
  }

  // Waits at most `timeout` (0: not at all, TimedOut at once if the lock is
  // busy; a year or more: no limit), and not at all once `interrupted`
  // (if set) returns true (L5). `interrupted` is called with the manager's
  // mutex held: it must only read a flag.
  // *granted_new (if set): whether txn held no lock on the key before
  // this request granted one.
  Status Lock(TxnId txn, uint32_t space, std::string_view key, LockMode mode,
              std::chrono::milliseconds timeout, const std::function<bool()>& interrupted = nullptr,
              bool* granted_new = nullptr);
  // L12. Acquire: what a transaction did before its locks went, counted
  // here, is seen by the reader of the count.
  uint64_t releases() const { return releases_.load(std::memory_order_acquire); }
  // Ends txn's lock on one key (if it holds one): waiters may take it.
  void Release(TxnId txn, uint32_t space, std::string_view key);
  // Turns txn's exclusive lock on the key (if it holds one) into a shared
  // one: waiting readers may share it.
  void Downgrade(TxnId txn, uint32_t space, std::string_view key);
  // Holds `range` of `space` for txn until ReleaseAll or GiveBackRange (L6, L8, L11). A range
  // that continues or lies within txn's newest range in the space is merged
  // with it.
  RangeGrant LockRange(TxnId txn, uint32_t space, KeyRange range);
  // Undoes `grant` (L11) while txn's newest range in its space is still the
  // one the grant left; otherwise (a later grant changed it) keeps it.
  // Inserts waiting for the range look again.
  void GiveBackRange(TxnId txn, const RangeGrant& grant);
  // Whether any transaction holds a range (a hint: one may be added at once).
  bool AnyRanges() const { return ranges_held_.load(std::memory_order_relaxed) != 0; }
  // L7's check: returns once no other transaction's range of `space`
  // holds `key`.
  Status WaitForRanges(TxnId txn, uint32_t space, std::string_view key,
                       std::chrono::milliseconds timeout,
                       const std::function<bool()>& interrupted = nullptr);
  // Makes txn's wait, if it waits, check its `interrupted` again (L5). Safe
  // from any thread, for any id (a transaction that does not wait is left
  // alone).
  void Wake(TxnId txn);
  // Ends txn's locks. A transaction is driven by one thread at a time: this
  // must not run while the same txn waits in Lock.
  void ReleaseAll(TxnId txn);
  // The mode txn holds on the key, if any (tests, assertions).
  bool Holds(TxnId txn, uint32_t space, std::string_view key, LockMode mode) const;
  LockStats stats() const;

 private:
  struct Request {
    TxnId txn;
    LockMode mode;
  };
  // The transactions holding a key: most keys have one, kept inline (no
  // allocation); more go to `rest`.
  class Holders {
   public:
    const LockMode* Find(TxnId txn) const;
    LockMode* Find(TxnId txn) {
      return const_cast<LockMode*>(static_cast<const Holders*>(this)->Find(txn));
    }
    void Add(TxnId txn, LockMode mode);  // txn holds nothing here yet
    void Erase(TxnId txn);
    bool empty() const { return !first_used_; }
    template <typename Fn>
    void ForEach(Fn&& fn) const {
      if (first_used_) fn(first_.txn, first_.mode);
      for (const Request& r : rest_) fn(r.txn, r.mode);
    }

   private:
    bool first_used_ = false;  // rest_ is empty while this is false
    Request first_{0, LockMode::kShared};
    std::vector<Request> rest_;
  };
  // Made on a key's first wait, and kept while the entry lives.
  struct Waiters {
    std::vector<Request> queue;  // in arrival order
    std::condition_variable cv;
  };
  struct Entry {
    Holders granted;
    std::unique_ptr<Waiters> waiters;
    bool idle() const { return granted.empty() && (!waiters || waiters->queue.empty()); }
  };
  struct HeldRange {
    TxnId txn = 0;
    KeyRange range;
  };
  // What a waiting transaction waits for: a key lock (`name`, `mode`), or
  // an insert intention for `key` in `space`.
  struct Wait {
    bool insert = false;
    std::string name;
    LockMode mode = LockMode::kShared;
    uint32_t space = 0;
    std::string key;
  };
  static std::string Name(uint32_t space, std::string_view key);
  bool Grantable(const Entry& e, TxnId txn, LockMode mode) const;
  // Transactions txn would wait for on e (L1, L2).
  std::vector<TxnId> Blockers(const Entry& e, TxnId txn, LockMode mode) const;
  // Other transactions holding a range of `space` that contains `key` (L7).
  std::vector<TxnId> RangeHolders(TxnId txn, uint32_t space, std::string_view key) const;
  bool WaitWouldDeadlock(TxnId txn, const std::vector<TxnId>& blockers) const;
  // L10. Caller holds mu_.
  void ReportWait(TxnId txn, const std::vector<TxnId>& blockers);
  // Returns Interrupted / TimedOut / Deadlock for a wait that cannot begin
  // or end well, counting it; OK when the caller may wait.
  Status RefuseWait(TxnId txn, const std::vector<TxnId>& blockers,
                    std::chrono::milliseconds timeout, const std::function<bool()>& interrupted);

  mutable std::mutex mu_;
  // Ordered: the keys one transaction locks in bulk (a load, a scan, an
  // UPDATE of many rows) mostly ascend, so consecutive lookups share a path
  // that stays in the CPU's caches, where a hash table's are random.
  std::map<std::string, Entry> table_;
  using Node = std::map<std::string, Entry>::iterator;  // stays valid until its entry is erased
  // The keys each transaction holds, once each (ReleaseAll, L9).
  std::unordered_map<TxnId, std::vector<Node>> held_;
  std::unordered_map<TxnId, Wait> waiting_on_;
  std::unordered_map<uint32_t, std::vector<HeldRange>> ranges_;  // by space
  std::unordered_map<TxnId, std::set<uint32_t>> range_spaces_;   // for ReleaseAll
  std::atomic<uint64_t> ranges_held_{0};  // every space's (L8: read without mu_)
  std::condition_variable ranges_cv_;     // a range released
  std::atomic<uint64_t> releases_{0};     // L12, changed under mu_
  LockStats stats_;
  uint64_t budget_ = 0, bytes_ = 0;  // L9, guarded by mu_
  WaitHook wait_hook_;               // L10, guarded by mu_
  static uint64_t Cost(const std::string& name) { return kLockCost + 2 * name.size(); }
  // Grants txn the key of `node` (which it may hold already, then in a
  // weaker mode) and records it for ReleaseAll (L9's accounting). Returns
  // whether txn held nothing there before.
  bool Grant(Node node, TxnId txn, LockMode mode);
  // txn gives up the key of `node`, which it holds: the entry goes if idle,
  // else its waiters are woken. Caller holds mu_ and erases the node from
  // held_ itself.
  void Drop(Node node, TxnId txn);
};

}  // namespace subito::txn
