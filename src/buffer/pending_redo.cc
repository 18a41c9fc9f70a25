#include "buffer/pending_redo.h"

#include <algorithm>
#include <iterator>

namespace subito::buffer {

void PendingRedo::Add(PageId id, log::Lsn record) {
  std::lock_guard lock(mu_);
  added_.emplace_back(id, record);
}

bool PendingRedo::Find(PageId id, std::vector<log::Lsn>* records) const {
  std::lock_guard lock(mu_);
  auto it = index_.find(id);
  if (it == index_.end()) return false;
  *records = it->second;
  return true;
}

void PendingRedo::InstallFrom(PendingRedo& built) {
  std::vector<std::pair<PageId, log::Lsn>> added;
  {
    std::lock_guard lock(built.mu_);
    added.swap(built.added_);
  }
  // By page; a page's records stay in log order (they were added so).
  std::stable_sort(added.begin(), added.end(),
                   [](const auto& a, const auto& b) { return Less()(a.first, b.first); });
  std::map<PageId, std::vector<log::Lsn>, Less> index;
  for (const auto& [id, record] : added) {
    auto it = index.empty() || Less()(std::prev(index.end())->first, id)
                  ? index.emplace_hint(index.end(), id, std::vector<log::Lsn>())
                  : std::prev(index.end());
    std::vector<log::Lsn>& records = it->second;
    if (records.empty() || records.back() != record)
      records.push_back(record);  // one record, several edits
  }
  std::lock_guard lock(mu_);
  index_.swap(index);
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

std::vector<PageId> PendingRedo::Next(size_t n, PageId from) const {
  std::vector<PageId> out;
  std::lock_guard lock(mu_);
  for (auto it = index_.lower_bound(from); it != index_.end() && out.size() < n; ++it) {
    out.push_back(it->first);
  }
  return out;
}

}  // namespace subito::buffer
