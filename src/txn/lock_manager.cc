#include "txn/lock_manager.h"

#include <algorithm>
#include <iterator>
#include <utility>

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

enum class WaitEnd { kReady, kStopped, kTimedOut };

// Waits on cv until ready() or stopped() holds, or the timeout passes (a
// year or more: no limit).
template <typename Ready, typename Stopped>
WaitEnd WaitFor(std::unique_lock<std::mutex>& lk, std::condition_variable& cv,
                std::chrono::milliseconds timeout, Ready ready, Stopped stopped) {
  const bool forever = timeout >= std::chrono::hours(24 * 365);  // and must not overflow
  const auto deadline =
      std::chrono::steady_clock::now() + (forever ? std::chrono::milliseconds(0) : timeout);
  for (;;) {
    if (ready()) return WaitEnd::kReady;
    if (stopped()) return WaitEnd::kStopped;
    if (forever) {
      cv.wait(lk);
    } else if (cv.wait_until(lk, deadline) == std::cv_status::timeout) {
      return ready() ? WaitEnd::kReady : WaitEnd::kTimedOut;
    }
  }
}

Status TimedOutWait(TxnId txn, std::chrono::milliseconds timeout) {
  return Status::TimedOut(StrFormat("lock wait timeout (%lld ms) for transaction %llu",
                                    static_cast<long long>(timeout.count()),
                                    static_cast<unsigned long long>(txn)));
}
}  // namespace

bool KeyRange::Covers(const KeyRange& o) const {
  if (lo) {
    if (!o.lo) return false;
    const int c = o.lo->compare(*lo);
    if (c < 0 || (c == 0 && o.lo_inclusive && !lo_inclusive)) return false;
  }
  if (hi) {
    if (!o.hi) return false;
    const int c = o.hi->compare(*hi);
    if (c > 0 || (c == 0 && o.hi_inclusive && !hi_inclusive)) return false;
  }
  return true;
}

bool KeyRange::Contains(std::string_view key) const {
  if (lo) {
    const int c = key.compare(*lo);
    if (c < 0 || (c == 0 && !lo_inclusive)) return false;
  }
  if (hi) {
    const int c = key.compare(*hi);
    if (c > 0 || (c == 0 && !hi_inclusive)) return false;
  }
  return true;
}

const LockMode* LockManager::Holders::Find(TxnId txn) const {
  if (first_used_ && first_.txn == txn) return &first_.mode;
  for (const Request& r : rest_) {
    if (r.txn == txn) return &r.mode;
  }
  return nullptr;
}

void LockManager::Holders::Add(TxnId txn, LockMode mode) {
  if (!first_used_) {
    first_ = {txn, mode};
    first_used_ = true;
  } else {
    rest_.push_back({txn, mode});
  }
}

void LockManager::Holders::Erase(TxnId txn) {
  if (first_used_ && first_.txn == txn) {
    if (rest_.empty()) {
      first_used_ = false;
    } else {
      first_ = rest_.back();
      rest_.pop_back();
    }
    return;
  }
  rest_.erase(
      std::remove_if(rest_.begin(), rest_.end(), [&](const Request& r) { return r.txn == txn; }),
      rest_.end());
}

bool LockManager::Grant(Node node, TxnId txn, LockMode mode) {
  if (LockMode* own = node->second.granted.Find(txn)) {
    if (mode == LockMode::kExclusive) *own = mode;  // an upgrade; S never weakens X
    return false;
  }
  node->second.granted.Add(txn, mode);
  held_[txn].push_back(node);
  bytes_ += Cost(node->first);
  return true;
}

void LockManager::Drop(Node node, TxnId txn) {
  bytes_ -= Cost(node->first);
  Entry& e = node->second;
  e.granted.Erase(txn);
  if (e.idle()) {
    table_.erase(node);
  } else if (e.waiters) {
    e.waiters->cv.notify_all();
  }
}

std::string LockManager::Name(uint32_t space, std::string_view key) {
  std::string n(4, '\0');
  for (int i = 0; i < 4; ++i) n[i] = static_cast<char>(space >> (8 * i));
  n.append(key);
  return n;
}

