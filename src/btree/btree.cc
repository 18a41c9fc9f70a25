#include "btree/btree.h"

#include <cstring>

#include "btree/node.h"
#include "page/space_file.h"
#include "util/coding.h"
#include "util/strings.h"

namespace subito::btree {
namespace {

using buffer::Latch;
using buffer::Mtr;
using buffer::PageHandle;

constexpr char kTreeMagic[4] = {'B', 'T', 'R', 'E'};
// In the space header meta: magic, root page.
constexpr uint32_t kMetaMagic = page::kSpaceMetaOffset;
constexpr uint32_t kMetaRoot = page::kSpaceMetaOffset + 4;

std::string ChildValue(uint32_t child) {
  std::string v(4, '\0');
  EncodeFixed32(v.data(), child);
  return v;
}

}  // namespace

Result<std::unique_ptr<BTree>> BTree::Create(buffer::BufferPool* pool, uint32_t space_id) {
  SUBITO_RETURN_IF_ERROR(pool->LogFreeCheck());
  Result<PageHandle> header = pool->Fetch({space_id, 0}, Latch::kExclusive);
  if (!header.ok()) return header.status();
  if (std::memcmp(header->data() + kMetaMagic, kTreeMagic, 4) == 0) {
    return Status::InvalidArgument(StrFormat("space %u already holds a B-tree", space_id));
  }
  Result<PageHandle> root = pool->Allocate(space_id);
  if (!root.ok()) return root.status();
  const uint32_t ps = pool->page_size();
  std::vector<uint8_t> img(ps);
  NodeView(img.data(), ps).Init(space_id, root->id().page_no, 0);
  Mtr mtr(pool);
  mtr.WriteDiff(*root, img.data());
  uint8_t meta[8];
  std::memcpy(meta, kTreeMagic, 4);
  EncodeFixed32(meta + 4, root->id().page_no);
  mtr.Write(*header, kMetaMagic, meta, sizeof meta);
  SUBITO_RETURN_IF_ERROR(mtr.Commit().status());
  return std::unique_ptr<BTree>(new BTree(pool, space_id, root->id().page_no));
}

Result<std::unique_ptr<BTree>> BTree::Open(buffer::BufferPool* pool, uint32_t space_id) {
  Result<PageHandle> header = pool->Fetch({space_id, 0}, Latch::kShared);
  if (!header.ok()) return header.status();
  if (std::memcmp(header->data() + kMetaMagic, kTreeMagic, 4) != 0) {
    return Status::NotFound(StrFormat("space %u holds no B-tree", space_id));
  }
  return std::unique_ptr<BTree>(
      new BTree(pool, space_id, DecodeFixed32(header->data() + kMetaRoot)));
}

uint32_t BTree::max_record() const {
  return pool_->page_size() / 4 - 8;
}

Result<PageHandle> BTree::Fetch(uint32_t page_no, Latch latch) {
  Result<PageHandle> h = pool_->Fetch({space_, page_no}, latch);
  if (!h.ok()) return h;
  SUBITO_RETURN_IF_ERROR(NodeView(h->data(), pool_->page_size())
                             .Check(StrFormat("space %u page %u", space_, page_no)));
  return h;
}

Result<std::vector<uint32_t>> BTree::Path(std::string_view key) {
  std::vector<uint32_t> path{root_};
  for (int depth = 0;; ++depth) {
    Result<PageHandle> h = Fetch(path.back(), Latch::kShared);
    if (!h.ok()) return h.status();
    NodeView n(h->data(), pool_->page_size());
    if (n.leaf()) return path;
    if (depth > 64) return Status::Corruption("B-tree deeper than 64 levels (a cycle?)");
    path.push_back(n.ChildFor(key));
  }
}

Result<std::optional<std::string>> BTree::Get(std::string_view key) {
  std::shared_lock tree(latch_);
  Result<std::vector<uint32_t>> path = Path(key);
  if (!path.ok()) return path.status();
  Result<PageHandle> leaf = Fetch(path->back(), Latch::kShared);
  if (!leaf.ok()) return leaf.status();
  NodeView n(leaf->data(), pool_->page_size());
  const uint16_t i = n.LowerBound(key);
  if (i < n.count() && n.Key(i) == key) return std::optional<std::string>(std::string(n.Value(i)));
  return std::optional<std::string>();
}

Status BTree::Put(std::string_view key, std::string_view value) {
  if (key.size() + value.size() > max_record()) {
    return Status::NotSupported(
        StrFormat("record of %zu bytes exceeds %u (overflow pages are "
                  "not implemented yet)",
                  key.size() + value.size(), max_record()));
  }
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  std::unique_lock tree(latch_);
  Result<std::vector<uint32_t>> path = Path(key);
  if (!path.ok()) return path.status();
  return InsertAt(std::move(*path), {std::string(key), std::string(value)});
}

// Inserts entry into the node at the end of path, splitting upward as
// needed; everything in one Mtr.
Status BTree::InsertAt(std::vector<uint32_t> path, Entry entry) {
  const uint32_t ps = pool_->page_size();
  Mtr mtr(pool_);
  std::vector<PageHandle> held;  // latched until the Mtr commits
  held.reserve(3 * path.size() + 3);
  bool replacing = true;   // the first level may replace an existing key
  uint32_t new_child = 0;  // internal levels: the right half created below
  while (!path.empty()) {
    const uint32_t page_no = path.back();
    path.pop_back();
    Result<PageHandle> h = Fetch(page_no, Latch::kExclusive);
    if (!h.ok()) return h.status();
    held.push_back(std::move(*h));
    PageHandle& node_h = held.back();
    std::vector<uint8_t> img(node_h.data(), node_h.data() + ps);
    NodeView n(img.data(), ps);
    uint16_t i = n.LowerBound(entry.key);
    if (replacing && i < n.count() && n.Key(i) == entry.key) n.Remove(i);
    replacing = false;
    std::string value = new_child ? ChildValue(new_child) : entry.value;
    if (n.Insert(i, entry.key, value)) {
      mtr.WriteDiff(node_h, img.data());
      return mtr.Commit().status();
    }
    // Split: all entries in order, cut in two halves by bytes.
    std::vector<Entry> all;
    for (uint16_t k = 0; k < n.count(); ++k)
      all.push_back({std::string(n.Key(k)), std::string(n.Value(k))});
    all.insert(all.begin() + i, Entry{entry.key, value});
    size_t total = 0, half = 0, cut = 0;
    for (auto& e : all) total += e.key.size() + e.value.size() + 6;
    while (cut < all.size() - 1 &&
           half + all[cut].key.size() + all[cut].value.size() + 6 <= total / 2) {
      half += all[cut].key.size() + all[cut].value.size() + 6;
      ++cut;
    }
    if (cut == 0) cut = 1;
    const uint16_t level = n.level();
    const bool is_root = page_no == root_;
    auto fill = [&](NodeView& dst, size_t from, size_t to) {
      for (size_t k = from; k < to; ++k) {
        if (!dst.Insert(dst.count(), all[k].key, all[k].value)) return false;
      }
      return true;
    };
    // Internal split: the first right key moves up; its child becomes the
    // right node's leftmost.
    const size_t right_from = level == 0 ? cut : cut + 1;
    std::string separator = all[cut].key;
    Result<PageHandle> rh = pool_->Allocate(space_);
    if (!rh.ok()) return rh.status();
    held.push_back(std::move(*rh));
    PageHandle& right_h = held.back();
    const uint32_t right_no = right_h.id().page_no;
    std::vector<uint8_t> rimg(ps);
    NodeView r(rimg.data(), ps);
    r.Init(space_, right_no, level);
    if (level > 0) r.set_leftmost(DecodeFixed32(all[cut].value.data()));
    if (!fill(r, right_from, all.size())) return Status::Corruption("B-tree split overflow");
    if (is_root) {
      // The root keeps its page: its left half goes to a new page too.
      Result<PageHandle> lh = pool_->Allocate(space_);
      if (!lh.ok()) return lh.status();
      held.push_back(std::move(*lh));
      PageHandle& left_h = held.back();
      std::vector<uint8_t> limg(ps);
      NodeView l(limg.data(), ps);
      l.Init(space_, left_h.id().page_no, level);
      if (level > 0) l.set_leftmost(n.leftmost());
      if (!fill(l, 0, cut)) return Status::Corruption("B-tree split overflow");
      if (level == 0) {
        l.set_next(right_no);
        r.set_prev(left_h.id().page_no);
      }
      NodeView root(img.data(), ps);
      root.Init(space_, root_, static_cast<uint16_t>(level + 1));
      root.set_leftmost(left_h.id().page_no);
      root.Insert(0, separator, ChildValue(right_no));
      mtr.WriteDiff(left_h, limg.data());
      mtr.WriteDiff(right_h, rimg.data());
      mtr.WriteDiff(node_h, img.data());
      return mtr.Commit().status();
    }
    std::vector<uint8_t> left(ps);
    NodeView l(left.data(), ps);
    l.Init(space_, page_no, level);
    if (level > 0) l.set_leftmost(n.leftmost());
    if (!fill(l, 0, cut)) return Status::Corruption("B-tree split overflow");
    if (level == 0) {
      const uint32_t old_next = n.next();
      l.set_prev(n.prev());
      l.set_next(right_no);
      r.set_prev(page_no);
      r.set_next(old_next);
      if (old_next != 0) {
        Result<PageHandle> nh = Fetch(old_next, Latch::kExclusive);
        if (!nh.ok()) return nh.status();
        held.push_back(std::move(*nh));
        std::vector<uint8_t> nimg(held.back().data(), held.back().data() + ps);
        NodeView(nimg.data(), ps).set_prev(right_no);
        mtr.WriteDiff(held.back(), nimg.data());
      }
    }
    mtr.WriteDiff(node_h, left.data());
    mtr.WriteDiff(right_h, rimg.data());
    entry.key = std::move(separator);
    new_child = right_no;
  }
  return Status::Corruption("B-tree path ended without a root");
}

Result<bool> BTree::Delete(std::string_view key) {
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  std::unique_lock tree(latch_);
  Result<std::vector<uint32_t>> path = Path(key);
  if (!path.ok()) return path.status();
  const uint32_t ps = pool_->page_size();
  Mtr mtr(pool_);
  std::vector<PageHandle> held;
  held.reserve(3 * path->size() + 3);
  Result<PageHandle> h = Fetch(path->back(), Latch::kExclusive);
  if (!h.ok()) return h.status();
  held.push_back(std::move(*h));
  std::vector<uint8_t> img(held.back().data(), held.back().data() + ps);
  NodeView n(img.data(), ps);
  const uint16_t i = n.LowerBound(key);
  if (i >= n.count() || n.Key(i) != key) return false;
  n.Remove(i);
  mtr.WriteDiff(held.back(), img.data());
  if (n.count() == 0 && path->size() > 1) {
    SUBITO_RETURN_IF_ERROR(RemoveEmptyLeaf(std::move(*path), n.prev(), n.next(), mtr, held));
  }
  SUBITO_RETURN_IF_ERROR(mtr.Commit().status());
  return true;
}

// Unlinks the empty node at the end of path from its siblings (leaves) and
// removes its entry from the parent, upward while parents empty out. The
// page itself is abandoned (no free-page reuse yet).
Status BTree::RemoveEmptyLeaf(std::vector<uint32_t> path, uint32_t prev, uint32_t next, Mtr& mtr,
                              std::vector<PageHandle>& held) {
  const uint32_t ps = pool_->page_size();
  auto edit = [&](uint32_t page_no, const auto& change) -> Status {
    Result<PageHandle> h = Fetch(page_no, Latch::kExclusive);
    if (!h.ok()) return h.status();
    held.push_back(std::move(*h));
    std::vector<uint8_t> img(held.back().data(), held.back().data() + ps);
    NodeView v(img.data(), ps);
    change(v);
    mtr.WriteDiff(held.back(), img.data());
    return Status::OK();
  };
  // The leaf itself is already latched by the caller: its links come in.
  uint32_t gone = path.back();
  path.pop_back();
  if (prev) SUBITO_RETURN_IF_ERROR(edit(prev, [&](NodeView& v) { v.set_next(next); }));
  if (next) SUBITO_RETURN_IF_ERROR(edit(next, [&](NodeView& v) { v.set_prev(prev); }));
  while (!path.empty()) {
    const uint32_t parent = path.back();
    path.pop_back();
    bool parent_empty = false;
    SUBITO_RETURN_IF_ERROR(edit(parent, [&](NodeView& v) {
      if (v.leftmost() == gone) {
        if (v.count() == 0) {
          if (parent == root_) {
            v.Init(space_, root_, 0);  // the whole tree emptied: an empty leaf again
          } else {
            parent_empty = true;
          }
          return;
        }
        v.set_leftmost(v.Child(0));
        v.Remove(0);
        return;
      }
      for (uint16_t k = 0; k < v.count(); ++k) {
        if (v.Child(k) == gone) {
          v.Remove(k);
          return;
        }
      }
    }));
    if (!parent_empty) return Status::OK();
    gone = parent;
  }
  return Status::OK();
}

// ---- Cursor ----

Status BTree::Cursor::Load(const uint8_t* page, uint16_t slot) {
  NodeView n(const_cast<uint8_t*>(page), tree_->pool_->page_size());
  key_.assign(n.Key(slot));
  value_.assign(n.Value(slot));
  slot_ = slot;
  leaf_lsn_ = page::PageLsn(page);
  valid_ = true;
  return Status::OK();
}

Status BTree::Cursor::Seek(SeekMode mode, std::string_view key) {
  std::shared_lock tree(tree_->latch_);
  return SeekLocked(mode, key);
}

Status BTree::Cursor::SeekLocked(SeekMode mode, std::string_view key) {
  valid_ = false;
  const uint32_t ps = tree_->pool_->page_size();
  // kFirst/kLast descend along the leftmost/rightmost edge.
  uint32_t page_no = tree_->root_;
  for (int depth = 0;; ++depth) {
    Result<PageHandle> h = tree_->Fetch(page_no, Latch::kShared);
    if (!h.ok()) return h.status();
    NodeView n(h->data(), ps);
    if (n.leaf()) break;
    if (depth > 64) return Status::Corruption("B-tree deeper than 64 levels (a cycle?)");
    if (mode == SeekMode::kFirst) {
      page_no = n.leftmost();
    } else if (mode == SeekMode::kLast) {
      page_no = n.count() ? n.Child(static_cast<uint16_t>(n.count() - 1)) : n.leftmost();
    } else {
      page_no = n.ChildFor(key);
    }
  }
  const bool forward = mode == SeekMode::kFirst || mode == SeekMode::kGE || mode == SeekMode::kGT;
  for (int hops = 0; page_no != 0; ++hops) {
    Result<PageHandle> h = tree_->Fetch(page_no, Latch::kShared);
    if (!h.ok()) return h.status();
    NodeView n(h->data(), ps);
    leaf_ = page_no;
    int slot;
    if (hops > 0 || mode == SeekMode::kFirst || mode == SeekMode::kLast) {
      slot = forward ? 0 : n.count() - 1;  // continuing into a sibling
    } else if (mode == SeekMode::kGE) {
      slot = n.LowerBound(key);
    } else if (mode == SeekMode::kGT) {
      slot = n.UpperBound(key);
    } else if (mode == SeekMode::kLE) {
      slot = n.UpperBound(key) - 1;
    } else {
      slot = n.LowerBound(key) - 1;
    }
    if (slot >= 0 && slot < n.count()) return Load(h->data(), static_cast<uint16_t>(slot));
    page_no = forward ? n.next() : n.prev();
    if (hops > 1000000) return Status::Corruption("B-tree leaf chain does not end");
  }
  return Status::OK();  // past the end: not valid
}

Status BTree::Cursor::Step(bool forward) {
  if (!valid_) return Status::InvalidArgument("cursor is not positioned");
  std::shared_lock tree(tree_->latch_);
  const uint32_t ps = tree_->pool_->page_size();
  Result<PageHandle> h = tree_->Fetch(leaf_, Latch::kShared);
  if (!h.ok()) return h.status();
  if (page::PageLsn(h->data()) != leaf_lsn_) {
    // The leaf changed since we were here: find our place again by key.
    h->Release();
    const std::string last = key_;
    return SeekLocked(forward ? SeekMode::kGT : SeekMode::kLT, last);
  }
  NodeView n(h->data(), ps);
  const int slot = forward ? slot_ + 1 : slot_ - 1;
  if (slot >= 0 && slot < n.count()) return Load(h->data(), static_cast<uint16_t>(slot));
  uint32_t page_no = forward ? n.next() : n.prev();
  h->Release();
  valid_ = false;
  for (int hops = 0; page_no != 0; ++hops) {
    Result<PageHandle> s = tree_->Fetch(page_no, Latch::kShared);
    if (!s.ok()) return s.status();
    NodeView sn(s->data(), ps);
    leaf_ = page_no;
    if (sn.count() > 0) {
      return Load(s->data(), forward ? 0 : static_cast<uint16_t>(sn.count() - 1));
    }
    page_no = forward ? sn.next() : sn.prev();
    if (hops > 1000000) return Status::Corruption("B-tree leaf chain does not end");
  }
  return Status::OK();
}

Status BTree::Cursor::Next() {
  return Step(true);
}
Status BTree::Cursor::Prev() {
  return Step(false);
}

}  // namespace subito::btree
