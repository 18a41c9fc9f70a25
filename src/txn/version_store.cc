#include "txn/version_store.h"

#include <algorithm>

namespace subito::txn {

namespace {

std::atomic<uint64_t> next_store_id{1};

// The nearest key of a sorted map after (forward) or before `key`; with
// `inclusive`, key itself counts. No key: the map's first (forward) or last.
template <typename Map>
std::optional<std::string> NearestKey(const Map& m, std::optional<std::string_view> key,
                                      bool forward, bool inclusive) {
  if (m.empty()) return std::nullopt;
  if (!key) return forward ? m.begin()->first : m.rbegin()->first;
  if (forward) {
    auto it = inclusive ? m.lower_bound(*key) : m.upper_bound(*key);
    if (it == m.end()) return std::nullopt;
    return it->first;
  }
  auto it = inclusive ? m.upper_bound(*key) : m.lower_bound(*key);
  if (it == m.begin()) return std::nullopt;
  return std::prev(it)->first;
}

}  // namespace

VersionStore::VersionStore(std::shared_ptr<VersionBudget> budget)
    : budget_(std::move(budget)), id_(next_store_id.fetch_add(1)) {
  if (budget_) {
    std::lock_guard lock(budget_->stores_mu);
    budget_->stores.insert(this);
  }
}

VersionStore::~VersionStore() {
  if (budget_) {
    std::lock_guard lock(budget_->stores_mu);
    budget_->stores.erase(this);
  }
  int64_t bytes = 0;
  for (const auto& [key, chain] : chains_) {
    bytes += KeyCost(key);
    for (size_t i = 0; i < chain.size(); ++i) bytes += Cost(chain[i]);
  }
  Charge(-bytes);
}

bool VersionStore::Add(std::string_view key, const std::shared_ptr<TxnState>& writer,
                       std::optional<std::string> before, bool before_chain) {
  std::unique_lock lock(mu_);
  auto it = chains_.lower_bound(key);  // one descent, also where a new key goes
  if (it == chains_.end() || it->first != key) {
    it = chains_.emplace_hint(it, std::string(key), Chain{});
    chain_count_.fetch_add(1, std::memory_order_release);
    Charge(KeyCost(key));
  }
  auto& chain = it->second;
  if (!chain.empty() && chain.back().writer == writer) return false;
  const bool chain_ref = before && before_chain;
  chain.push_back(Version{writer, std::move(before), chain_ref});
  Charge(Cost(chain.back()));
  return true;
}

size_t VersionStore::SeenBelow(const Chain& c, size_t top, const ReadView& view,
                               uint64_t* examined) {
  // Below `top` every writer has ended, in end_ts order (V5): the newest
  // one with end_ts <= read_ts, by binary search, then past aborted ones.
  size_t lo = 0, hi = top;  // first index with end_ts > read_ts
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    ++*examined;
    if (c[mid].writer->end_ts.load(std::memory_order_acquire) <= view.read_ts) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  size_t seen = lo;
  while (seen > 0 && !view.Sees(*c[seen - 1].writer)) {
    ++*examined;
    --seen;
  }
  return seen;
}

Result<std::optional<std::string>> VersionStore::Visible(std::string_view key,
                                                         std::optional<std::string> latest,
                                                         const ReadView& view) const {
  SUBITO_RETURN_IF_ERROR(CheckSnapshot(view));
  if (chain_count_.load(std::memory_order_acquire) == 0)
    return CheckedValue(std::move(latest), view);
  bool chain = false;
  {
    std::shared_lock lock(mu_);
    auto it = chains_.find(key);
    if (it == chains_.end()) return CheckedValue(std::move(latest), view);
    const Chain& c = it->second;
    // From the newest: the reader's own write, or a writer still active,
    // is only ever the newest (V5).
    size_t top = c.size();
    uint64_t examined = 0;
    while (top > 0) {
      const Version& v = c[top - 1];
      const bool self = v.writer.get() == view.self;
      if (!self && v.writer->end_ts.load(std::memory_order_acquire) != 0) break;
      ++examined;
      if (self) {
        examined_.fetch_add(examined, std::memory_order_relaxed);
        return CheckedValue(std::move(latest), view);  // its own write
      }
      latest = v.before;
      chain = v.before_chain;
      --top;
    }
    const size_t seen = SeenBelow(c, top, view, &examined);  // [seen, top) not seen
    examined_.fetch_add(examined, std::memory_order_relaxed);
    if (seen < top) {
      latest = c[seen].before;
      chain = c[seen].before_chain;
    }
  }
  if (!chain) return CheckedValue(std::move(latest), view);
  // The reader's snapshot does not see the chain's retirer: it stays
  // retired, and readable, until this reader is done (V2), or the reader
  // is cut (V4: then whatever was read is refused).
  std::shared_lock lock(tree_mu_);
  if (tree_ == nullptr) return Status::Busy("the index was dropped");
  Result<std::string> bytes = tree_->ReadChain(*latest);
  SUBITO_RETURN_IF_ERROR(CheckSnapshot(view));
  if (!bytes.ok()) return bytes.status();
  return std::optional<std::string>(std::move(*bytes));
}

Result<bool> VersionStore::SeesTreeValue(std::string_view key, const ReadView& view) const {
  SUBITO_RETURN_IF_ERROR(CheckSnapshot(view));
  if (chain_count_.load(std::memory_order_acquire) == 0) return true;
  bool none;
  {
    std::shared_lock lock(mu_);
    none = chains_.find(key) == chains_.end();
  }
  if (!none) return false;
  SUBITO_RETURN_IF_ERROR(CheckSnapshot(view));  // cut meanwhile (as CheckedValue)
  return true;
}

Status VersionStore::CheckSnapshot(const ReadView& view) const {
  if (budget_ == nullptr || view.read_ts >= budget_->floor.load(std::memory_order_acquire)) {
    return Status::OK();
  }
  return Status::SnapshotTooOld(
      "snapshot too old: it was cut to keep old row versions within "
      "subito_version_store_budget (a transaction or consistent snapshot was open too long "
      "under a write load); start the transaction again");
}

Result<std::optional<std::string>> VersionStore::CheckedValue(std::optional<std::string> value,
                                                              const ReadView& view) const {
  SUBITO_RETURN_IF_ERROR(CheckSnapshot(view));
  return value;
}

Status VersionStore::ReleaseChain(std::string_view ref) {
  std::shared_lock lock(tree_mu_);
  return tree_ == nullptr ? Status::OK() : tree_->Release(ref);
}

Status VersionStore::CollectGarbage(const std::function<bool()>& stop) {
  std::shared_lock lock(tree_mu_);
  if (tree_ == nullptr) return Status::OK();
  return tree_->CollectGarbage([&] { return detaching_.load() || (stop && stop()); });
}

bool VersionStore::ChangedByActiveOther(std::string_view key, const TxnState* self) const {
  if (chain_count_.load(std::memory_order_acquire) == 0) return false;
  std::shared_lock lock(mu_);
  auto it = chains_.find(key);
  if (it == chains_.end() || it->second.empty()) return false;
  const TxnState* w = it->second.back().writer.get();
  return w != self && w->end_ts.load(std::memory_order_acquire) == 0;
}

bool VersionStore::AbortedInsertsOnly(std::string_view key) const {
  if (chain_count_.load(std::memory_order_acquire) == 0) return false;
  std::shared_lock lock(mu_);
  auto it = chains_.find(key);
  if (it == chains_.end() || it->second.empty() || it->second.front().before) return false;
  for (size_t i = 0; i < it->second.size(); ++i) {
    const TxnState& w = *it->second[i].writer;
    if (w.end_ts.load(std::memory_order_acquire) == 0 ||
        !w.aborted.load(std::memory_order_acquire)) {
      return false;
    }
  }
  return true;
}

void VersionStore::HandOver(std::string_view key, const TxnState* writer,
                            const std::shared_ptr<TxnState>& stand_in) {
  std::unique_lock lock(mu_);
  auto it = chains_.find(key);
  if (it == chains_.end()) return;
  // The writer's version is the newest (V5).
  if (!it->second.empty() && it->second.back().writer.get() == writer) {
    it->second.back().writer = stand_in;
  }
}

void VersionStore::DropVersionsOf(const TxnState* writer) {
  std::unique_lock lock(mu_);
  int64_t freed = 0;
  for (auto it = chains_.begin(); it != chains_.end();) {
    auto& chain = it->second;
    size_t out = 0;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (chain[i].writer->id == writer->id) {  // its stand-ins too (HandOver)
        freed += Cost(chain[i]);
      } else {
        if (out != i) chain[out] = std::move(chain[i]);
        ++out;
      }
    }
    chain.resize(out);
    if (!chain.empty()) {
      ++it;
      continue;
    }
    freed += KeyCost(it->first);
    it = chains_.erase(it);
    chain_count_.fetch_sub(1, std::memory_order_release);
  }
  Charge(-freed);
}

