// Overflow chains of a B-tree: writing, reading, retiring, restoring and
// freeing them (rules C1-C4 in btree.h; layout in tree_op.h and
// docs/formats/page.md).
#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "btree/tree_op.h"

namespace subito::btree {

bool BTree::IsChainRef(std::string_view stored) {
  return stored.size() == kRefSize && stored[0] == kChain;
}

uint32_t BTree::ChunkPages() const {
  // One chunk's page images make one log record, and its pages stay
  // latched until it commits.
  const uint64_t by_log = pool_->log()->max_payload() / 2 / (pool_->page_size() + 64);
  const uint64_t by_pool = pool_->frame_count() / 8;
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min(by_log, by_pool)));
}

uint64_t BTree::chunk_bytes() const {
  return uint64_t{ChunkPages()} * (pool_->page_size() - kChainData);
}

Result<std::string> BTree::ReadValue(std::string_view stored) {
  if (stored.empty()) return Status::Corruption(StrFormat("space %u: empty stored value", space_));
  if (stored[0] == kInline) return std::string(stored.substr(1));
  if (stored.size() != kRefSize || (stored[0] != kOverflow && stored[0] != kChain)) {
    return Status::Corruption(StrFormat("space %u: unknown stored value tag", space_));
  }
  const bool format1 = stored[0] == kOverflow;
  const uint8_t type = format1 ? page::kPageOverflow : page::kPageChain;
  const uint32_t next_at = format1 ? kOverflowNext : kChainNext;
  const uint32_t len_at = format1 ? kOverflowLen : kChainLen;
  const uint32_t data_at = format1 ? kOverflowData : kChainData;
  const uint32_t total = RefLength(stored);
  uint32_t page_no = RefHead(stored);
  const uint32_t cap = pool_->page_size() - data_at;
  std::string out;
  // A damaged length must not allocate gigabytes before the chain is read.
  out.reserve(std::min<uint32_t>(total, 64u << 20));
  for (uint32_t pages = 0; out.size() < total; ++pages) {
    if (page_no == 0 || pages > total / cap + 1) {
      return Status::Corruption(
          StrFormat("space %u: overflow chain of a %u-byte value ends early", space_, total));
    }
    Result<PageHandle> h = pool_->Fetch({space_, page_no}, Latch::kShared);
    if (!h.ok()) return h.status();
    const uint8_t* d = h->data();
    const uint32_t len = DecodeFixed32(d + len_at);
    if (page::TypeOf(d) != type || len > cap || len > total - out.size()) {
      return Status::Corruption(
          StrFormat("space %u page %u: not a valid overflow page", space_, page_no));
    }
    out.append(reinterpret_cast<const char*>(d + data_at), len);
    page_no = DecodeFixed32(d + next_at);
  }
  return out;
}

Result<std::string> BTree::ReadChain(std::string_view ref) {
  if (!IsChainRef(ref)) return Status::InvalidArgument("not a chain reference");
  return ReadValue(ref);
}

// A chain short enough for the operation that links it, written forward.
Result<uint32_t> BTree::WriteChain(Op& op, std::string_view value) {
  const uint32_t ps = pool_->page_size(), cap = ps - kChainData;
  std::vector<PageHandle*> pages;
  for (size_t done = 0; done < value.size(); done += cap) {
    Result<PageHandle*> h = op.NewPage();
    if (!h.ok()) return h.status();
    pages.push_back(*h);
  }
  std::vector<uint8_t> img(ps);
  for (size_t k = 0; k < pages.size(); ++k) {
    page::InitPage(img.data(), ps, page::kPageChain, space_, pages[k]->id().page_no);
    const size_t off = k * cap, len = std::min<size_t>(cap, value.size() - off);
    EncodeFixed32(img.data() + kChainNext, k + 1 < pages.size() ? pages[k + 1]->id().page_no : 0);
    EncodeFixed32(img.data() + kChainLen, static_cast<uint32_t>(len));
    std::memcpy(img.data() + kChainData, value.data() + off, len);
    op.Put(pages[k], img);
  }
  return pages.front()->id().page_no;
}

uint32_t BTree::AcquireSlot() {
  std::unique_lock lock(slot_mu_);
  const uint32_t all = (1u << kBuildSlots) - 1;
  slot_cv_.wait(lock, [&] { return slots_busy_ != all; });
  uint32_t slot = 0;
  while (slots_busy_ & (1u << slot)) ++slot;
  slots_busy_ |= 1u << slot;
  return slot;
}

