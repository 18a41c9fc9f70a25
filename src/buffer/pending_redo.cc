#include "buffer/pending_redo.h"

namespace subito::buffer {

void PendingRedo::Add(PageId id, log::Lsn record) {
  std::lock_guard lock(mu_);
  std::vector<log::Lsn>& records = index_[id];
  if (!records.empty() && records.back() == record) return;  // one record, several edits
  records.push_back(record);
  pages_.store(index_.size(), std::memory_order_release);
}

bool PendingRedo::Find(PageId id, std::vector<log::Lsn>* records) const {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  *records = it->second;
  return true;
}

void PendingRedo::InstallFrom(PendingRedo& built) {
  std::scoped_lock lock(mu_, built.mu_);
  index_.swap(built.index_);
  built.index_.clear();
  built.pages_.store(0, std::memory_order_release);
  pages_.store(index_.size(), std::memory_order_release);
}

void PendingRedo::Erase(PageId id, size_t records) {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it != index_.end() && it->second.size() == records) index_.erase(it);
  pages_.store(index_.size(), std::memory_order_release);
}

void PendingRedo::DropSpace(uint32_t space) {
  std::lock_guard lock(mu_);
  index_.erase(index_.lower_bound({space, 0}), index_.upper_bound({space, UINT32_MAX}));
  pages_.store(index_.size(), std::memory_order_release);
}

std::vector<PageId> PendingRedo::Next(size_t n) const {
  std::vector<PageId> out;
  std::lock_guard lock(mu_);
  for (auto it = index_.begin(); it != index_.end() && out.size() < n; ++it) {
    out.push_back(it->first);
  }
  return out;
}

}  // namespace subito::buffer