std::vector<TxnId> LockManager::Blockers(const Entry& e, TxnId txn, LockMode mode) const {
  std::vector<TxnId> out;
  const LockMode* own = e.granted.Find(txn);
  if (own != nullptr && (*own == LockMode::kExclusive || mode == LockMode::kShared)) {
    return out;  // L1: already covered
  }
  e.granted.ForEach([&](TxnId holder, LockMode held) {
    if (holder != txn && !Compatible(held, mode)) out.push_back(holder);
  });
  if (own == nullptr && e.waiters) {
    // L2: earlier waiters that conflict come first (upgrades skip the queue).
    for (const Request& r : e.waiters->queue) {
      if (r.txn == txn) break;
      if (!Compatible(r.mode, mode)) out.push_back(r.txn);
    }
  }
  return out;
}

bool LockManager::Grantable(const Entry& e, TxnId txn, LockMode mode) const {
  return Blockers(e, txn, mode).empty();
}

std::vector<TxnId> LockManager::RangeHolders(TxnId txn, uint32_t space,
                                             std::string_view key) const {
  std::vector<TxnId> out;
  auto it = ranges_.find(space);
  if (it == ranges_.end()) return out;
  for (const HeldRange& r : it->second) {
    if (r.txn != txn && r.range.Contains(key)) out.push_back(r.txn);
  }
  return out;
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
    if (w->second.insert) {
      for (TxnId b : RangeHolders(t, w->second.space, w->second.key)) stack.push_back(b);
      continue;
    }
    auto e = table_.find(w->second.name);
    if (e == table_.end()) continue;
    for (TxnId b : Blockers(e->second, t, w->second.mode)) stack.push_back(b);
  }
  return false;
}

Status LockManager::RefuseWait(TxnId txn, const std::vector<TxnId>& blockers,
                               std::chrono::milliseconds timeout,
                               const std::function<bool()>& interrupted) {
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
  if (interrupted && interrupted()) {  // L5: the statement is being killed
    ++stats_.interrupted;
    return InterruptedWait(txn);
  }
  return Status::OK();
}

void LockManager::ReportWait(TxnId txn, const std::vector<TxnId>& blockers) {
  // Under mu_: every blocker still holds (or waits for) the key, so the
  // hook sees it in the transaction it is in now, not in a later one its
  // thread may have begun once the lock went.
  if (!wait_hook_) return;
  for (TxnId b : blockers) wait_hook_(txn, b);
}

Status LockManager::Lock(TxnId txn, uint32_t space, std::string_view key, LockMode mode,
                         std::chrono::milliseconds timeout,
                         const std::function<bool()>& interrupted, bool* granted_new) {
  if (granted_new != nullptr) *granted_new = false;
  std::string name = Name(space, key);
  std::unique_lock lk(mu_);
  if (budget_ != 0 && bytes_ + Cost(name) > budget_) {
    auto held = table_.find(name);
    if (held == table_.end() || held->second.granted.Find(txn) == nullptr) {
      ++stats_.refused_over_budget;
      return Status::TooManyLocks(StrFormat(
          "row locks would take more than their budget of %llu bytes (subito_lock_memory_budget)",
          static_cast<unsigned long long>(budget_)));
    }
  }
  const Node node = table_.try_emplace(std::move(name)).first;
  Entry& e = node->second;
  std::vector<TxnId> blockers = Blockers(e, txn, mode);
  if (blockers.empty()) {
    const bool added = Grant(node, txn, mode);
    if (granted_new != nullptr) *granted_new = added;
    ++stats_.granted_at_once;
    return Status::OK();
  }
  // From here on the entry has a holder or a waiter (the blockers), so it
  // stays in table_ whatever this request does.
  SUBITO_RETURN_IF_ERROR(RefuseWait(txn, blockers, timeout, interrupted));
  ++stats_.waits;
  if (!e.waiters) e.waiters = std::make_unique<Waiters>();
  Waiters& w = *e.waiters;
  w.queue.push_back({txn, mode});
  waiting_on_[txn] = Wait{false, node->first, mode, 0, {}};
  ReportWait(txn, blockers);
  const WaitEnd end = WaitFor(
      lk, w.cv, timeout, [&] { return Grantable(e, txn, mode); },
      [&] { return interrupted && interrupted(); });
  waiting_on_.erase(txn);
  w.queue.erase(
      std::find_if(w.queue.begin(), w.queue.end(), [&](const Request& r) { return r.txn == txn; }));
  if (end != WaitEnd::kReady) {
    w.cv.notify_all();  // a waiter behind this one may now go first
    if (end == WaitEnd::kStopped) {
      ++stats_.interrupted;
      return InterruptedWait(txn);
    }
    ++stats_.timeouts;
    return TimedOutWait(txn, timeout);
  }
  const bool added = Grant(node, txn, mode);
  if (granted_new != nullptr) *granted_new = added;
  w.cv.notify_all();  // compatible waiters behind may go too
  return Status::OK();
}

