// LockManager: row locks for transactions. A lock names one index key
// (space id + encoded key); it is shared (locking reads) or exclusive
// (writes). Locks are held until the transaction ends (ReleaseAll).
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
//  L5. A request whose `interrupted` check holds returns Interrupted instead
//      of waiting, and a waiter re-checks it whenever Wake names its
//      transaction (KILL of the statement): the statement fails at once.
//
// Gap locking (docs/architecture.md): Subito locks keys only, never the
// gaps between them. Consistent (MVCC) reads need no locks; locking reads
// (FOR UPDATE / LOCK IN SHARE MODE) at REPEATABLE READ can therefore see
// rows inserted by others after they ran, where InnoDB's next-key locks
// would block the insert.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "subito/status.h"

namespace subito::txn {

using TxnId = uint64_t;
enum class LockMode { kShared, kExclusive };

struct LockStats {
  uint64_t granted_at_once = 0, waits = 0, deadlocks = 0, timeouts = 0;
  uint64_t refused_at_once = 0;  // busy, and the caller would not wait
  uint64_t interrupted = 0;
};

class LockManager {
 public:
  LockManager() = default;
  LockManager(const LockManager&) = delete;
  LockManager& operator=(const LockManager&) = delete;

  // Waits at most `timeout` (0: not at all, TimedOut at once if the lock is
  // busy; a year or more: no limit), and not at all once `interrupted`
  // (if set) returns true (L5). `interrupted` is called with the manager's
  // mutex held: it must only read a flag.
  Status Lock(TxnId txn, uint32_t space, std::string_view key, LockMode mode,
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
  struct Entry {
    std::map<TxnId, LockMode> granted;
    std::vector<Request> waiting;  // in arrival order
    std::condition_variable cv;
  };
  static std::string Name(uint32_t space, std::string_view key);
  bool Grantable(const Entry& e, TxnId txn, LockMode mode) const;
  // Transactions txn would wait for on e (L1, L2).
  std::vector<TxnId> Blockers(const Entry& e, TxnId txn, LockMode mode) const;
  bool WaitWouldDeadlock(TxnId txn, const std::vector<TxnId>& blockers) const;

  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> table_;
  std::unordered_map<TxnId, std::set<std::string>> held_;  // for ReleaseAll
  std::unordered_map<TxnId, std::pair<std::string, LockMode>> waiting_on_;
  LockStats stats_;
};

}  // namespace subito::txn
