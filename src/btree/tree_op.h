// Internal to btree/: the tree's persistent layout beyond the node format
// (docs/formats/page.md) and BTree::Op, the unit of every change. Shared by
// btree.cc (nodes) and chains.cc (overflow chains).
#pragma once

#include <cassert>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "btree/btree.h"
#include "btree/node.h"
#include "page/space_file.h"
#include "util/coding.h"
#include "util/strings.h"

namespace subito::btree {
inline constexpr char kTreeMagic[4] = {'B', 'T', 'R', 'E'};
// The space header's meta area (page 0):
inline constexpr uint32_t kMetaMagic = page::kSpaceMetaOffset;
inline constexpr uint32_t kMetaRoot = page::kSpaceMetaOffset + 4;
inline constexpr uint32_t kMetaFreeHead = page::kSpaceMetaOffset + 8;  // first free page, 0: none
inline constexpr uint32_t kMetaEntries = page::kSpaceMetaOffset + 12;  // u64 keys in the tree
// Heads of the chain lists (chains.cc): retired chains (doubly linked),
// garbage chains (singly linked), and the chains being built, one per slot.
inline constexpr uint32_t kMetaRetired = page::kSpaceMetaOffset + 20;
inline constexpr uint32_t kMetaGarbage = page::kSpaceMetaOffset + 24;
inline constexpr uint32_t kMetaBuilding = page::kSpaceMetaOffset + 28;  // u32[kBuildSlots]
inline constexpr uint32_t kBuildSlots = 4;
// A free page: page header (type kPageFree), then the next free page.
inline constexpr uint32_t kFreeNext = page::kPageHeaderSize;

// Leaf values start with a tag: inline bytes follow, or a reference to a
// chain of overflow pages (u32 total length, u32 first page). kOverflow
// chains (format 1) are still read and freed; new chains are kChain.
inline constexpr char kInline = 0, kOverflow = 1, kChain = 2;
inline constexpr uint32_t kRefSize = 9;
// Format 1 overflow page: page header (type kPageOverflow), u32 next page
// (0: last), u32 bytes used, data.
inline constexpr uint32_t kOverflowNext = page::kPageHeaderSize;
inline constexpr uint32_t kOverflowLen = page::kPageHeaderSize + 4;
inline constexpr uint32_t kOverflowData = page::kPageHeaderSize + 8;
// Chain page (type kPageChain): page header, u32 next page (0: last), u32
// bytes used, u32 list prev, u32 list next (the links of the retired or
// garbage list, used in a chain's first page only), data.
inline constexpr uint32_t kChainNext = page::kPageHeaderSize;
inline constexpr uint32_t kChainLen = page::kPageHeaderSize + 4;
inline constexpr uint32_t kChainListPrev = page::kPageHeaderSize + 8;
inline constexpr uint32_t kChainListNext = page::kPageHeaderSize + 12;
inline constexpr uint32_t kChainData = page::kPageHeaderSize + 16;

// A reference to a chain (kChain) of `length` bytes starting at `head`.
inline std::string ChainRef(uint32_t length, uint32_t head) {
  std::string ref(kRefSize, '\0');
  ref[0] = kChain;
  EncodeFixed32(ref.data() + 1, length);
  EncodeFixed32(ref.data() + 5, head);
  return ref;
}
inline uint32_t RefLength(std::string_view ref) {
  return DecodeFixed32(ref.data() + 1);
}
inline uint32_t RefHead(std::string_view ref) {
  return DecodeFixed32(ref.data() + 5);
}

// An internal node's value: the child's page number.
inline std::string ChildValue(uint32_t child) {
  std::string v(4, '\0');
  EncodeFixed32(v.data(), child);
  return v;
}

// A leaf's stored value for bytes kept in the leaf.
inline std::string InlineValue(std::string_view value) {
  std::string stored;
  stored.reserve(1 + value.size());
  stored.push_back(kInline);
  stored.append(value);
  return stored;
}

using buffer::Latch;
using buffer::Mtr;
using buffer::PageHandle;

// One write operation: the pages it holds (latched exclusively until the
// Mtr commits, each latched once however often it is touched) and its Mtr.
// New nodes come from the space's free-page list when it has any.
class BTree::Op {
 public:
  explicit Op(BTree* t) : t_(t), ps_(t->pool_->page_size()), mtr_(t->pool_) {}
  // An operation that fails before Commit leaves no trace: its edits are
  // undone here, while its pages are still latched.
  ~Op() { mtr_.Abort(); }
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  // A node page of the tree (checked), or with node=false any page (the
  // space header, a free page).
  Result<PageHandle*> Page(uint32_t page_no, bool node = true) {
    if (Held* held = Find(page_no)) {
      // Held already, maybe fetched as a non-node page: check it as a node
      // the first time it is used as one.
      if (node && !held->checked) {
        SUBITO_RETURN_IF_ERROR(t_->CheckNode(page_no, *held->h));
        held->checked = true;
      }
      return held->h;
    }
    if (page_no == 0 && node) {
      return Status::Corruption(StrFormat("space %u: a B-tree link points to page 0", t_->space_));
    }
    Result<PageHandle> h = t_->pool_->Fetch({t_->space_, page_no}, Latch::kExclusive);
    if (!h.ok()) return h.status();
    if (node) SUBITO_RETURN_IF_ERROR(t_->CheckNode(page_no, *h));
    return Keep(std::move(*h), node);
  }
  // A node page fetched (exclusively) and checked by the caller.
  PageHandle* Adopt(PageHandle h) {
    assert(Find(h.id().page_no) == nullptr);
    return Keep(std::move(h), /*checked=*/true);
  }
  std::vector<uint8_t> Image(PageHandle* h) const { return {h->data(), h->data() + ps_}; }
  void Put(PageHandle* h, const std::vector<uint8_t>& img) { mtr_.WriteDiff(*h, img.data()); }
  // img changed only through n: compares only the bytes n wrote.
  void Put(PageHandle* h, const std::vector<uint8_t>& img, const NodeView& n) {
    NodeView::Range ranges[NodeView::kMaxRanges];
    mtr_.WriteDiff(*h, img.data(), ranges, n.touched(ranges));
  }
  // A view that changes h's node in place, each write applied and logged
  // by this operation's Mtr as it is made: a change given up (the
  // operation ends without Commit) is undone with the rest.
  NodeView Edit(PageHandle* h) { return NodeView(h, ps_, &mtr_); }

