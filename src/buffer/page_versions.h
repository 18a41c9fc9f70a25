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
//   - else the image captured by the first Mtr that changed it past L: that
//     Mtr (end > L, the page's page_lsn before it <= L) copies the page with
//     its own edits reverted, under the same exclusive latch and before it
//     stamps the new page_lsn.
// So a reader that latches a page and finds page_lsn > L finds its image
// here (or the epoch was cut).
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
//  E3. Past limit bytes of images the oldest epoch is cut: its images go,
//      it captures nothing more, and its readers' next fetch of a page
//      changed past L fails with SnapshotTooOld. An image handed out stays
//      valid (shared); a current page with page_lsn <= L is still exact.
//
// Cost: an Mtr pays an atomic load while no epoch exists; with
// epochs, one page copy per page and epoch, at the page's first change past
// L (whatever the number of changes after it: row versions grow with each).
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

class PageVersions {
 public:
  struct Epoch {
    log::Lsn lsn = 0;              // L: set before anyone else sees the epoch (E1)
    std::atomic<bool> cut{false};  // cut (E3) or ended: its images are gone
    // Guarded by PageVersions::mu_.
    std::unordered_map<PageId, VersionImage, PageIdHash> images;
    uint64_t charged = 0;  // bytes its owner added with Charge
  };
  struct Stats {
    uint64_t epochs = 0, images = 0, bytes = 0, captures = 0, epochs_cut = 0;
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
  // Mtr::Commit, holding the page exclusively latched: the page (page_lsn
  // `before` until this Mtr) changes with an Mtr ending at `end`. `fill`
  // writes the page as it was before the Mtr, if an epoch needs it. A page
  // changed past every epoch's L already costs no lock.
  void Capture(PageId id, log::Lsn before, log::Lsn end, const std::function<void(uint8_t*)>& fill);
  // The captured image of the page as of the epoch (the caller found its
  // page_lsn past the epoch's L under the page latch); SnapshotTooOld if
  // the epoch was cut, Corruption if there is none.
  Result<VersionImage> Image(const Epoch& epoch, PageId id) const;
  // The image if one was captured (then it is the page as of the epoch,
  // whatever the page holds now); null if none (yet).
  VersionImage Find(const Epoch& epoch, PageId id) const;
  // Forgets the images of a dropped space.
  void DropSpace(uint32_t space);
  Stats stats() const;

 private:
  // Cuts the oldest epochs while over the limit (E3). Caller holds mu_.
  void CutOverLimit();
  // Takes the epoch out of epochs_ (at `it`), its bytes out of bytes_, and
  // marks it cut. Caller holds mu_.
  void Retire(std::vector<std::shared_ptr<Epoch>>::iterator it);
  // The newest epoch's L while epochs exist; kMaxLsn while an epoch is
  // being begun. Captures of pages whose page_lsn is past it skip mu_.
  void UpdateNewest();
  static constexpr log::Lsn kMaxLsn = ~log::Lsn{0};
  std::atomic<log::Lsn> newest_{0};
  const uint32_t page_size_;
  const uint64_t limit_;
  std::atomic<int> active_{0};  // epochs_.size(), for Mtrs' look without mu_
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Epoch>> epochs_;  // not cut, oldest first
  uint64_t bytes_ = 0;                          // of images in epochs_
  uint64_t captures_ = 0, epochs_cut_ = 0;
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