void BTree::ReleaseSlot(uint32_t slot) {
  {
    std::lock_guard lock(slot_mu_);
    slots_busy_ &= ~(1u << slot);
  }
  slot_cv_.notify_one();
}

Result<BTree::Prepared> BTree::Prepare(std::string_view value) {
  if (value.size() > max_value()) {
    return Status::TooLarge(
        StrFormat("value of %zu bytes exceeds the limit of %u", value.size(), max_value()));
  }
  if (value.empty()) return Status::InvalidArgument("an empty value needs no chain");
  Prepared p(this, AcquireSlot());
  const uint32_t ps = pool_->page_size(), cap = ps - kChainData, per = ChunkPages();
  const uint64_t n = (value.size() + cap - 1) / cap;
  const uint32_t slot_at = kMetaBuilding + 4 * p.slot_;
  uint32_t next = 0;  // first page of the part written so far
  std::vector<uint8_t> img(ps);
  for (uint64_t end = n; end > 0;) {
    const uint64_t begin = end > per ? end - per : 0;
    SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
    Op op(this);
    Result<PageHandle*> meta = op.Page(0, false);
    if (!meta.ok()) return meta.status();
    if (end == n) {
      // A slot left by a builder that crashed before recovery ran (C4).
      const uint32_t stale = DecodeFixed32((*meta)->data() + slot_at);
      if (stale != 0) SUBITO_RETURN_IF_ERROR(PushGarbage(op, stale));
    }
    std::vector<PageHandle*> pages;
    for (uint64_t k = begin; k < end; ++k) {
      Result<PageHandle*> h = op.NewPage();
      if (!h.ok()) return h.status();
      pages.push_back(*h);
    }
    for (uint64_t k = begin; k < end; ++k) {
      PageHandle* h = pages[k - begin];
      page::InitPage(img.data(), ps, page::kPageChain, space_, h->id().page_no);
      const uint64_t off = k * cap;
      const size_t len = std::min<uint64_t>(cap, value.size() - off);
      EncodeFixed32(img.data() + kChainNext,
                    k + 1 < end ? pages[k + 1 - begin]->id().page_no : next);
      EncodeFixed32(img.data() + kChainLen, static_cast<uint32_t>(len));
      std::memcpy(img.data() + kChainData, value.data() + off, len);
      op.Put(h, img);
    }
    op.Write32(*meta, slot_at, pages.front()->id().page_no);
    SUBITO_RETURN_IF_ERROR(op.Commit());
    next = pages.front()->id().page_no;
    end = begin;
  }
  p.ref_ = ChainRef(static_cast<uint32_t>(value.size()), next);
  return p;
}

Status BTree::Put(std::string_view key, Prepared value, ChainMoves* moves) {
  if (value.tree_ != this || value.ref_.empty()) {
    return Status::InvalidArgument("the value was not prepared by this tree");
  }
  SUBITO_RETURN_IF_ERROR(CheckKey(key));
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  {
    std::unique_lock tree(latch_);
    Result<std::vector<uint32_t>> path = Path(key);
    if (!path.ok()) return path.status();
    Op op(this);
    op.set_moves(moves);
    Result<PageHandle*> meta = op.Page(0, false);
    if (!meta.ok()) return meta.status();
    op.Write32(*meta, kMetaBuilding + 4 * value.slot_, 0);
    SUBITO_RETURN_IF_ERROR(InsertAt(op, std::move(*path), {std::string(key), value.ref_}));
  }
  value.tree_ = nullptr;  // linked: the slot is free again
  ReleaseSlot(value.slot_);
  return Status::OK();
}

void BTree::DiscardSlot(uint32_t slot) {
  const uint32_t slot_at = kMetaBuilding + 4 * slot;
  Status st = pool_->LogFreeCheck();
  if (st.ok()) {
    Op op(this);
    Result<PageHandle*> meta = op.Page(0, false);
    st = meta.status();
    if (st.ok()) {
      const uint32_t head = DecodeFixed32((*meta)->data() + slot_at);
      if (head != 0) st = PushGarbage(op, head);
      if (st.ok()) {
        op.Write32(*meta, slot_at, 0);
        st = op.Commit();
      }
    }
  }
  // Free again even on failure: the next Prepare in this slot sends what
  // it still holds to garbage first.
  // The garbage is freed by the tree's owner (garbage_hint), never here: a
  // Prepared may be dropped where waiting for log space is not allowed.
  ReleaseSlot(slot);
}

