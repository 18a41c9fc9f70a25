#include "txn/version_store.h"

namespace subito::txn {

void VersionStore::Add(std::string_view key, const std::shared_ptr<TxnState>& writer,
                       std::optional<std::string> before, bool before_chain) {
  std::unique_lock lock(mu_);
  auto it = chains_.find(key);
  if (it == chains_.end()) {
    it = chains_.emplace(std::string(key), std::vector<Version>{}).first;
    chain_count_.fetch_add(1, std::memory_order_release);
  }
  auto& chain = it->second;
  if (!chain.empty() && chain.front().writer == writer) {
    chain.front().undone_by_self = false;
    return;
  }
  const bool chain_ref = before && before_chain;
  chain.insert(chain.begin(), Version{writer, std::move(before), chain_ref, false});
}

Result<std::optional<std::string>> VersionStore::Visible(std::string_view key,
                                                         std::optional<std::string> latest,
                                                         const ReadView& view) const {
  if (chain_count_.load(std::memory_order_acquire) == 0) return latest;
  bool chain = false;
  {
    std::shared_lock lock(mu_);
    auto it = chains_.find(key);
    if (it == chains_.end()) return latest;
    for (const Version& v : it->second) {
      const bool skip = v.undone_by_self && v.writer.get() == view.self;
      if (!skip && view.Sees(*v.writer)) break;
      latest = v.before;
      chain = v.before_chain;
    }
  }
  if (!chain) return latest;
  // The reader's snapshot does not see the chain's retirer: it stays
  // retired, and readable, until this reader is done (V2).
  std::shared_lock lock(tree_mu_);
  if (tree_ == nullptr) return Status::Busy("the index was dropped");
  Result<std::string> bytes = tree_->ReadChain(*latest);
  if (!bytes.ok()) return bytes.status();
  return std::optional<std::string>(std::move(*bytes));
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
  const TxnState* w = it->second.front().writer.get();
  return w != self && w->end_ts.load(std::memory_order_acquire) == 0;
}

void VersionStore::MarkUndoneBySelf(std::string_view key, const TxnState* writer) {
  std::unique_lock lock(mu_);
  auto it = chains_.find(key);
  if (it == chains_.end()) return;
  for (Version& v : it->second) {
    if (v.writer.get() == writer) v.undone_by_self = true;
  }
}

std::optional<std::string> VersionStore::Neighbor(std::optional<std::string_view> key, bool forward,
                                                  bool inclusive) const {
  if (chain_count_.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::shared_lock lock(mu_);
  if (chains_.empty()) return std::nullopt;
  if (!key) return forward ? chains_.begin()->first : chains_.rbegin()->first;
  if (forward) {
    auto it = inclusive ? chains_.lower_bound(*key) : chains_.upper_bound(*key);
    if (it == chains_.end()) return std::nullopt;
    return it->first;
  }
  auto it = inclusive ? chains_.upper_bound(*key) : chains_.lower_bound(*key);
  if (it == chains_.begin()) return std::nullopt;
  return std::prev(it)->first;
}

void VersionStore::Purge(std::string_view key, uint64_t oldest_read_ts) {
  std::unique_lock lock(mu_);
  auto it = chains_.find(key);
  if (it == chains_.end()) return;
  auto& chain = it->second;
  for (size_t i = 0; i < chain.size();) {
    const TxnState& w = *chain[i].writer;
    const uint64_t ts = w.end_ts.load(std::memory_order_acquire);
    if (ts == 0 || ts > oldest_read_ts) {
      ++i;
    } else if (w.aborted.load(std::memory_order_acquire)) {
      chain.erase(chain.begin() + static_cast<ptrdiff_t>(i));  // V3
    } else {
      chain.resize(i);  // V2
      break;
    }
  }
  if (chain.empty()) {
    chains_.erase(it);
    chain_count_.fetch_sub(1, std::memory_order_release);
  }
}

size_t VersionStore::keys() const {
  std::shared_lock lock(mu_);
  return chains_.size();
}

uint64_t TxnSystem::OpenSnapshot() {
  std::lock_guard lock(mu_);
  snapshots_.insert(clock_);
  return clock_;
}

void TxnSystem::RetainSnapshot(uint64_t read_ts) {
  std::lock_guard lock(mu_);
  snapshots_.insert(read_ts);
}

void TxnSystem::CloseSnapshot(uint64_t read_ts) {
  std::lock_guard lock(mu_);
  auto it = snapshots_.find(read_ts);
  if (it != snapshots_.end()) snapshots_.erase(it);
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
  return snapshots_.empty() ? clock_ : *snapshots_.begin();
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
      oldest = OldestReadTs();
      if (ended_.empty() || ended_.front().end_ts > oldest) break;
      e = std::move(ended_.front());
      ended_.front().keys.clear();
      ended_.front().chains.clear();
    }
    for (auto& [store, key] : e.keys) store->Purge(key, oldest);
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
  return snapshots_.size();
}

}  // namespace subito::txn
