#include "btree/builder.h"

#include <cstddef>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "btree/tree_op.h"

namespace subito::btree {

BTree::Builder::Builder(BTree* tree) : t_(tree), ps_(tree->pool_->page_size()) {
  Begin(0);
}

void BTree::Builder::Begin(uint32_t level) {
  if (levels_.size() <= level) levels_.resize(level + 1);
  Level& l = levels_[level];
  l.image.assign(ps_, 0);
  l.page_no = 0;
  NodeView(l.image.data(), ps_).Init(t_->space_, 0, static_cast<uint16_t>(level));
}

bool BTree::Builder::Fits(uint32_t level, size_t key, size_t value) const {
  const NodeView n(const_cast<uint8_t*>(levels_[level].image.data()), ps_);
  if (n.count() == 0) return true;  // any record fits an empty node (max_record)
  const size_t used = kNodeHeaderEnd + 2u * n.count() + (ps_ - n.heap_start());
  return used + 6 + key + value <= ps_ - ps_ / 16;
}

void BTree::Builder::Append(uint32_t level, std::string_view key, std::string_view value) {
  NodeView n(levels_[level].image.data(), ps_);
  const bool inserted = n.Insert(n.count(), key, value);
  assert(inserted);
  (void)inserted;
}

Result<std::pair<uint32_t, uint32_t>> BTree::Builder::CloseNode(uint32_t level) {
  Level& l = levels_[level];
  if (l.page_no == 0) {  // its own first, so that leaves follow each other in the file
    Result<uint32_t> own = NewPage();
    if (!own.ok()) return own.status();
    l.page_no = *own;
  }
  Result<uint32_t> next = NewPage();
  if (!next.ok()) return next.status();
  if (level == 0) NodeView(l.image.data(), ps_).set_next(*next);
  SUBITO_RETURN_IF_ERROR(WriteNode(level));
  const uint32_t full = l.page_no;
  Begin(level);
  levels_[level].page_no = *next;
  if (level == 0) NodeView(levels_[level].image.data(), ps_).set_prev(full);
  return std::make_pair(full, *next);
}

Result<uint32_t> BTree::Builder::NewPage() {
  Result<PageHandle> h = t_->pool_->Allocate(t_->space_);
  if (!h.ok()) return h.status();
  return h->id().page_no;
}

Status BTree::Builder::WriteNode(uint32_t level) {
  Level& l = levels_[level];
  EncodeFixed32(l.image.data() + offsetof(page::PageHeader, page_no), l.page_no);
  SUBITO_RETURN_IF_ERROR(t_->pool_->LogFreeCheck());
  Op op(t_);
  Result<PageHandle*> h = op.Page(l.page_no, /*node=*/false);
  if (!h.ok()) return h.status();
  // The page is new (zeros): what its image holds outside the free gap
  // between slots and records is logged as it is, without a diff. The crc
  // and page_lsn are not logged (Mtr::WriteDiff's rule).
  assert(page::IsZeroPage((*h)->data(), ps_));
  const NodeView n(l.image.data(), ps_);
  const uint8_t* img = l.image.data();
  const uint32_t slots_end = kNodeHeaderEnd + 2u * n.count(), heap = n.heap_start();
  op.Write(*h, 4, img + 4, 4);
  op.Write(*h, 16, img + 16, slots_end - 16);
  if (heap < ps_) op.Write(*h, heap, img + heap, ps_ - heap);
  return op.Commit();
}

Result<std::string> BTree::Builder::Store(std::string_view key, std::string_view value) {
  if (!t_->MayChain(key.size(), value.size())) return InlineValue(value);
  if (value.size() <= t_->chunk_bytes()) {
    SUBITO_RETURN_IF_ERROR(t_->pool_->LogFreeCheck());
    Op op(t_);
    Result<uint32_t> head = t_->WriteChain(op, value);
    if (!head.ok()) return head.status();
    SUBITO_RETURN_IF_ERROR(op.Commit());
    return ChainRef(static_cast<uint32_t>(value.size()), *head);
  }
  Result<Prepared> p = t_->Prepare(value);
  if (!p.ok()) return p.status();
  // Out of its build slot: from now on only the leaf will name it (B1).
  SUBITO_RETURN_IF_ERROR(t_->pool_->LogFreeCheck());
  Op op(t_);
  Result<PageHandle*> meta = op.Page(0, false);
  if (!meta.ok()) return meta.status();
  op.Write32(*meta, kMetaBuilding + 4 * p->slot_, 0);
  SUBITO_RETURN_IF_ERROR(op.Commit());
  p->tree_ = nullptr;
  t_->ReleaseSlot(p->slot_);
  return std::move(p->ref_);
}

Status BTree::Builder::CheckEmpty() {
  Result<bool> empty = t_->Empty();
  if (!empty.ok()) return empty.status();
  if (!*empty) {
    return Status::InvalidArgument(
        StrFormat("space %u: a tree builder needs an empty tree", t_->space_));  // B3
  }
  return Status::OK();
}

Status BTree::Builder::Add(std::string_view key, std::string_view value) {
  if (!error_.ok()) return error_;
  if (spent_) return Status::InvalidArgument("the tree builder has finished");
  if (added_ > 0 && CompareKeys(key, last_key_) <= 0) {
    return Status::InvalidArgument("tree builder: keys must strictly ascend");  // B2
  }
  if (added_ == 0) SUBITO_RETURN_IF_ERROR(CheckEmpty());
  SUBITO_RETURN_IF_ERROR(t_->CheckKey(key));
  if (value.size() > t_->max_value()) {
    return Status::TooLarge(
        StrFormat("value of %zu bytes exceeds the limit of %u", value.size(), t_->max_value()));
  }
  Result<std::string> stored = Store(key, value);
  Status st = stored.status();
  if (st.ok() && !Fits(0, key.size(), stored->size())) {
    Result<std::pair<uint32_t, uint32_t>> pages = CloseNode(0);
    st = pages.status();
    if (st.ok()) st = AddSeparator(1, key, pages->first, pages->second);
  }
  if (!st.ok()) {
    error_ = st;
    return st;
  }
  Append(0, key, *stored);
  last_key_.assign(key);
  ++added_;
  return Status::OK();
}

Status BTree::Builder::AddSeparator(uint32_t level, std::string_view key, uint32_t left,
                                    uint32_t right) {
  if (levels_.size() <= level) {
    Begin(level);
    NodeView(levels_[level].image.data(), ps_).set_leftmost(left);
  }
  const std::string child = ChildValue(right);
  if (Fits(level, key.size(), child.size())) {
    Append(level, key, child);
    return Status::OK();
  }
  // The node is full: `key` moves up and `right` becomes the leftmost child
  // of the next node at this level.
  Result<std::pair<uint32_t, uint32_t>> pages = CloseNode(level);
  if (!pages.ok()) return pages.status();
  NodeView(levels_[level].image.data(), ps_).set_leftmost(right);
  return AddSeparator(level + 1, key, pages->first, pages->second);
}

Status BTree::Builder::Finish() {
  if (!error_.ok()) return error_;
  if (spent_) return Status::InvalidArgument("the tree builder has finished");
  spent_ = true;
  if (added_ == 0) return Status::OK();
  const uint32_t top = static_cast<uint32_t>(levels_.size() - 1);
  Status st;
  // Every level below the top has split, so its node has its page (B4).
  for (uint32_t level = 0; level < top && st.ok(); ++level) st = WriteNode(level);
  if (st.ok()) st = t_->pool_->LogFreeCheck();
  if (st.ok()) {
    std::unique_lock tree(t_->latch_);
    Op op(t_);
    Result<PageHandle*> root = op.Page(t_->root_);
    st = root.status();
    if (st.ok() && !NodeView((*root)->data(), ps_).empty_leaf()) {
      st = Status::InvalidArgument(StrFormat("space %u: changed while being built", t_->space_));
    }
    if (st.ok()) {
      Level& l = levels_[top];
      EncodeFixed32(l.image.data() + offsetof(page::PageHeader, page_no), t_->root_);
      op.Put(*root, l.image);
      op.CountEntries(static_cast<int64_t>(added_));
      st = op.Commit();  // B1: the tree's content from here on
    }
  }
  if (!st.ok()) error_ = st;
  return st;
}

}  // namespace subito::btree