Result<PageHandle*> BTree::ChainHead(Op& op, uint32_t page_no) {
  if (page_no == 0) return Status::Corruption(StrFormat("space %u: a chain at page 0", space_));
  Result<PageHandle*> h = op.Page(page_no, false);
  if (!h.ok()) return h.status();
  if (page::TypeOf((*h)->data()) != page::kPageChain) {
    return Status::Corruption(
        StrFormat("space %u page %u: not the first page of a chain", space_, page_no));
  }
  return h;
}

Status BTree::PushRetired(Op& op, uint32_t head) {
  Result<PageHandle*> meta = op.Page(0, false);
  if (!meta.ok()) return meta.status();
  Result<PageHandle*> h = ChainHead(op, head);
  if (!h.ok()) return h.status();
  const uint32_t old = DecodeFixed32((*meta)->data() + kMetaRetired);
  if (old != 0) {
    Result<PageHandle*> o = ChainHead(op, old);
    if (!o.ok()) return o.status();
    op.Write32(*o, kChainListPrev, head);
  }
  op.Write32(*h, kChainListPrev, 0);
  op.Write32(*h, kChainListNext, old);
  op.Write32(*meta, kMetaRetired, head);
  return Status::OK();
}

Status BTree::UnlinkRetired(Op& op, uint32_t head) {
  Result<PageHandle*> meta = op.Page(0, false);
  if (!meta.ok()) return meta.status();
  Result<PageHandle*> h = ChainHead(op, head);
  if (!h.ok()) return h.status();
  const uint32_t prev = DecodeFixed32((*h)->data() + kChainListPrev);
  const uint32_t next = DecodeFixed32((*h)->data() + kChainListNext);
  auto not_retired = [&] {
    return Status::Corruption(
        StrFormat("space %u: the chain at page %u is not on the retired list", space_, head));
  };
  if (prev == 0) {
    if (DecodeFixed32((*meta)->data() + kMetaRetired) != head) return not_retired();
    op.Write32(*meta, kMetaRetired, next);
  } else {
    Result<PageHandle*> p = ChainHead(op, prev);
    if (!p.ok()) return p.status();
    if (DecodeFixed32((*p)->data() + kChainListNext) != head) return not_retired();
    op.Write32(*p, kChainListNext, next);
  }
  if (next != 0) {
    Result<PageHandle*> n = ChainHead(op, next);
    if (!n.ok()) return n.status();
    if (DecodeFixed32((*n)->data() + kChainListPrev) != head) return not_retired();
    op.Write32(*n, kChainListPrev, prev);
  }
  op.Write32(*h, kChainListPrev, 0);
  op.Write32(*h, kChainListNext, 0);
  return Status::OK();
}

void BTree::Pin(uint32_t head) {
  std::lock_guard lock(pins_mu_);
  pins_.insert(head);
}

void BTree::Unpin(uint32_t head) {
  {
    std::lock_guard lock(pins_mu_);
    auto it = pins_.find(head);
    if (it != pins_.end()) pins_.erase(it);
  }
  unpinned_.notify_all();
}

bool BTree::Pinned(uint32_t head) {
  std::lock_guard lock(pins_mu_);
  return pins_.count(head) != 0;
}

Status BTree::PushGarbage(Op& op, uint32_t head) {
  Result<PageHandle*> meta = op.Page(0, false);
  if (!meta.ok()) return meta.status();
  Result<PageHandle*> h = ChainHead(op, head);
  if (!h.ok()) return h.status();
  op.Write32(*h, kChainListPrev, 0);
  op.Write32(*h, kChainListNext, DecodeFixed32((*meta)->data() + kMetaGarbage));
  op.Write32(*meta, kMetaGarbage, head);
  garbage_hint_.store(true, std::memory_order_relaxed);
  return Status::OK();
}