std::optional<std::string> VersionStore::Neighbor(std::optional<std::string_view> key, bool forward,
                                                  bool inclusive) const {
  if (chain_count_.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::shared_lock lock(mu_);
  return NearestKey(chains_, key, forward, inclusive);
}

void VersionStore::Purge(std::span<const std::string_view> keys, uint64_t oldest_read_ts) {
  for (size_t at = 0; at < keys.size(); at += kPurgeBatch) {
    int64_t freed = 0;
    {
      std::unique_lock lock(mu_);
      const size_t end = std::min(keys.size(), at + kPurgeBatch);
      for (size_t i = at; i < end; ++i) freed += PurgeLocked(keys[i], oldest_read_ts);
    }
    Charge(-freed);
  }
}

int64_t VersionStore::PurgeLocked(std::string_view key, uint64_t oldest_read_ts) {
  auto it = chains_.find(key);
  if (it == chains_.end()) return 0;
  auto& chain = it->second;
  // V2: the newest committed version every snapshot sees, and all older
  // ones, go; V3: aborted versions every snapshot postdates go.
  size_t cut = 0;  // versions [0, cut) go
  for (size_t i = chain.size(); i > 0; --i) {
    const TxnState& w = *chain[i - 1].writer;
    const uint64_t ts = w.end_ts.load(std::memory_order_acquire);
    if (ts != 0 && ts <= oldest_read_ts && !w.aborted.load(std::memory_order_acquire)) {
      cut = i;
      break;
    }
  }
  int64_t freed = 0;
  size_t out = 0;
  for (size_t i = 0; i < chain.size(); ++i) {
    const TxnState& w = *chain[i].writer;
    const uint64_t ts = w.end_ts.load(std::memory_order_acquire);
    const bool gone =
        i < cut || (ts != 0 && ts <= oldest_read_ts && w.aborted.load(std::memory_order_acquire));
    if (gone) {
      freed += Cost(chain[i]);
    } else {
      if (out != i) chain[out] = std::move(chain[i]);
      ++out;
    }
  }
  chain.resize(out);
  if (chain.empty()) {
    freed += KeyCost(it->first);
    chains_.erase(it);
    chain_count_.fetch_sub(1, std::memory_order_release);
  }
  return freed;
}

AsOfSnapshot::Overlay VersionStore::OverlayFor(uint64_t read_ts) const {
  AsOfSnapshot::Overlay overlay;
  const ReadView view{read_ts, nullptr};
  std::shared_lock lock(mu_);
  for (const auto& [key, c] : chains_) {
    // As Visible (V5), for a reader with no writes of its own: the oldest
    // version whose writer it does not see gives the value it sees.
    size_t top = c.size();
    while (top > 0 && c[top - 1].writer->end_ts.load(std::memory_order_acquire) == 0) --top;
    uint64_t examined = 0;
    const size_t seen = SeenBelow(c, top, view, &examined);
    if (seen == c.size()) continue;  // sees every writer: the tree's value
    overlay.emplace(key, AsOfSnapshot::Value{c[seen].before, c[seen].before_chain});
  }
  return overlay;
}

Result<std::optional<std::string>> VersionStore::VisibleAsOf(
    const AsOfSnapshot& as_of, std::string_view key, std::optional<std::string> latest) const {
  auto o = as_of.overlays.find(id_);
  if (o != as_of.overlays.end()) {
    auto v = o->second.find(key);
    if (v != o->second.end()) {
      if (!v->second.chain || !v->second.bytes) {
        latest = v->second.bytes;
      } else {
        std::shared_lock lock(tree_mu_);
        if (tree_ == nullptr) return Status::Busy("the index was dropped");
        Result<std::string> bytes = tree_->ReadChain(*v->second.bytes);
        if (!bytes.ok()) {
          SUBITO_RETURN_IF_ERROR(as_of.Check());
          return bytes.status();
        }
        latest = std::move(*bytes);
      }
    }
  }
  SUBITO_RETURN_IF_ERROR(as_of.Check());
  return latest;
}

std::optional<std::string> VersionStore::NeighborAsOf(const AsOfSnapshot& as_of,
                                                      std::optional<std::string_view> key,
                                                      bool forward, bool inclusive) const {
  auto o = as_of.overlays.find(id_);
  if (o == as_of.overlays.end()) return std::nullopt;
  return NearestKey(o->second, key, forward, inclusive);
}

Status AsOfSnapshot::Check() const {
  if (!epoch->cut.load(std::memory_order_acquire)) return Status::OK();
  if (epoch->unbuildable.load(std::memory_order_acquire)) {
    return buffer::PageVersions::Unbuildable(*epoch);
  }
  return Status::SnapshotTooOld(
      "snapshot too old: its pages as of an earlier moment went over "
      "subito_snapshot_page_budget (a transaction or consistent snapshot was open too long "
      "under a write load); start the transaction again");
}

size_t VersionStore::keys() const {
  std::shared_lock lock(mu_);
  return chains_.size();
}

uint64_t TxnSystem::OpenSnapshot() {
  std::lock_guard lock(mu_);
  ++snapshots_[clock_];
  ++open_snapshots_;
  return clock_;
}

void TxnSystem::RetainSnapshot(uint64_t read_ts) {
  std::lock_guard lock(mu_);
  ++snapshots_[read_ts];
  ++open_snapshots_;
}

void TxnSystem::CloseSnapshot(uint64_t read_ts) {
  std::lock_guard lock(mu_);
  auto it = snapshots_.find(read_ts);
  if (it != snapshots_.end()) {
    --open_snapshots_;
    if (--it->second != 0) return;
    snapshots_.erase(it);
  }
  auto moved = moved_.find(read_ts);
  if (moved != moved_.end()) {
    pool_->versions().End(moved->second->epoch);
    moved_.erase(moved);
  }
}

std::shared_ptr<const AsOfSnapshot> TxnSystem::AsOf(uint64_t read_ts) const {
  if (!budget_ || read_ts >= budget_->floor.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(mu_);
  auto it = moved_.find(read_ts);
  return it == moved_.end() ? nullptr : it->second;
}

uint64_t TxnSystem::moved_snapshots() const {
  std::lock_guard lock(mu_);
  return moved_.size();
}

uint64_t TxnSystem::overlay_bytes() const {
  std::lock_guard lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [ts, s] : moved_) bytes += s->overlay_bytes;
  return bytes;
}

void TxnSystem::MoveSnapshot(uint64_t read_ts) {
  auto s = std::make_shared<AsOfSnapshot>();
  s->read_ts = read_ts;
  s->epoch = pool_->versions().Begin(*pool_->log());  // L first: V6
  {
    std::lock_guard lock(budget_->stores_mu);
    for (VersionStore* store : budget_->stores) {
      AsOfSnapshot::Overlay o = store->OverlayFor(read_ts);
      if (o.empty()) continue;
      for (const auto& [key, v] : o)
        s->overlay_bytes += key.size() + (v.bytes ? v.bytes->size() : 0) + 96;
      s->overlays.emplace(store->id(), std::move(o));
    }
  }
  pool_->versions().Charge(s->epoch, s->overlay_bytes);  // may cut it at once
  moved_[read_ts] = std::move(s);
}

void TxnSystem::End(const std::shared_ptr<TxnState>& writer, bool committed,
                    std::vector<KeyRef> keys, std::vector<KeyRef> chains) {
  std::lock_guard lock(mu_);
  const uint64_t ts = ++clock_;
  if (!committed) writer->aborted.store(true, std::memory_order_release);
  writer->end_ts.store(ts, std::memory_order_release);
  if (!keys.empty() || !chains.empty()) ended_.push_back({ts, std::move(keys), std::move(chains)});
}

uint64_t TxnSystem::OldestReadTs() const {
  // The oldest snapshot not cut (V4): cut ones read nothing any more.
  auto it = snapshots_.lower_bound(budget_ ? budget_->floor.load() : 0);
  return it == snapshots_.end() ? clock_ : it->first;
}

void TxnSystem::CutSnapshotsOverBudget() {
  // Moved snapshots whose pages went over their budget are cut: their
  // overlays go (a reader still holding one fails on its next check).
  for (auto it = moved_.begin(); it != moved_.end();) {
    it = it->second->epoch->cut.load(std::memory_order_acquire) ? moved_.erase(it) : std::next(it);
  }
  if (!budget_ || !budget_->over() || ended_.empty()) return;
  // The oldest snapshot not yet cut that holds back the next purge.
  auto it = snapshots_.lower_bound(budget_->floor.load());
  if (it == snapshots_.end() || it->first >= ended_.front().end_ts) return;
  if (pool_ != nullptr) {
    MoveSnapshot(it->first);
    budget_->snapshots_moved.fetch_add(1, std::memory_order_relaxed);
  } else {
    budget_->snapshots_cut.fetch_add(1, std::memory_order_relaxed);
  }
  budget_->floor.store(it->first + 1, std::memory_order_release);
}

size_t TxnSystem::Purge(const std::function<bool()>& stop) {
  std::lock_guard serial(purge_mu_);
  size_t visited = 0;
  for (;;) {
    Ended e;
    uint64_t oldest;
    {
      // The entry stays queued (emptied) until it is done: purge_backlog
      // counts it meanwhile.
      std::lock_guard lock(mu_);
      CutSnapshotsOverBudget();
      oldest = OldestReadTs();
      if (ended_.empty() || ended_.front().end_ts > oldest) break;
      e = std::move(ended_.front());
      ended_.front().keys.clear();
      ended_.front().chains.clear();
    }
    if (e.keys.size() <= VersionStore::kPurgeBatch) {
      for (auto& [store, key] : e.keys) {
        const std::string_view one = key;
        store->Purge({&one, 1}, oldest);
      }
    } else {
      // A large transaction's keys, each store's in one list (a load's are
      // nearly all one store's), in the order written.
      std::unordered_map<VersionStore*, std::vector<std::string_view>> by_store;
      for (auto& [store, key] : e.keys) by_store[store.get()].push_back(key);
      for (auto& [store, keys] : by_store) store->Purge(keys, oldest);
    }
    visited += e.keys.size();
    for (auto& [store, ref] : e.chains) {
      if (!store->ReleaseChain(ref).ok()) chain_release_failures_.fetch_add(1);
    }
    std::set<VersionStore*> stores;
    for (auto& [store, ref] : e.chains) stores.insert(store.get());
    for (VersionStore* store : stores) {
      if (!store->CollectGarbage(stop).ok()) chain_release_failures_.fetch_add(1);
    }
    std::lock_guard lock(mu_);
    ended_.pop_front();
  }
  return visited;
}

size_t TxnSystem::purge_backlog() const {
  std::lock_guard lock(mu_);
  return ended_.size();
}

uint64_t TxnSystem::active_snapshots() const {
  std::lock_guard lock(mu_);
  return open_snapshots_;
}

}  // namespace subito::txn
