// PageVersions: pages as they were at an LSN, for readers of an old
// snapshot (txn/: a snapshot that would otherwise hold back the purge of
// row versions past their budget reads the trees as of an LSN instead).
// Nothing here is persistent: after a restart no snapshot exists.
//
// An epoch is an LSN L. "The tree as of L" is every page as it was after
// each mini-transaction that ended at or before L and none that ended after
// it: a consistent tree, since an Mtr stamps its pages with its end LSN
// while it holds them exclusively latched, so each page sees Mtrs in LSN
// order. A page's image as of L is
//   - its current image, while its page_lsn <= L;
//   - else what the first Mtr that changed it past L kept: that Mtr (end >
//     L, the page's page_lsn before it <= L) copies the page with its own
//     edits reverted, or keeps a recipe that rebuilds it (E4), under the
//     same exclusive latch and before it stamps the new page_lsn.
// So a reader that latches a page and finds page_lsn > L finds its image
// or recipe here (or the epoch was cut).
//
// Invariants:
//  E1. Begin publishes the epoch (active_), then reads the log's reserved
//      LSN as L with a read-modify-write; an Mtr reserves its LSNs (also a
//      read-modify-write of the same counter), then looks for epochs. If the
//      Mtr's reservation comes after Begin's in the counter's order, it
//      reads from it (acquire/release) and finds the epoch; else L counts
//      the Mtr's LSNs (end <= L: nothing to capture). Begin holds mu_ until
//      L is set; an Mtr that found epochs takes mu_.
//  E2. A page never initialized (page_lsn 0: allocated at the end of its
//      space) is not captured: no tree as of any L reaches it.
//  E3. Past limit bytes of images, recipes and charges (first turning
//      rebuildable images back into recipes, E4) the oldest epoch is cut
//      (or, for a charge, the charging epoch): its images go,
//      it captures nothing more, and its readers' next fetch of a page
//      changed past L fails with SnapshotTooOld. An image handed out stays
//      valid (shared); a current page with page_lsn <= L is still exact.
//  E4. Old page + per-page logs (NV-PPL's multi-versioning, seed 001). A
//      page whose bytes before the Mtr are rebuildable from storage is not
//      copied: the epoch keeps a recipe, the page's LSN and the changes not
//      yet in its page log (the pool's pending entries, usually none). That
//      is so when no write of the page is in flight and the page is clean
//      (its bytes are its file image with its page-log entries applied), or
//      dirty with every change since its file image in its page-log entries
//      and pending ones. Its image as of L is then its file image with the
//      entries up to the recipe's LSN applied (page-log entries are only
//      appended, or freed after a write). The file image stays that until
//      the page is next written, and the pool builds every recipe of a page
//      before it writes it; a recipe is never taken while a write of the
//      page is in flight: the pool refuses one while the page's frame is
//      being flushed (from before the flush copies it until after its write
//      and clean-up), and the flush copies the page under its latch, after
//      any capture's exclusive latch, and builds the recipes after that.
//      The one write made while a frame is not flushing, the page writer's
//      retry of a failed batch, is of a page left dirty and blocked
//      (log_blocked) until a write of it succeeds: such a page is copied.
//      A build whose entries do not end at the recipe's LSN is Corruption.
//      Only a pool with a page log takes recipes: without one nearly every
//      changed page is soon written, and a recipe would only trade the copy
//      for a read then.
//      An image built for a reader stays rebuildable from its recipe until
//      the page is next written (the pool pins it then, before it builds
//      the page's recipes): past the limit such images go back to recipes
//      before any epoch is cut, so the memory of old pages that storage can
//      rebuild stays bounded without cutting their snapshots.
//
// Cost: an Mtr pays an atomic load while no epoch exists; with
// epochs, one page copy per page and epoch, at the page's first change past
// L (whatever the number of changes after it: row versions grow with each),
// or a recipe (E4: the pool's mutex, the pending entries copied) and, if a
// reader needs the page or it is written, one read of its file image,
// counted as a page read of its space.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "buffer/page_id.h"
#include "log/redo_log.h"
#include "subito/status.h"

namespace subito::buffer {

using VersionImage = std::shared_ptr<const std::vector<uint8_t>>;

// E4: how to rebuild a page as of the epochs that hold this recipe.
struct PageRecipe {
  log::Lsn lsn = 0;  // the page's LSN as of those epochs
  // Changes not in the page log when captured: u64 end_lsn, u32 n, then n
  // page-log edit bytes (buffer/page_log.h), oldest first.
  std::vector<uint8_t> pending;
};
using Recipe = std::shared_ptr<const PageRecipe>;

class PageVersions {
 public:
  struct Epoch {
    log::Lsn lsn = 0;              // L: set before anyone else sees the epoch (E1)
    std::atomic<bool> cut{false};  // cut (E3) or ended: its images are gone
    // Cut because a page it needed could not be rebuilt before its write (E4).
    std::atomic<bool> unbuildable{false};
    // Guarded by PageVersions::mu_.
    std::unordered_map<PageId, VersionImage, PageIdHash> images;
    std::unordered_map<PageId, Recipe, PageIdHash> recipes;  // E4; none of these in images
    // E4: images built for readers, by the recipe that rebuilds them while
    // their pages are not written.
    std::unordered_map<PageId, Recipe, PageIdHash> rebuildable;
    uint64_t charged = 0;  // bytes its owner added with Charge
  };
  struct Stats {
    uint64_t epochs = 0, images = 0, bytes = 0, captures = 0, epochs_cut = 0;
    // E4: recipes held now; captures that took one instead of a copy; and
    // recipes built into images, for a reader or before a write.
    uint64_t recipes = 0, deferred = 0, rebuilt = 0, rebuilt_before_write = 0;
    uint64_t demoted = 0;             // built images turned back into recipes past the limit
    uint64_t epochs_unbuildable = 0;  // cut for a recipe that failed to build before a write
  };
  // What an epoch keeps of a page: an image, a recipe, or neither.
  struct Kept {
    VersionImage image;
    Recipe recipe;
  };