// Format 1 chains were bounded by the log and the pool when written: freed
// whole, in the operation that drops them.
Status BTree::FreeFormat1Chain(Op& op, uint32_t page_no) {
  for (int pages = 0; page_no != 0; ++pages) {
    if (pages > 1 << 20) return Status::Corruption("overflow chain does not end");
    Result<PageHandle*> h = op.Page(page_no, /*node=*/false);
    if (!h.ok()) return h.status();
    if (page::TypeOf((*h)->data()) != page::kPageOverflow) {
      return Status::Corruption(
          StrFormat("space %u page %u: not a valid overflow page", space_, page_no));
    }
    const uint32_t next = DecodeFixed32((*h)->data() + kOverflowNext);
    SUBITO_RETURN_IF_ERROR(op.Free(page_no));
    page_no = next;
  }
  return Status::OK();
}

Status BTree::DropStored(Op& op, std::string_view stored) {
  if (!stored.empty() && stored[0] == kInline) return Status::OK();
  if (stored.size() != kRefSize || (stored[0] != kOverflow && stored[0] != kChain)) {
    return Status::Corruption(StrFormat("space %u: unknown stored value tag", space_));
  }
  if (stored[0] == kOverflow) return FreeFormat1Chain(op, RefHead(stored));
  if (!op.retires()) return PushGarbage(op, RefHead(stored));
  SUBITO_RETURN_IF_ERROR(PushRetired(op, RefHead(stored)));
  op.Retired(std::string(stored));
  return Status::OK();
}

Status BTree::Restore(std::string_view key, std::string_view ref, ChainMoves* moves) {
  if (!IsChainRef(ref)) return Status::InvalidArgument("not a chain reference");
  SUBITO_RETURN_IF_ERROR(CheckKey(key));
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  std::unique_lock tree(latch_);
  Result<std::vector<uint32_t>> path = Path(key);
  if (!path.ok()) return path.status();
  Op op(this);
  op.set_moves(moves);
  Result<PageHandle*> leaf = op.Page(path->back());
  if (!leaf.ok()) return leaf.status();
  const NodeView n((*leaf)->data(), op.page_size());
  const uint16_t i = n.LowerBound(key);
  if (i < n.count() && n.Key(i) == key && n.Value(i) == ref) return Status::OK();  // C3
  SUBITO_RETURN_IF_ERROR(UnlinkRetired(op, RefHead(ref)));
  op.Restored(std::string(ref));
  return InsertAt(op, std::move(*path), {std::string(key), std::string(ref)});
}

Result<std::optional<std::string>> BTree::ChainOf(std::string_view key) {
  std::shared_lock tree(latch_);
  Result<std::vector<uint32_t>> path = Path(key);
  if (!path.ok()) return path.status();
  Result<PageHandle> leaf = Fetch(path->back(), Latch::kShared);
  if (!leaf.ok()) return leaf.status();
  const NodeView n(leaf->data(), pool_->page_size());
  const uint16_t i = n.LowerBound(key);
  if (i >= n.count() || n.Key(i) != key || !IsChainRef(n.Value(i))) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>(std::string(n.Value(i)));
}

Status BTree::Release(std::string_view ref) {
  if (!IsChainRef(ref)) return Status::InvalidArgument("not a chain reference");
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  {
    std::unique_lock tree(latch_);  // the retired list changes under it
    Op op(this);
    SUBITO_RETURN_IF_ERROR(UnlinkRetired(op, RefHead(ref)));
    SUBITO_RETURN_IF_ERROR(PushGarbage(op, RefHead(ref)));
    SUBITO_RETURN_IF_ERROR(op.Commit());
  }
  return Status::OK();
}

bool BTree::has_garbage() {
  Result<PageHandle> meta = pool_->Fetch({space_, 0}, Latch::kShared);
  return !meta.ok() || DecodeFixed32(meta->data() + kMetaGarbage) != 0;
}