  // A page for a new node (its image is the caller's to write).
  Result<PageHandle*> NewPage() {
    Result<PageHandle*> meta = Page(0, false);
    if (!meta.ok()) return meta.status();
    const uint32_t head = DecodeFixed32((*meta)->data() + kMetaFreeHead);
    if (head != 0) {
      Result<PageHandle*> h = Page(head, false);
      if (!h.ok()) return h.status();
      if (page::TypeOf((*h)->data()) != page::kPageFree) {
        return Status::Corruption(
            StrFormat("space %u page %u is on the free list but is not free", t_->space_, head));
      }
      uint8_t next[4];
      std::memcpy(next, (*h)->data() + kFreeNext, 4);
      mtr_.Write(**meta, kMetaFreeHead, next, 4);
      return h;
    }
    Result<PageHandle> h = t_->pool_->Allocate(t_->space_);
    if (!h.ok()) return h.status();
    return Keep(std::move(*h), /*checked=*/false);
  }

  // Puts a page (no longer referenced by the tree) on the free list. Only
  // its type and free-list link are logged: its old bytes stay, unread.
  Status Free(uint32_t page_no) {
    if (page_no == 0 || page_no == t_->root_) {
      return Status::Corruption(
          StrFormat("space %u: refusing to free page %u", t_->space_, page_no));
    }
    Result<PageHandle*> meta = Page(0, false);
    if (!meta.ok()) return meta.status();
    Result<PageHandle*> h = Page(page_no, false);
    if (!h.ok()) return h.status();
    if (page::TypeOf((*h)->data()) == page::kPageFree) {
      return Status::Corruption(StrFormat("space %u: page %u freed twice", t_->space_, page_no));
    }
    const uint8_t type = page::kPageFree;
    mtr_.Write(**h, 6, &type, 1);
    uint8_t link[4];
    std::memcpy(link, (*meta)->data() + kMetaFreeHead, 4);
    mtr_.Write(**h, kFreeNext, link, 4);
    EncodeFixed32(link, page_no);
    mtr_.Write(**meta, kMetaFreeHead, link, 4);
    return Status::OK();
  }

