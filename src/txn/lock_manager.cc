#include "txn/lock_manager.h"

#include <algorithm>

#include "util/strings.h"

namespace subito::txn {
namespace {
bool Compatible(LockMode a, LockMode b) {
  return a == LockMode::kShared && b == LockMode::kShared;
}

Status InterruptedWait(TxnId txn) {
  return Status::Interrupted(
      StrFormat("lock wait of transaction %llu interrupted", static_cast<unsigned long long>(txn)));
}
}  // namespace

std::string LockManager::Name(uint32_t space, std::string_view key) {
  std::string n(4, '\0');
  for (int i = 0; i < 4; ++i) n[i] = static_cast<char>(space >> (8 * i));
  n.append(key);
  return n;
}

std::vector<TxnId> LockManager::Blockers(const Entry& e, TxnId txn, LockMode mode) const {
  std::vector<TxnId> out;
  auto own = e.granted.find(txn);
  if (own != e.granted.end() &&
      (own->second == LockMode::kExclusive || mode == LockMode::kShared)) {
    return out;  // L1: already covered
  }
  for (const auto& [holder, held] : e.granted) {
    if (holder != txn && !Compatible(held, mode)) out.push_back(holder);
  }
  if (own == e.granted.end()) {
    // L2: earlier waiters that conflict come first (upgrades skip the queue).
    for (const Request& r : e.waiting) {
      if (r.txn == txn) break;
      if (!Compatible(r.mode, mode)) out.push_back(r.txn);
    }
  }
  return out;
}

bool LockManager::Grantable(const Entry& e, TxnId txn, LockMode mode) const {
  return Blockers(e, txn, mode).empty();
}

bool LockManager::WaitWouldDeadlock(TxnId txn, const std::vector<TxnId>& blockers) const {
  // Depth-first search over "waits for": does any blocker (transitively)
  // wait for txn?
  std::vector<TxnId> stack(blockers.begin(), blockers.end());
  std::set<TxnId> seen;
  while (!stack.empty()) {
    TxnId t = stack.back();
    stack.pop_back();
    if (t == txn) return true;
    if (!seen.insert(t).second) continue;
    auto w = waiting_on_.find(t);
    if (w == waiting_on_.end()) continue;
    auto e = table_.find(w->second.first);
    if (e == table_.end()) continue;
    for (TxnId b : Blockers(e->second, t, w->second.second)) stack.push_back(b);
  }
  return false;
}

Status LockManager::Lock(TxnId txn, uint32_t space, std::string_view key, LockMode mode,
                         std::chrono::milliseconds timeout,
                         const std::function<bool()>& interrupted) {
  const std::string name = Name(space, key);
  std::unique_lock lk(mu_);
  Entry& e = table_[name];
  std::vector<TxnId> blockers = Blockers(e, txn, mode);
  if (blockers.empty()) {
    auto own = e.granted.find(txn);
    if (own == e.granted.end() || mode == LockMode::kExclusive) e.granted[txn] = mode;
    held_[txn].insert(name);
    ++stats_.granted_at_once;
    return Status::OK();
  }
  // From here on the entry has a holder or a waiter (the blockers), so it
  // stays in table_ whatever this request does.
  if (timeout.count() <= 0) {  // NOWAIT, SKIP LOCKED: no wait, so no deadlock either
    ++stats_.refused_at_once;
    return Status::TimedOut(
        StrFormat("lock held by another transaction (transaction %llu does not wait)",
                  static_cast<unsigned long long>(txn)));
  }
  if (WaitWouldDeadlock(txn, blockers)) {  // L3
    ++stats_.deadlocks;
    return Status::Deadlock(
        StrFormat("transaction %llu would wait for a transaction waiting for "
                  "it; it is the victim",
                  static_cast<unsigned long long>(txn)));
  }
  const auto stopped = [&] { return interrupted && interrupted(); };
  if (stopped()) {  // L5: the statement is being killed
    ++stats_.interrupted;
    return InterruptedWait(txn);
  }
  ++stats_.waits;
  e.waiting.push_back({txn, mode});
  waiting_on_[txn] = {name, mode};
  // A timeout of a year or more means "no timeout" (and must not overflow).
  const bool forever = timeout >= std::chrono::hours(24 * 365);
  const auto deadline =
      std::chrono::steady_clock::now() + (forever ? std::chrono::milliseconds(0) : timeout);
  bool granted = false;
  bool stop = false;
  while (!(granted = Grantable(e, txn, mode)) && !(stop = stopped())) {
    if (forever) {
      e.cv.wait(lk);
    } else if (e.cv.wait_until(lk, deadline) == std::cv_status::timeout) {
      granted = Grantable(e, txn, mode);
      break;
    }
  }
  waiting_on_.erase(txn);
  e.waiting.erase(std::find_if(e.waiting.begin(), e.waiting.end(),
                               [&](const Request& r) { return r.txn == txn; }));
  if (!granted) {
    e.cv.notify_all();  // a waiter behind this one may now go first
    if (stop) {
      ++stats_.interrupted;
      return InterruptedWait(txn);
    }
    ++stats_.timeouts;
    return Status::TimedOut(StrFormat("lock wait timeout (%lld ms) for transaction %llu",
                                      static_cast<long long>(timeout.count()),
                                      static_cast<unsigned long long>(txn)));
  }
  e.granted[txn] = mode == LockMode::kExclusive ? LockMode::kExclusive
                                                : (e.granted.count(txn) ? e.granted[txn] : mode);
  held_[txn].insert(name);
  e.cv.notify_all();  // compatible waiters behind may go too
  return Status::OK();
}

void LockManager::Wake(TxnId txn) {
  std::lock_guard lk(mu_);
  auto w = waiting_on_.find(txn);
  if (w == waiting_on_.end()) return;
  auto e = table_.find(w->second.first);
  if (e != table_.end()) e->second.cv.notify_all();
}

void LockManager::ReleaseAll(TxnId txn) {
  std::lock_guard lk(mu_);
  auto h = held_.find(txn);
  if (h == held_.end()) return;
  for (const std::string& name : h->second) {
    auto it = table_.find(name);
    if (it == table_.end()) continue;
    it->second.granted.erase(txn);
    if (it->second.granted.empty() && it->second.waiting.empty()) {
      table_.erase(it);
    } else {
      it->second.cv.notify_all();
    }
  }
  held_.erase(h);
}

bool LockManager::Holds(TxnId txn, uint32_t space, std::string_view key, LockMode mode) const {
  std::lock_guard lk(mu_);
  auto it = table_.find(Name(space, key));
  if (it == table_.end()) return false;
  auto g = it->second.granted.find(txn);
  return g != it->second.granted.end() &&
         (g->second == LockMode::kExclusive || mode == LockMode::kShared);
}

LockStats LockManager::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

}  // namespace subito::txn