RangeGrant LockManager::LockRange(TxnId txn, uint32_t space, KeyRange range) {
  std::unique_lock lk(mu_);
  std::vector<HeldRange>& held = ranges_[space];
  RangeGrant grant;
  grant.space = space;
  grant.kind = RangeGrant::Kind::kAdded;
  for (auto it = held.rbegin(); it != held.rend(); ++it) {
    if (it->txn != txn) continue;
    KeyRange& r = it->range;  // only the transaction's newest range
    if (r.Covers(range)) {
      grant.kind = RangeGrant::Kind::kNone;  // a re-read inside what is locked already
    } else if (r.hi && range.lo && *r.hi == *range.lo && (r.hi_inclusive || range.lo_inclusive)) {
      grant.kind = RangeGrant::Kind::kExtendedHi;  // a forward scan's next step
      grant.old_bound = std::exchange(r.hi, range.hi);
      grant.old_inclusive = std::exchange(r.hi_inclusive, range.hi_inclusive);
    } else if (r.lo && range.hi && *r.lo == *range.hi && (r.lo_inclusive || range.hi_inclusive)) {
      grant.kind = RangeGrant::Kind::kExtendedLo;  // a backward scan's next step
      grant.old_bound = std::exchange(r.lo, range.lo);
      grant.old_inclusive = std::exchange(r.lo_inclusive, range.lo_inclusive);
    } else {
      break;
    }
    grant.held = r;
    break;
  }
  const bool added = grant.kind == RangeGrant::Kind::kAdded;
  if (added) {
    grant.held = range;
    held.push_back({txn, std::move(range)});
    range_spaces_[txn].insert(space);
  }
  // L8: a read-modify-write of the count, also when nothing was added: it
  // and an insert's second check (another one) are ordered, so either this
  // caller's next read sees the insert's key or the check sees this range.
  ranges_held_.fetch_add(added ? 1 : 0, std::memory_order_acq_rel);
  return grant;
}

void LockManager::GiveBackRange(TxnId txn, const RangeGrant& grant) {
  if (grant.kind == RangeGrant::Kind::kNone) return;
  std::lock_guard lk(mu_);
  auto it = ranges_.find(grant.space);
  if (it == ranges_.end()) return;
  std::vector<HeldRange>& held = it->second;
  auto newest =
      std::find_if(held.rbegin(), held.rend(), [&](const HeldRange& r) { return r.txn == txn; });
  if (newest == held.rend() || !(newest->range == grant.held)) return;
  switch (grant.kind) {
    case RangeGrant::Kind::kAdded:
      held.erase(std::next(newest).base());
      ranges_held_.fetch_sub(1, std::memory_order_relaxed);
      if (held.empty()) ranges_.erase(it);
      break;
    case RangeGrant::Kind::kExtendedHi:
      newest->range.hi = grant.old_bound;
      newest->range.hi_inclusive = grant.old_inclusive;
      break;
    case RangeGrant::Kind::kExtendedLo:
      newest->range.lo = grant.old_bound;
      newest->range.lo_inclusive = grant.old_inclusive;
      break;
    case RangeGrant::Kind::kNone:
      break;
  }
  ranges_cv_.notify_all();  // inserts waiting for the range (L7)
}