Status BTree::CollectGarbage(const std::function<bool()>& stop) {
  std::lock_guard serial(garbage_mu_);
  const uint32_t per = ChunkPages();
  for (;;) {
    if (stop && stop()) return Status::OK();
    SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
    uint32_t pinned = 0;
    {
      Op op(this);
      Result<PageHandle*> meta = op.Page(0, false);
      if (!meta.ok()) return meta.status();
      const uint32_t head = DecodeFixed32((*meta)->data() + kMetaGarbage);
      if (head == 0) {
        garbage_hint_.store(false, std::memory_order_relaxed);
        return Status::OK();
      }
      if (Pinned(head)) {
        pinned = head;  // C2: a reader still reads it; wait without latches
      } else {
        SUBITO_RETURN_IF_ERROR(FreeGarbageChunk(op, *meta, head, per));
        SUBITO_RETURN_IF_ERROR(op.Commit());
        continue;
      }
    }
    std::unique_lock lock(pins_mu_);
    unpinned_.wait_for(lock, std::chrono::milliseconds(50),
                       [&] { return pins_.count(pinned) == 0; });
  }
}

// Frees up to `per` pages from the start of the garbage chain at `head`;
// the rest of the chain, if any, takes its place at the list's head.
Status BTree::FreeGarbageChunk(Op& op, PageHandle* meta, uint32_t head, uint32_t per) {
  Result<PageHandle*> h = ChainHead(op, head);
  if (!h.ok()) return h.status();
  const uint32_t list_next = DecodeFixed32((*h)->data() + kChainListNext);
  uint32_t page_no = head;
  for (uint32_t freed = 0; page_no != 0 && freed < per; ++freed) {
    Result<PageHandle*> p = op.Page(page_no, false);
    if (!p.ok()) return p.status();
    if (page::TypeOf((*p)->data()) != page::kPageChain) {
      return Status::Corruption(StrFormat(
          "space %u page %u: a garbage chain leads to a non-chain page", space_, page_no));
    }
    const uint32_t next = DecodeFixed32((*p)->data() + kChainNext);
    SUBITO_RETURN_IF_ERROR(op.Free(page_no));
    page_no = next;
  }
  if (page_no != 0) {
    Result<PageHandle*> rest = ChainHead(op, page_no);
    if (!rest.ok()) return rest.status();
    op.Write32(*rest, kChainListPrev, 0);
    op.Write32(*rest, kChainListNext, list_next);
    op.Write32(meta, kMetaGarbage, page_no);
  } else {
    op.Write32(meta, kMetaGarbage, list_next);
  }
  return Status::OK();
}

Status BTree::RecoverChains(const std::vector<std::string>& keep,
                            std::set<std::string>* kept_found) {
  std::unordered_map<uint32_t, std::string> kept;  // head -> reference
  for (const std::string& ref : keep) kept.emplace(RefHead(ref), ref);
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  {
    Op op(this);
    Result<PageHandle*> meta = op.Page(0, false);
    if (!meta.ok()) return meta.status();
    for (uint32_t s = 0; s < kBuildSlots; ++s) {
      const uint32_t head = DecodeFixed32((*meta)->data() + kMetaBuilding + 4 * s);
      if (head == 0) continue;
      SUBITO_RETURN_IF_ERROR(PushGarbage(op, head));
      op.Write32(*meta, kMetaBuilding + 4 * s, 0);
    }
    SUBITO_RETURN_IF_ERROR(op.Commit());
  }
  // The retired list from its head, skipping the kept chains; `at` is the
  // first chain not yet looked at (0: the list's end).
  uint32_t at = 0;
  {
    Op op(this);
    Result<PageHandle*> meta = op.Page(0, false);
    if (!meta.ok()) return meta.status();
    at = DecodeFixed32((*meta)->data() + kMetaRetired);
  }
  // A batch's chain heads stay pinned until its commit: at most a quarter
  // of the pool (a loser with many long values retires many chains).
  const uint64_t batch = std::clamp<uint64_t>(pool_->frame_count() / 4, 1, 64);
  while (at != 0) {
    SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
    Op op(this);
    for (uint64_t n = 0; n < batch && at != 0; ++n) {
      Result<PageHandle*> h = ChainHead(op, at);
      if (!h.ok()) return h.status();
      const uint32_t next = DecodeFixed32((*h)->data() + kChainListNext);
      if (auto k = kept.find(at); k != kept.end()) {
        if (kept_found != nullptr) kept_found->insert(k->second);
      } else {
        SUBITO_RETURN_IF_ERROR(UnlinkRetired(op, at));
        SUBITO_RETURN_IF_ERROR(PushGarbage(op, at));
      }
      at = next;
    }
    SUBITO_RETURN_IF_ERROR(op.Commit());
  }
  return Status::OK();
}

}  // namespace subito::btree