  // Writes n bytes at offset of a held page as they are (no diff).
  void Write(PageHandle* h, uint32_t offset, const uint8_t* src, uint32_t n) {
    mtr_.Write(*h, offset, src, n);
  }
  // Writes a u32 field of a held page.
  void Write32(PageHandle* h, uint32_t offset, uint32_t v) {
    uint8_t b[4];
    EncodeFixed32(b, v);
    mtr_.Write(*h, offset, b, 4);
  }
  // Where chains this operation takes out of leaves go (chains.cc): with
  // moves set, to the retired list, reported in moves once the operation
  // has committed; else to garbage (freed by BTree::CollectGarbage).
  void set_moves(BTree::ChainMoves* moves) { moves_ = moves; }
  bool retires() const { return moves_ != nullptr; }
  void Retired(std::string ref) { moved_.retired.push_back(std::move(ref)); }
  void Restored(std::string ref) { moved_.restored.push_back(std::move(ref)); }

  // The number of keys changes by `delta` with this operation.
  void CountEntries(int64_t delta) { entry_delta_ += delta; }
  // The header's copy of the count is written when this Op changes the
  // count and holds the header anyway, or the count drifted past its slack
  // (BTree::entries), or when `store_count` (PersistEntries). The header is
  // latched after the Op's other pages, as Ops that change leaves take it.
  Status Commit(bool store_count = false) {
    bool stored = false;
    uint64_t count = 0;
    const uint64_t delta = static_cast<uint64_t>(entry_delta_);
    const bool held = entry_delta_ != 0 && Find(0) != nullptr;
    if (store_count || held ||
        (entry_delta_ != 0 &&
         t_->CountDrifted(t_->entries_.load(std::memory_order_relaxed) + delta))) {
      Result<PageHandle*> meta = Page(0, false);
      if (!meta.ok()) return meta.status();
      // Read under the header's latch: an Op that wrote the copy before has
      // added its delta, and may have made this write needless.
      count = t_->entries_.load(std::memory_order_relaxed) + delta;
      if (store_count || held || t_->CountDrifted(count)) {
        uint8_t bytes[8];
        EncodeFixed64(bytes, NotBelowZero(count));
        mtr_.Write(**meta, kMetaEntries, bytes, 8);
        stored = true;
      }
    }
    if (mtr_.empty()) return Status::OK();
    SUBITO_RETURN_IF_ERROR(mtr_.Commit().status());
    if (entry_delta_ != 0) {
      t_->entries_.fetch_add(static_cast<uint64_t>(entry_delta_), std::memory_order_relaxed);
      entry_delta_ = 0;
    }
    if (stored) t_->stored_entries_.store(count, std::memory_order_relaxed);
    t_->changes_.fetch_add(1, std::memory_order_release);
    if (moves_ != nullptr) {
      for (std::string& r : moved_.retired) moves_->retired.push_back(std::move(r));
      for (std::string& r : moved_.restored) moves_->restored.push_back(std::move(r));
    }
    return Status::OK();
  }
  uint32_t page_size() const { return ps_; }

 private:
  // A held page: latched until the Op ends; checked: verified as a node.
  struct Held {
    uint32_t page_no;
    bool checked;
    PageHandle* h;
  };
  Held* Find(uint32_t page_no) {
    for (size_t i = 0; i < n_inline_; ++i) {
      if (held_[i].page_no == page_no) return &held_[i];
    }
    for (Held& h : held_more_) {
      if (h.page_no == page_no) return &h;
    }
    return nullptr;
  }
  PageHandle* Keep(PageHandle h, bool checked) {
    // Most operations hold a leaf and the space header: those pages live in
    // the Op itself, and only larger ones allocate.
    const uint32_t page_no = h.id().page_no;
    if (n_inline_ < kInlinePages) {
      pages_[n_inline_] = std::move(h);
      held_[n_inline_] = {page_no, checked, &pages_[n_inline_]};
      return held_[n_inline_++].h;
    }
    more_pages_.push_back(std::make_unique<PageHandle>(std::move(h)));
    held_more_.push_back({page_no, checked, more_pages_.back().get()});
    return held_more_.back().h;
  }
  static constexpr size_t kInlinePages = 4;
  BTree* const t_;
  const uint32_t ps_;
  Mtr mtr_;
  PageHandle pages_[kInlinePages];  // stable addresses
  Held held_[kInlinePages] = {};
  size_t n_inline_ = 0;
  std::vector<std::unique_ptr<PageHandle>> more_pages_;  // beyond kInlinePages
  std::vector<Held> held_more_;
  int64_t entry_delta_ = 0;
  BTree::ChainMoves* moves_ = nullptr;
  BTree::ChainMoves moved_;  // published to moves_ by Commit
};

}  // namespace subito::btree