Status LockManager::WaitForRanges(TxnId txn, uint32_t space, std::string_view key,
                                  std::chrono::milliseconds timeout,
                                  const std::function<bool()>& interrupted) {
  // L8: a read-modify-write, ordered with LockRange's after the caller's
  // insertion of the key, if it made one.
  if (ranges_held_.fetch_add(0, std::memory_order_acq_rel) == 0) return Status::OK();
  std::unique_lock lk(mu_);
  std::vector<TxnId> blockers = RangeHolders(txn, space, key);
  if (!blockers.empty()) {
    SUBITO_RETURN_IF_ERROR(RefuseWait(txn, blockers, timeout, interrupted));
    ++stats_.waits;
    ++stats_.insert_waits;
    waiting_on_[txn] = Wait{true, {}, LockMode::kExclusive, space, std::string(key)};
    ReportWait(txn, blockers);
    const WaitEnd end = WaitFor(
        lk, ranges_cv_, timeout, [&] { return RangeHolders(txn, space, key).empty(); },
        [&] { return interrupted && interrupted(); });
    waiting_on_.erase(txn);
    if (end == WaitEnd::kStopped) {
      ++stats_.interrupted;
      return InterruptedWait(txn);
    }
    if (end == WaitEnd::kTimedOut) {
      ++stats_.timeouts;
      return TimedOutWait(txn, timeout);
    }
  }
  return Status::OK();
}

void LockManager::Wake(TxnId txn) {
  std::lock_guard lk(mu_);
  auto w = waiting_on_.find(txn);
  if (w == waiting_on_.end()) return;
  if (w->second.insert) {
    ranges_cv_.notify_all();
    return;
  }
  auto e = table_.find(w->second.name);
  if (e != table_.end() && e->second.waiters) e->second.waiters->cv.notify_all();
}

void LockManager::ReleaseAll(TxnId txn) {
  std::lock_guard lk(mu_);
  if (auto rs = range_spaces_.find(txn); rs != range_spaces_.end()) {
    for (uint32_t space : rs->second) {
      auto it = ranges_.find(space);
      if (it == ranges_.end()) continue;
      std::vector<HeldRange>& held = it->second;
      const size_t before = held.size();
      held.erase(std::remove_if(held.begin(), held.end(),
                                [&](const HeldRange& r) { return r.txn == txn; }),
                 held.end());
      ranges_held_.fetch_sub(before - held.size(), std::memory_order_relaxed);
      if (held.empty()) ranges_.erase(it);
    }
    range_spaces_.erase(rs);
    ranges_cv_.notify_all();  // inserts waiting for these ranges (L7)
  }
  auto h = held_.find(txn);
  if (h == held_.end()) return;
  for (Node node : h->second) Drop(node, txn);
  held_.erase(h);
  releases_.fetch_add(1, std::memory_order_release);  // L12
}

void LockManager::Release(TxnId txn, uint32_t space, std::string_view key) {
  std::lock_guard lk(mu_);
  auto node = table_.find(Name(space, key));
  if (node == table_.end() || node->second.granted.Find(txn) == nullptr) return;
  auto h = held_.find(txn);
  if (h == held_.end()) return;
  // Released keys are among the newest taken: search from the end.
  std::vector<Node>& nodes = h->second;
  auto at = std::find(nodes.rbegin(), nodes.rend(), node);
  if (at == nodes.rend()) return;
  nodes.erase(std::next(at).base());
  Drop(node, txn);
  releases_.fetch_add(1, std::memory_order_release);  // L12
}

void LockManager::Downgrade(TxnId txn, uint32_t space, std::string_view key) {
  std::lock_guard lk(mu_);
  auto node = table_.find(Name(space, key));
  if (node == table_.end()) return;
  LockMode* own = node->second.granted.Find(txn);
  if (own == nullptr || *own == LockMode::kShared) return;
  *own = LockMode::kShared;
  releases_.fetch_add(1, std::memory_order_release);  // L12
  if (node->second.waiters) node->second.waiters->cv.notify_all();
}

bool LockManager::Holds(TxnId txn, uint32_t space, std::string_view key, LockMode mode) const {
  std::lock_guard lk(mu_);
  auto it = table_.find(Name(space, key));
  if (it == table_.end()) return false;
  const LockMode* g = it->second.granted.Find(txn);
  return g != nullptr && (*g == LockMode::kExclusive || mode == LockMode::kShared);
}

LockStats LockManager::stats() const {
  std::lock_guard lk(mu_);
  LockStats s = stats_;
  s.ranges = ranges_held_.load(std::memory_order_relaxed);
  s.memory_bytes = bytes_;
  s.memory_budget = budget_;
  return s;
}

}  // namespace subito::txn
