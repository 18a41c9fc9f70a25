// The buffer pool's side of pages as of an LSN (page_versions.h): fetches
// in a ReadAsOf scope, and the old page + per-page log recipes of E4, taken
// when a page is changed past an epoch's L, built when a reader needs the
// page or before the page is written.
#include <cstring>

#include "buffer/buffer_pool.h"
#include "buffer/buffer_pool_frame.h"
#include "page/page_format.h"
#include "util/aligned_buffer.h"
#include "util/strings.h"

namespace subito::buffer {

Result<PageHandle> BufferPool::FetchAsOf(PageId id, const PageVersions::Epoch& epoch) {
  auto image_handle = [&](VersionImage image) {
    PageHandle old;
    old.id_ = id;
    old.latch_ = Latch::kShared;
    old.image_ = std::move(image);
    old.data_ = const_cast<uint8_t*>(old.image_->data());  // read only: a shared handle
    return old;
  };
  auto kept_handle = [&](const PageVersions::Kept& kept) -> Result<PageHandle> {
    if (kept.image) return image_handle(kept.image);
    Result<VersionImage> built = Rebuild(epoch, id);
    if (!built.ok()) return built.status();
    return image_handle(std::move(*built));
  };
  // What the epoch keeps is the page as of the epoch: no need to read the
  // current page.
  PageVersions::Kept kept = versions_.Find(epoch, id);
  if (kept.image || kept.recipe) return kept_handle(kept);
  Result<PageHandle> h = FetchFrame(id, Latch::kShared);
  if (!h.ok() || page::PageLsn(h->data()) <= epoch.lsn) return h;
  Result<PageVersions::Kept> later = versions_.Image(epoch, id);  // captured before it changed (E1)
  if (!later.ok()) return later.status();
  h->Release();
  return kept_handle(*later);
}

Recipe BufferPool::RecipeFor(uint32_t frame, log::Lsn lsn) {
  // Without per-page logs nearly every changed page is written soon, and a
  // recipe would only trade the copy for a read of the file image then.
  if (options_.page_log == nullptr) return nullptr;
  Frame& f = *frames_[frame];
  bool dirty = false;
  {
    std::lock_guard lock(mu_);
    if (f.flushing) return nullptr;  // its file image may be changing (E4)
    dirty = f.dirty;
  }
  auto recipe = std::make_shared<PageRecipe>();
  recipe->lsn = lsn;
  if (!dirty) return recipe;  // its bytes are its file image and page-log entries
  // The caller holds the page exclusively: log_off, log_blocked and
  // log_pending are the Mtrs' and the flush's, which needs the latch shared.
  if (f.log_off || f.log_blocked.load(std::memory_order_relaxed)) {
    return nullptr;  // changes that are in no page log: copy the page
  }
  const log::Lsn done = f.log_done_lsn.load(std::memory_order_relaxed);
  ForEachPendingEntry(f.log_pending,
                      [&](uint64_t end, const uint8_t* entry, const uint8_t*, uint32_t n) {
                        if (end > done) {
                          recipe->pending.insert(recipe->pending.end(), entry, entry + 12 + n);
                        }
                      });
  return recipe;
}

Result<VersionImage> BufferPool::BuildImage(PageId id, const PageRecipe& recipe) {
  const uint32_t ps = options_.page_size;
  page::SpaceFile* space = Space(id.space);
  if (space == nullptr) return Status::NotFound(StrFormat("space %u is not open", id.space));
  Result<AlignedBuffer> buf = AlignedBuffer::Allocate(ps);  // O_DIRECT reads want alignment
  if (!buf.ok()) return buf.status();
  uint8_t* const p = buf->get();
  SUBITO_RETURN_IF_ERROR(space->ReadPage(id.page_no, p));
  log::Lsn lsn = page::PageLsn(p);
  // The entries up to the recipe's LSN: those in the store, then those that
  // were not in it yet (either may hold some of the other's: skipped by LSN).
  if (options_.page_log != nullptr) {
    SUBITO_RETURN_IF_ERROR(
        ApplyStoredEntries(*options_.page_log, p, ps, id.space, id.page_no, &lsn, recipe.lsn));
  }
  Status st;
  ForEachPendingEntry(
      recipe.pending, [&](uint64_t end, const uint8_t*, const uint8_t* edits, uint32_t n) {
        if (st.ok()) {
          st = ApplyEntryIfNewer(p, ps, id.space, id.page_no, end, edits, n, &lsn, recipe.lsn);
        }
      });
  SUBITO_RETURN_IF_ERROR(st);
  if (lsn != recipe.lsn) {
    return Status::Corruption(StrFormat(
        "page %u of space %u: its file image and per-page log entries rebuild it as of LSN %llu, "
        "not as of LSN %llu, where an old snapshot reads it",
        id.page_no, id.space, static_cast<unsigned long long>(lsn),
        static_cast<unsigned long long>(recipe.lsn)));
  }
  return VersionImage(std::make_shared<const std::vector<uint8_t>>(p, p + ps));
}

Result<VersionImage> BufferPool::Rebuild(const PageVersions::Epoch& epoch, PageId id) {
  // Builds happen one at a time, so that a write of the page (which builds
  // its recipes first) never overlaps a reader's read of its file image.
  std::lock_guard lock(rebuild_mu_);
  // Looked up again: built meanwhile (before a write), or turned back into a
  // recipe (E4), or the epoch was cut.
  Result<PageVersions::Kept> now = versions_.Image(epoch, id);
  if (!now.ok()) return now.status();
  if (now->image) return now->image;
  Result<VersionImage> built = BuildImage(id, *now->recipe);
  if (!built.ok()) {
    // Cut meanwhile (a write that found no recipe held any more may have
    // changed the file image under this read): the cut, not the read, is
    // what to report.
    Result<PageVersions::Kept> after = versions_.Image(epoch, id);
    return after.ok() ? built.status() : after.status();
  }
  versions_.Install(id, now->recipe.get(), *built, /*before_write=*/false);
  return built;
}

void BufferPool::BuildBeforeWrite(const std::vector<PageImage>& writes) {
  if (!versions_.storage_backed()) return;
  std::lock_guard lock(rebuild_mu_);
  for (const PageImage& w : writes) {
    const PageId id{w.space_id, w.page_no};
    versions_.Pin(id);  // first: no built image of it turns back into a recipe after this
    for (const Recipe& recipe : versions_.RecipesOf(id)) {
      Result<VersionImage> built = BuildImage(id, *recipe);
      if (built.ok()) {
        versions_.Install(id, recipe.get(), *built, /*before_write=*/true);
        continue;
      }
      // The write goes ahead (it does not wait for the snapshots' readers);
      // the snapshots that needed the old image are cut.
      versions_.CutHolders(id, recipe.get());
      if (options_.report) {
        options_.report(
            StrFormat("Subito: an old snapshot's image of page %u of space %u could not "
                      "be rebuilt before the page was written (%s); the snapshots "
                      "reading it are cut",
                      id.page_no, id.space, built.status().ToString().c_str()));
      }
    }
  }
}

}  // namespace subito::buffer
