#include "buffer/page_versions.h"

#include <algorithm>

#include "util/strings.h"

namespace subito::buffer {

thread_local const PageVersions::Epoch* ReadAsOf::current_ = nullptr;

std::shared_ptr<PageVersions::Epoch> PageVersions::Begin(log::RedoLog& log) {
  auto epoch = std::make_shared<Epoch>();
  std::lock_guard lock(mu_);
  // An Mtr that finds the epoch (E1) finds kMaxLsn or its L here.
  newest_.store(kMaxLsn, std::memory_order_release);
  active_.fetch_add(1, std::memory_order_release);
  epoch->lsn = log.reserved_lsn_ordered();  // E1
  epochs_.push_back(epoch);
  UpdateNewest();
  return epoch;
}

void PageVersions::UpdateNewest() {
  log::Lsn newest = 0;
  for (const std::shared_ptr<Epoch>& e : epochs_) newest = std::max(newest, e->lsn);
  newest_.store(newest, std::memory_order_release);
}

void PageVersions::Retire(std::vector<std::shared_ptr<Epoch>>::iterator it) {
  Epoch& e = **it;
  e.cut.store(true, std::memory_order_release);
  bytes_ -= uint64_t{page_size_} * e.images.size() + e.charged;
  for (const auto& [id, r] : e.recipes) bytes_ -= RecipeBytes(*r);
  storage_backed_.fetch_sub(e.recipes.size() + e.rebuildable.size(), std::memory_order_release);
  e.recipes.clear();
  e.rebuildable.clear();
  e.images.clear();
  e.charged = 0;
  epochs_.erase(it);
  active_.fetch_sub(1, std::memory_order_release);
  UpdateNewest();
}

void PageVersions::End(const std::shared_ptr<Epoch>& epoch) {
  std::lock_guard lock(mu_);
  auto it = std::find(epochs_.begin(), epochs_.end(), epoch);
  if (it != epochs_.end()) Retire(it);  // else cut already
}

void PageVersions::Charge(const std::shared_ptr<Epoch>& epoch, uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (epoch->cut.load(std::memory_order_acquire)) return;
  epoch->charged += bytes;
  bytes_ += bytes;
  if (limit_ != 0 && bytes_ > limit_ && !DemoteOverLimit()) {
    // What does not fit is this epoch's own charge: it goes, not the older
    // epochs whose readers are under way.
    auto it = std::find(epochs_.begin(), epochs_.end(), epoch);
    if (it != epochs_.end()) {
      Retire(it);
      ++epochs_cut_;
    }
  }
}

void PageVersions::Capture(PageId id, log::Lsn before, log::Lsn end,
                           const std::function<void(uint8_t*)>& fill, const Recipe& recipe) {
  if (!Wants(before)) return;  // E2, or changed past every L
  std::lock_guard lock(mu_);
  std::shared_ptr<std::vector<uint8_t>> image;
  bool kept = false;
  for (const std::shared_ptr<Epoch>& e : epochs_) {
    if (before > e->lsn || end <= e->lsn || e->images.count(id) != 0 || e->recipes.count(id) != 0) {
      continue;
    }
    if (recipe) {  // E4
      e->recipes.emplace(id, recipe);
      bytes_ += RecipeBytes(*recipe);
      storage_backed_.fetch_add(1, std::memory_order_release);
      kept = true;
      continue;
    }
    if (!image) {
      image = std::make_shared<std::vector<uint8_t>>(page_size_);
      fill(image->data());
      ++captures_;
    }
    e->images.emplace(id, image);
    bytes_ += page_size_;
  }
  if (kept) ++deferred_;
  if (image || kept) CutOverLimit();
}

std::vector<Recipe> PageVersions::RecipesOf(PageId id) const {
  std::vector<Recipe> out;
  std::lock_guard lock(mu_);
  for (const std::shared_ptr<Epoch>& e : epochs_) {
    auto it = e->recipes.find(id);
    if (it != e->recipes.end() && std::find(out.begin(), out.end(), it->second) == out.end()) {
      out.push_back(it->second);
    }
  }
  return out;
}

void PageVersions::Install(PageId id, const PageRecipe* recipe, const VersionImage& image,
                           bool before_write) {
  std::lock_guard lock(mu_);
  bool installed = false;
  for (const std::shared_ptr<Epoch>& e : epochs_) {
    auto it = e->recipes.find(id);
    if (it == e->recipes.end() || it->second.get() != recipe) continue;
    bytes_ -= RecipeBytes(*recipe);
    if (before_write) {
      storage_backed_.fetch_sub(1, std::memory_order_release);
    } else {
      e->rebuildable.emplace(id, it->second);  // stays counted in storage_backed_
    }
    e->recipes.erase(it);
    e->images.emplace(id, image);
    bytes_ += page_size_;
    installed = true;
  }
  if (!installed) return;
  ++(before_write ? rebuilt_before_write_ : rebuilt_);
  CutOverLimit();
}

void PageVersions::CutHolders(PageId id, const PageRecipe* recipe) {
  std::lock_guard lock(mu_);
  for (auto it = epochs_.begin(); it != epochs_.end();) {
    auto r = (*it)->recipes.find(id);
    if (r != (*it)->recipes.end() && r->second.get() == recipe) {
      (*it)->unbuildable.store(true, std::memory_order_release);
      Retire(it);  // erases it from epochs_
      ++epochs_unbuildable_;
      it = epochs_.begin();
    } else {
      ++it;
    }
  }
}

void PageVersions::Pin(PageId id) {
  std::lock_guard lock(mu_);
  for (const std::shared_ptr<Epoch>& e : epochs_) {
    if (e->rebuildable.erase(id) != 0) storage_backed_.fetch_sub(1, std::memory_order_release);
  }
}

bool PageVersions::DemoteOverLimit() {
  for (const std::shared_ptr<Epoch>& e : epochs_) {
    while (limit_ != 0 && bytes_ > limit_ && !e->rebuildable.empty()) {
      auto it = e->rebuildable.begin();
      e->images.erase(it->first);  // a reader holding it keeps its copy
      bytes_ -= page_size_;
      bytes_ += RecipeBytes(*it->second);
      e->recipes.emplace(it->first, std::move(it->second));
      e->rebuildable.erase(it);
      ++demoted_;
    }
  }
  return limit_ == 0 || bytes_ <= limit_;
}

void PageVersions::CutOverLimit() {
  if (DemoteOverLimit()) return;
  while (limit_ != 0 && bytes_ > limit_ && !epochs_.empty()) {
    Retire(epochs_.begin());
    ++epochs_cut_;
  }
}

PageVersions::Kept PageVersions::Find(const Epoch& epoch, PageId id) const {
  std::lock_guard lock(mu_);
  Kept kept;
  if (auto it = epoch.images.find(id); it != epoch.images.end()) kept.image = it->second;
  if (auto it = epoch.recipes.find(id); it != epoch.recipes.end()) kept.recipe = it->second;
  return kept;
}

Status PageVersions::Unbuildable(const Epoch& epoch) {
  return Status::SnapshotTooOld(StrFormat(
      "snapshot too old: a page as of LSN %llu it reads could not be rebuilt from its file "
      "image and per-page log before the page was written (see the error log); start the "
      "transaction again",
      static_cast<unsigned long long>(epoch.lsn)));
}

Result<PageVersions::Kept> PageVersions::Image(const Epoch& epoch, PageId id) const {
  if (epoch.unbuildable.load(std::memory_order_acquire)) return Unbuildable(epoch);
  if (epoch.cut.load(std::memory_order_acquire)) {
    return Status::SnapshotTooOld(StrFormat(
        "snapshot too old: the copies of pages as of LSN %llu it reads went over their budget "
        "(subito_snapshot_page_budget); start the transaction again",
        static_cast<unsigned long long>(epoch.lsn)));
  }
  Kept kept = Find(epoch, id);
  if (kept.image || kept.recipe) return kept;
  // Cut between the two looks, or never captured.
  if (epoch.cut.load(std::memory_order_acquire)) return Image(epoch, id);
  return Status::Corruption(
      StrFormat("space %u page %u: changed past LSN %llu, but no image of it "
                "as of that LSN was kept",
                id.space, id.page_no, static_cast<unsigned long long>(epoch.lsn)));
}

void PageVersions::DropSpace(uint32_t space) {
  std::lock_guard lock(mu_);
  for (const std::shared_ptr<Epoch>& e : epochs_) {
    for (auto it = e->images.begin(); it != e->images.end();) {
      if (it->first.space == space) {
        bytes_ -= page_size_;
        it = e->images.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = e->recipes.begin(); it != e->recipes.end();) {
      if (it->first.space == space) {
        bytes_ -= RecipeBytes(*it->second);
        storage_backed_.fetch_sub(1, std::memory_order_release);
        it = e->recipes.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = e->rebuildable.begin(); it != e->rebuildable.end();) {
      if (it->first.space == space) {
        storage_backed_.fetch_sub(1, std::memory_order_release);
        it = e->rebuildable.erase(it);
      } else {
        ++it;
      }
    }
  }
}

PageVersions::Stats PageVersions::stats() const {
  std::lock_guard lock(mu_);
  Stats s;
  s.epochs = epochs_.size();
  for (const std::shared_ptr<Epoch>& e : epochs_) {
    s.images += e->images.size();
    s.recipes += e->recipes.size();
  }
  s.bytes = bytes_;
  s.captures = captures_;
  s.epochs_cut = epochs_cut_;
  s.deferred = deferred_;
  s.rebuilt = rebuilt_;
  s.rebuilt_before_write = rebuilt_before_write_;
  s.demoted = demoted_;
  s.epochs_unbuildable = epochs_unbuildable_;
  return s;
}

}  // namespace subito::buffer