  // limit_bytes 0: no limit.
  PageVersions(uint32_t page_size, uint64_t limit_bytes)
      : page_size_(page_size), limit_(limit_bytes) {}
  PageVersions(const PageVersions&) = delete;
  PageVersions& operator=(const PageVersions&) = delete;

  // A new epoch as of the log's reserved LSN now (E1). Ended by End.
  std::shared_ptr<Epoch> Begin(log::RedoLog& log);
  void End(const std::shared_ptr<Epoch>& epoch);
  // Counts bytes the epoch's owner keeps for it (txn/: its overlay) against
  // the limit, until the epoch ends or is cut (E3). Past the limit, this
  // epoch is cut (not the oldest).
  void Charge(const std::shared_ptr<Epoch>& epoch, uint64_t bytes);

  // Mtr::Commit, after its append (E1): whether any epoch may need a capture.
  bool active() const { return active_.load(std::memory_order_acquire) != 0; }
  // Whether a page whose page_lsn is `before` may be captured by some epoch
  // (E2, and no epoch's L below it): the Mtr asks before it builds a recipe.
  bool Wants(log::Lsn before) const {
    return before != 0 && before <= newest_.load(std::memory_order_acquire);
  }
  // Mtr::Commit, holding the page exclusively latched: the page (page_lsn
  // `before` until this Mtr) changes with an Mtr ending at `end`. Epochs
  // that need the page keep `recipe` if there is one (E4), else a copy that
  // `fill` writes: the page as it was before the Mtr. A page changed past
  // every epoch's L already costs no lock.
  void Capture(PageId id, log::Lsn before, log::Lsn end, const std::function<void(uint8_t*)>& fill,
               const Recipe& recipe = nullptr);
  // What the epoch keeps of the page (the caller found its page_lsn past the
  // epoch's L under the page latch): an image or a recipe. SnapshotTooOld if
  // the epoch was cut, Corruption if it keeps neither.
  Result<Kept> Image(const Epoch& epoch, PageId id) const;
  // What the epoch keeps of the page if anything (an image is the page as of
  // the epoch, whatever the page holds now).
  Kept Find(const Epoch& epoch, PageId id) const;
  // E4. Whether epochs hold any recipe or rebuildable image.
  bool storage_backed() const { return storage_backed_.load(std::memory_order_acquire) != 0; }
  // Before the page's file image changes: its built images stop being
  // rebuildable (call first), then RecipesOf lists the recipes still held
  // for it, and Install hands each one's image to every epoch holding it.
  void Pin(PageId id);
  std::vector<Recipe> RecipesOf(PageId id) const;
  void Install(PageId id, const PageRecipe* recipe, const VersionImage& image, bool before_write);
  // A recipe that cannot be built before its page is written: the epochs
  // holding it are cut (their readers get SnapshotTooOld).
  void CutHolders(PageId id, const PageRecipe* recipe);
  // What a read of an epoch cut that way fails with.
  static Status Unbuildable(const Epoch& epoch);
  // Forgets the images and recipes of a dropped space.
  void DropSpace(uint32_t space);
  Stats stats() const;

 private:
  // Past the limit, turns rebuildable images back into recipes (E4); then
  // cuts the oldest epochs while still over (E3). Caller holds mu_.
  void CutOverLimit();
  // The first step alone; whether the bytes are within the limit after it.
  bool DemoteOverLimit();
  // Takes the epoch out of epochs_ (at `it`), its bytes out of bytes_, and
  // marks it cut. Caller holds mu_.
  void Retire(std::vector<std::shared_ptr<Epoch>>::iterator it);
  // The newest epoch's L while epochs exist; kMaxLsn while an epoch is
  // being begun. Captures of pages whose page_lsn is past it skip mu_.
  void UpdateNewest();
  static constexpr log::Lsn kMaxLsn = ~log::Lsn{0};
  // What a recipe counts against the limit until it is built.
  static uint64_t RecipeBytes(const PageRecipe& r) { return sizeof(PageRecipe) + r.pending.size(); }
  std::atomic<log::Lsn> newest_{0};
  const uint32_t page_size_;
  const uint64_t limit_;
  std::atomic<int> active_{0};  // epochs_.size(), for Mtrs' look without mu_
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Epoch>> epochs_;  // not cut, oldest first
  uint64_t bytes_ = 0;                          // of images, recipes and charges in epochs_
  uint64_t captures_ = 0, epochs_cut_ = 0;
  uint64_t deferred_ = 0, rebuilt_ = 0, rebuilt_before_write_ = 0;
  uint64_t demoted_ = 0, epochs_unbuildable_ = 0;
  // Recipes and rebuildable images held by epochs_, for writers' look
  // without mu_.
  std::atomic<uint64_t> storage_backed_{0};
};

// While alive, shared fetches from BufferPool (in this thread) return pages
// as of the epoch: current pages whose page_lsn is <= L, else their images.
// Nests; null: current pages again.
class ReadAsOf {
 public:
  explicit ReadAsOf(const PageVersions::Epoch* epoch) : saved_(current_) { current_ = epoch; }
  ~ReadAsOf() { current_ = saved_; }
  ReadAsOf(const ReadAsOf&) = delete;
  ReadAsOf& operator=(const ReadAsOf&) = delete;
  static const PageVersions::Epoch* current() { return current_; }

 private:
  const PageVersions::Epoch* const saved_;
  static thread_local const PageVersions::Epoch* current_;
};

}  // namespace subito::buffer
