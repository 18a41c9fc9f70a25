#include "btree/btree.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "btree/tree_op.h"

namespace subito::btree {
namespace {

// The two children of `parent` that a merge of `child` would join: left
// absorbs right, whose parent entry goes. left = right = 0 for an only child.
struct MergePair {
  uint32_t left = 0, right = 0;
  uint16_t right_entry = 0;
};

Result<MergePair> PairForMerge(const NodeView& parent, uint32_t child) {
  int pos = -2;  // -1: the parent's leftmost child
  if (parent.leftmost() == child) pos = -1;
  for (uint16_t k = 0; k < parent.count() && pos == -2; ++k) {
    if (parent.Child(k) == child) pos = k;
  }
  if (pos == -2) return Status::Corruption("B-tree parent does not point to its child");
  if (pos >= 0) {
    const uint32_t left =
        pos == 0 ? parent.leftmost() : parent.Child(static_cast<uint16_t>(pos - 1));
    return MergePair{left, child, static_cast<uint16_t>(pos)};
  }
  if (parent.count() > 0) return MergePair{child, parent.Child(0), 0};
  return MergePair{};
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
  return std::unique_ptr<BTree>(
      new BTree(pool, space_id, root->id().page_no, DecodeFixed64(header->data() + kMetaEntries)));
}

Result<std::unique_ptr<BTree>> BTree::Open(buffer::BufferPool* pool, uint32_t space_id) {
  Result<PageHandle> header = pool->Fetch({space_id, 0}, Latch::kShared);
  if (!header.ok()) return header.status();
  if (std::memcmp(header->data() + kMetaMagic, kTreeMagic, 4) != 0) {
    return Status::NotFound(StrFormat("space %u holds no B-tree", space_id));
  }
  return std::unique_ptr<BTree>(new BTree(pool, space_id, DecodeFixed32(header->data() + kMetaRoot),
                                          DecodeFixed64(header->data() + kMetaEntries)));
}

Result<uint64_t> BTree::entries() {
  return NotBelowZero(entries_.load(std::memory_order_relaxed));
}

Status BTree::PersistEntries() {
  if (entries_.load(std::memory_order_relaxed) == stored_entries_.load(std::memory_order_relaxed)) {
    return Status::OK();
  }
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  std::shared_lock tree(latch_);
  Op op(this);
  return op.Commit(/*store_count=*/true);
}

Status BTree::Recount() {
  std::lock_guard one_walk(recount_mu_);
  const uint64_t before = entries_.load(std::memory_order_relaxed);
  const uint64_t id = id_.load(std::memory_order_relaxed);
  uint64_t n = 0;
  std::string from;  // keys from here on are still to count
  std::string last;  // the last key counted: the chain ascends past it
  for (uint64_t hops = 0;;) {
    std::shared_lock tree(latch_);
    Result<PageHandle> h = LeafPage(from, Latch::kShared);
    for (uint32_t leaves = 0;; ++leaves, ++hops) {
      if (!h.ok()) return h.status();
      if (hops > (uint64_t{1} << 32)) {
        return Status::Corruption(StrFormat("space %u: B-tree leaf chain does not end", space_));
      }
      const NodeView leaf(h->data(), pool_->page_size());
      if (!leaf.leaf()) return Status::Corruption("B-tree leaf chain leads to an internal node");
      const uint16_t first = leaves == 0 ? leaf.LowerBound(from) : 0;
      if (first < leaf.count()) {
        if ((n > 0 || !from.empty()) && CompareKeys(leaf.Key(first), last) <= 0) {
          return Status::Corruption(StrFormat(
              "space %u: B-tree leaf chain does not ascend at page %u", space_, h->id().page_no));
        }
        last.assign(leaf.Key(static_cast<uint16_t>(leaf.count() - 1)));
      }
      n += leaf.count() - first;
      const uint32_t next = leaf.next();
      if (next == 0) {
        // A change committed during the walk counts once, or twice where
        // the walk saw it. A ResetToEmpty meanwhile (a new id, taken under
        // the exclusive latch) set the count itself.
        if (id_.load(std::memory_order_relaxed) == id) {
          entries_.fetch_add(n - before, std::memory_order_relaxed);
        }
        tree.unlock();
        return PersistEntries();
      }
      // The walk lets structure changes in every 64 leaves.
      if (leaves >= 63 && leaf.count() > 0) {
        from = last;
        from.push_back('\0');  // the least key above it
        break;
      }
      h->Release();
      h = Fetch(next, Latch::kShared);
    }
  }
}

Result<bool> BTree::Empty() {
  std::shared_lock tree(latch_);
  Result<PageHandle> root = Fetch(root_, Latch::kShared);
  if (!root.ok()) return root.status();
  const NodeView n(root->data(), pool_->page_size());
  return n.empty_leaf();
}

Result<uint32_t> BTree::height() {
  std::shared_lock tree(latch_);
  Result<PageHandle> root = Fetch(root_, Latch::kShared);
  if (!root.ok()) return root.status();
  return NodeView(root->data(), pool_->page_size()).level() + 1u;
}

Result<bool> BTree::Pristine() {
  std::shared_lock tree(latch_);
  Result<PageHandle> header = pool_->Fetch({space_, 0}, Latch::kShared);
  if (!header.ok()) return header.status();
  const uint8_t* h = header->data();
  // The header's count is a statistic: an empty root says there is no key.
  for (uint32_t at = kMetaFreeHead; at < kMetaBuilding + 4 * kBuildSlots; at += 4) {
    if (at != kMetaEntries && at != kMetaEntries + 4 && DecodeFixed32(h + at) != 0) return false;
  }
  Result<PageHandle> root = Fetch(root_, Latch::kShared);
  if (!root.ok()) return root.status();
  const NodeView n(root->data(), pool_->page_size());
  return n.empty_leaf();
}

Status BTree::ResetToEmpty() {
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  std::unique_lock tree(latch_);
  Op op(this);
  Result<PageHandle*> root = op.Page(root_, /*node=*/false);
  if (!root.ok()) return root.status();
  std::vector<uint8_t> img(op.page_size());
  NodeView(img.data(), op.page_size()).Init(space_, root_, 0);
  op.Put(*root, img);
  Result<PageHandle*> meta = op.Page(0, /*node=*/false);
  if (!meta.ok()) return meta.status();
  // The free list, the key count and every chain list head, in one run.
  static_assert(kMetaEntries == kMetaFreeHead + 4 && kMetaRetired == kMetaEntries + 8 &&
                kMetaGarbage == kMetaRetired + 4 && kMetaBuilding == kMetaGarbage + 4);
  const std::vector<uint8_t> zeros(kMetaBuilding + 4 * kBuildSlots - kMetaFreeHead, 0);
  op.Write(*meta, kMetaFreeHead, zeros.data(), static_cast<uint32_t>(zeros.size()));
  SUBITO_RETURN_IF_ERROR(op.Commit());
  entries_.store(0, std::memory_order_relaxed);
  stored_entries_.store(0, std::memory_order_relaxed);
  garbage_hint_.store(false, std::memory_order_relaxed);
  id_.store(NextId(), std::memory_order_relaxed);
  return Status::OK();
}

uint32_t BTree::max_record() const {
  return pool_->page_size() / 4 - 8;
}

Result<PageHandle> BTree::Fetch(uint32_t page_no, Latch latch) {
  Result<PageHandle> h = pool_->Fetch({space_, page_no}, latch);
  if (!h.ok()) return h;
  SUBITO_RETURN_IF_ERROR(CheckNode(page_no, *h));
  return h;
}

// A node is checked in full once after it is read from its file (or
// changed by redo); after that only its header, since the tree's own edits
// keep it valid. Pages are fetched far more often than read.
Status BTree::CheckNode(uint32_t page_no, const PageHandle& h) const {
  const NodeView n(h.data(), pool_->page_size());
  if (h.verified() && n.HeaderPlausible()) return Status::OK();
  SUBITO_RETURN_IF_ERROR(n.Check(StrFormat("space %u page %u", space_, page_no)));
  h.set_verified(true);
  return Status::OK();
}

Result<std::vector<uint32_t>> BTree::Path(std::string_view key) {
  std::vector<uint32_t> path;
  Result<PageHandle> leaf = LeafPage(key, Latch::kShared, &path);
  if (!leaf.ok()) return leaf.status();
  return path;
}

Result<PageHandle> BTree::LeafPage(std::string_view key, Latch latch, std::vector<uint32_t>* path) {
  uint32_t page_no = root_;
  uint32_t level = 0;
  for (int depth = 0;; ++depth) {
    if (path != nullptr) path->push_back(page_no);
    Result<PageHandle> h = Fetch(page_no, depth > 0 && level == 1 ? latch : Latch::kShared);
    if (!h.ok()) return h.status();
    NodeView n(h->data(), pool_->page_size());
    if (depth > 0 && n.level() + 1u != level) {
      return Status::Corruption(StrFormat("space %u page %u: level %u under a level-%u node",
                                          space_, page_no, n.level(), level));
    }
    level = n.level();
    if (n.leaf()) {
      if (h->latch() == latch) return h;
      h->Release();  // a root leaf, wanted exclusive: it stays the root under latch_
      return Fetch(page_no, latch);
    }
    if (depth > 64) return Status::Corruption("B-tree deeper than 64 levels (a cycle?)");
    page_no = n.ChildFor(key);
  }
}

namespace {
// The leaf where this thread last met a key, per thread: a statement reads
// a row, then locks it and changes it, three lookups of one key in a row.
// Trees are told apart by an id never reused (a dropped tree's address
// may be a new tree's, whose space may be shorter than the hinted page).
struct LeafHint {
  uint64_t tree = 0;
  uint32_t leaf = 0;
  bool first = false, last = false;  // the tree's first or last leaf when met
  std::string key;
};
LeafHint& Hint() {
  thread_local LeafHint hint;
  return hint;
}
}  // namespace

void BTree::NoteLeaf(std::string_view key, uint32_t leaf, const uint8_t* node) {
  const NodeView n(const_cast<uint8_t*>(node), pool_->page_size());
  LeafHint& h = Hint();
  h.tree = id_;
  h.leaf = leaf;
  h.first = n.prev() == 0;
  h.last = n.next() == 0;
  h.key.assign(key);
}

Result<PageHandle> BTree::FindLeaf(std::string_view key, Latch latch) {
  std::optional<PageHandle> hinted = HintedLeaf(key, latch);
  Result<PageHandle> leaf = hinted ? std::move(*hinted) : LeafPage(key, latch);
  if (leaf.ok()) NoteLeaf(key, leaf->id().page_no, leaf->data());
  return leaf;
}

std::optional<PageHandle> BTree::HintedLeaf(std::string_view key, Latch latch) {
  const LeafHint& hint = Hint();
  if (hint.tree != id_) return std::nullopt;
  const int c = CompareKeys(key, hint.key);
  if (!(c == 0 || (c > 0 && hint.last) || (c < 0 && hint.first))) return std::nullopt;
  // The page may have been merged away, freed or reused since: only a leaf
  // of this tree that spans `key` is taken: its first and last keys enclose
  // it, or the key lies past the end of the last leaf (no next) or before
  // the first (no prev). Leaves hold disjoint key ranges, so that leaf is
  // key's, as a descent would find (latch_ keeps the structure still
  // meanwhile).
  Result<PageHandle> h = pool_->Fetch({space_, hint.leaf}, latch);
  if (!h.ok() || page::TypeOf(h->data()) != page::kPageBtreeLeaf ||
      !CheckNode(hint.leaf, *h).ok()) {
    return std::nullopt;
  }
  const NodeView n(h->data(), pool_->page_size());
  if (!n.leaf() || n.count() == 0) return std::nullopt;
  const bool after_first = CompareKeys(key, n.Key(0)) >= 0 || n.prev() == 0;
  const bool before_last =
      CompareKeys(key, n.Key(static_cast<uint16_t>(n.count() - 1))) <= 0 || n.next() == 0;
  if (!after_first || !before_last) return std::nullopt;
  return std::move(*h);
}

Result<double> BTree::Rank(std::string_view key) {
  std::shared_lock tree(latch_);
  double below = 0, width = 1;
  uint32_t page = root_;
  for (int depth = 0; depth <= 64; ++depth) {
    Result<PageHandle> h = Fetch(page, Latch::kShared);
    if (!h.ok()) return h.status();
    NodeView n(h->data(), pool_->page_size());
    if (n.leaf()) {
      if (n.count() > 0) below += width * n.LowerBound(key) / n.count();
      return below;
    }
    const uint16_t pos = n.UpperBound(key);
    const double fanout = n.count() + 1.0;
    below += width * pos / fanout;
    width /= fanout;
    page = n.ChildFor(key);
  }
  return Status::Corruption("B-tree deeper than 64 levels (a cycle?)");
}

Result<uint64_t> BTree::CountUpTo(std::string_view lo, std::optional<std::string_view> hi,
                                  uint64_t limit) {
  std::shared_lock tree(latch_);
  Result<PageHandle> h = LeafPage(lo, Latch::kShared);
  uint64_t n = 0;
  for (int hops = 0; n < limit; ++hops) {
    if (!h.ok()) return h.status();
    if (hops > 1000000) return Status::Corruption("B-tree leaf chain does not end");
    const NodeView leaf(h->data(), pool_->page_size());
    if (!leaf.leaf()) return Status::Corruption("B-tree leaf chain leads to an internal node");
    const uint32_t from = hops == 0 ? leaf.LowerBound(lo) : 0;
    const uint32_t to = hi ? std::max<uint32_t>(from, leaf.LowerBound(*hi)) : leaf.count();
    n += to - from;
    const uint32_t next = leaf.next();
    if (to < leaf.count() || next == 0) break;  // hi is in this leaf, or the end
    h->Release();
    h = Fetch(next, Latch::kShared);
  }
  return std::min(n, limit);
}

Result<std::optional<std::string>> BTree::RandomKey(uint64_t random) {
  std::shared_lock tree(latch_);
  uint32_t page = root_;
  for (int depth = 0; depth <= 64; ++depth) {
    Result<PageHandle> h = Fetch(page, Latch::kShared);
    if (!h.ok()) return h.status();
    NodeView n(h->data(), pool_->page_size());
    // A fresh 64-bit mix per level from the caller's random value.
    random = random * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = static_cast<uint32_t>(random >> 33);
    if (n.leaf()) {
      if (n.count() == 0) return std::optional<std::string>();
      return std::optional<std::string>(std::string(n.Key(static_cast<uint16_t>(r % n.count()))));
    }
    const uint16_t pos = static_cast<uint16_t>(r % (n.count() + 1u));
    page = pos == 0 ? n.leftmost() : n.Child(static_cast<uint16_t>(pos - 1));
  }
  return Status::Corruption("B-tree deeper than 64 levels (a cycle?)");
}

Result<std::optional<std::string>> BTree::Get(std::string_view key) {
  std::string ref;
  {
    std::shared_lock tree(latch_);
    Result<PageHandle> leaf = FindLeaf(key, Latch::kShared);
    if (!leaf.ok()) return leaf.status();
    NodeView n(leaf->data(), pool_->page_size());
    const uint16_t i = n.LowerBound(key);
    if (i >= n.count() || n.Key(i) != key) return std::optional<std::string>();
    if (!IsChainRef(n.Value(i))) {
      Result<std::string> v = ReadValue(n.Value(i));
      if (!v.ok()) return v.status();
      return std::optional<std::string>(std::move(*v));
    }
    ref = n.Value(i);
    Pin(RefHead(ref));  // C2: before the latches go
  }
  Result<std::string> v = ReadValue(ref);
  Unpin(RefHead(ref));
  if (!v.ok()) return v.status();
  return std::optional<std::string>(std::move(*v));
}

Result<bool> BTree::Contains(std::string_view key) {
  std::shared_lock tree(latch_);
  Result<PageHandle> leaf = FindLeaf(key, Latch::kShared);
  if (!leaf.ok()) return leaf.status();
  NodeView n(leaf->data(), pool_->page_size());
  const uint16_t i = n.LowerBound(key);
  return i < n.count() && n.Key(i) == key;
}

Status BTree::CheckKey(std::string_view key) const {
  if (key.size() + kRefSize > max_record()) {
    return Status::InvalidArgument(
        StrFormat("key of %zu bytes exceeds the limit of %u", key.size(), max_record() - kRefSize));
  }
  return Status::OK();
}

Status BTree::Put(std::string_view key, std::string_view value, ChainMoves* moves) {
  SUBITO_RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > max_value()) {
    return Status::TooLarge(
        StrFormat("value of %zu bytes exceeds the limit of %u", value.size(), max_value()));
  }
  const bool chained = MayChain(key.size(), value.size());
  if (chained && value.size() > chunk_bytes()) {
    Result<Prepared> p = Prepare(value);
    if (!p.ok()) return p.status();
    return Put(key, std::move(*p), moves);
  }
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  if (!chained) {
    std::shared_lock shared(latch_);
    Result<bool> done = PutInLeaf(key, value);
    if (!done.ok() || *done) return done.status();
  }
  std::unique_lock tree(latch_);
  Result<std::vector<uint32_t>> path = Path(key);
  if (!path.ok()) return path.status();
  Op op(this);
  op.set_moves(moves);
  std::string stored;
  if (!chained) {
    stored = InlineValue(value);
  } else {
    Result<uint32_t> first = WriteChain(op, value);
    if (!first.ok()) return first.status();
    stored = ChainRef(static_cast<uint32_t>(value.size()), *first);
  }
  return InsertAt(op, std::move(*path), {std::string(key), std::move(stored)});
}

// Inserts entry into the node at the end of path, splitting upward as
// needed; everything in one Mtr.
Status BTree::InsertAt(Op& op, std::vector<uint32_t> path, Entry entry) {
  const uint32_t ps = op.page_size();
  bool replacing = true;   // the first level may replace an existing key
  uint32_t new_child = 0;  // internal levels: the right half created below
  while (!path.empty()) {
    const uint32_t page_no = path.back();
    path.pop_back();
    Result<PageHandle*> node_h = op.Page(page_no);
    if (!node_h.ok()) return node_h.status();
    std::vector<uint8_t> img = op.Image(*node_h);
    NodeView n(img.data(), ps);
    uint16_t i = n.LowerBound(entry.key);
    if (replacing && i < n.count() && n.Key(i) == entry.key) {
      SUBITO_RETURN_IF_ERROR(DropStored(op, n.Value(i)));  // the old value's chain
      n.Remove(i);
    } else if (replacing) {
      op.CountEntries(1);
    }
    replacing = false;
    std::string value = new_child ? ChildValue(new_child) : entry.value;
    if (n.Insert(i, entry.key, value)) {
      op.Put(*node_h, img, n);
      return op.Commit();
    }
    // Split: all entries in order, cut in two halves by bytes.
    std::vector<Entry> all;
    for (uint16_t k = 0; k < n.count(); ++k) {
      all.push_back({std::string(n.Key(k)), std::string(n.Value(k))});
    }
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
    // A leaf filling at one end (ascending or descending keys, as with
    // auto-increment) keeps its old entries: splitting in the middle would
    // leave every leaf half empty.
    if (level == 0 && i + 1u == all.size()) cut = all.size() - 1;
    if (level == 0 && i == 0) cut = 1;
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
    Result<PageHandle*> right_h = op.NewPage();
    if (!right_h.ok()) return right_h.status();
    const uint32_t right_no = (*right_h)->id().page_no;
    std::vector<uint8_t> rimg(ps);
    NodeView r(rimg.data(), ps);
    r.Init(space_, right_no, level);
    if (level > 0) r.set_leftmost(DecodeFixed32(all[cut].value.data()));
    if (!fill(r, right_from, all.size())) return Status::Corruption("B-tree split overflow");
    // The left half, as a node at page `no`.
    auto left_half = [&](uint32_t no, std::vector<uint8_t>& limg) {
      limg.assign(ps, 0);
      NodeView l(limg.data(), ps);
      l.Init(space_, no, level);
      if (level > 0) l.set_leftmost(n.leftmost());
      return fill(l, 0, cut);
    };
    if (page_no == root_) {
      // The root keeps its page: its left half goes to a new page too.
      Result<PageHandle*> left_h = op.NewPage();
      if (!left_h.ok()) return left_h.status();
      const uint32_t left_no = (*left_h)->id().page_no;
      std::vector<uint8_t> limg;
      if (!left_half(left_no, limg)) return Status::Corruption("B-tree split overflow");
      NodeView l(limg.data(), ps);
      if (level == 0) {
        l.set_next(right_no);
        r.set_prev(left_no);
      }
      NodeView root(img.data(), ps);
      root.Init(space_, root_, static_cast<uint16_t>(level + 1));
      root.set_leftmost(left_no);
      root.Insert(0, separator, ChildValue(right_no));
      op.Put(*left_h, limg);
      op.Put(*right_h, rimg);
      op.Put(*node_h, img);
      return op.Commit();
    }
    std::vector<uint8_t> left;
    if (!left_half(page_no, left)) return Status::Corruption("B-tree split overflow");
    NodeView l(left.data(), ps);
    if (level == 0) {
      const uint32_t old_next = n.next();
      l.set_prev(n.prev());
      l.set_next(right_no);
      r.set_prev(page_no);
      r.set_next(old_next);
      if (old_next != 0) {
        Result<PageHandle*> nh = op.Page(old_next);
        if (!nh.ok()) return nh.status();
        std::vector<uint8_t> nimg = op.Image(*nh);
        NodeView(nimg.data(), ps).set_prev(right_no);
        op.Put(*nh, nimg);
      }
    }
    op.Put(*node_h, left);
    op.Put(*right_h, rimg);
    entry.key = std::move(separator);
    new_child = right_no;
  }
  return Status::Corruption("B-tree path ended without a root");
}

// Optimistic descent (InnoDB's BTR_MODIFY_LEAF): under the shared tree
// latch, a change that stays inside its leaf (no split, no merge, no
// overflow pages) latches only that leaf (and, at commit, the space header
// when the key count's copy is due: BTree::entries). Internal nodes change only under the exclusive
// tree latch, so the path found under the shared one still leads to the key's leaf. Returns false,
// having changed nothing, when the change needs more.
Result<buffer::PageHandle*> BTree::LeafFor(Op& op, std::string_view key, bool* is_root) {
  Result<PageHandle> h = FindLeaf(key, Latch::kExclusive);
  if (!h.ok()) return h.status();
  *is_root = h->id().page_no == root_;
  return op.Adopt(std::move(*h));
}

Result<bool> BTree::PutInLeaf(std::string_view key, std::string_view value) {
  Op op(this);
  bool is_root = false;
  Result<PageHandle*> leaf = LeafFor(op, key, &is_root);
  if (!leaf.ok()) return leaf.status();
  NodeView n = op.Edit(*leaf);
  const uint16_t i = n.LowerBound(key);
  const std::string stored = InlineValue(value);
  if (i < n.count() && n.Key(i) == key) {
    const std::string_view old = n.Value(i);
    if (old.empty() || old[0] != kInline) return false;  // its overflow pages go
    if (!n.ReplaceValue(i, stored)) {
      n.Remove(i);
      if (!n.Insert(i, key, stored)) return false;  // a split
    }
  } else {
    op.CountEntries(1);
    if (!n.Insert(i, key, stored)) return false;  // a split
  }
  SUBITO_RETURN_IF_ERROR(op.Commit());
  return true;
}

// As PutInLeaf; nullopt when the delete needs more than the leaf.
Result<std::optional<bool>> BTree::DeleteInLeaf(std::string_view key) {
  Op op(this);
  bool is_root = false;
  Result<PageHandle*> leaf = LeafFor(op, key, &is_root);
  if (!leaf.ok()) return leaf.status();
  NodeView n = op.Edit(*leaf);
  const uint16_t i = n.LowerBound(key);
  if (i >= n.count() || n.Key(i) != key) return std::optional<bool>(false);
  const std::string_view old = n.Value(i);
  if (old.empty() || old[0] != kInline) return std::optional<bool>();
  // The leaf's use once the record and its slot are gone.
  const uint32_t used = n.UsedBytes() - 2 - (4 + static_cast<uint32_t>(key.size() + old.size()));
  if (!is_root && used < n.Capacity() / 4) return std::optional<bool>();
  n.Remove(i);
  op.CountEntries(-1);
  SUBITO_RETURN_IF_ERROR(op.Commit());
  return std::optional<bool>(true);
}

Result<bool> BTree::Delete(std::string_view key, ChainMoves* moves) {
  SUBITO_RETURN_IF_ERROR(pool_->LogFreeCheck());
  {
    std::shared_lock shared(latch_);
    Result<std::optional<bool>> done = DeleteInLeaf(key);
    if (!done.ok()) return done.status();
    if (done->has_value()) return **done;
  }
  std::unique_lock tree(latch_);
  Result<std::vector<uint32_t>> path = Path(key);
  if (!path.ok()) return path.status();
  Op op(this);
  op.set_moves(moves);
  const uint32_t ps = op.page_size();
  Result<PageHandle*> leaf = op.Page(path->back());
  if (!leaf.ok()) return leaf.status();
  std::vector<uint8_t> img = op.Image(*leaf);
  NodeView n(img.data(), ps);
  const uint16_t i = n.LowerBound(key);
  if (i >= n.count() || n.Key(i) != key) return false;
  SUBITO_RETURN_IF_ERROR(DropStored(op, n.Value(i)));
  n.Remove(i);
  op.Put(*leaf, img, n);
  op.CountEntries(-1);
  if (path->size() > 1 && n.UsedBytes() < n.Capacity() / 4) {
    SUBITO_RETURN_IF_ERROR(Rebalance(op, std::move(*path)));
  }
  SUBITO_RETURN_IF_ERROR(op.Commit());
  return true;
}

// The leaf at the end of path is underfull (or empty). Merge it with a
// sibling under the same parent when both fit in 3/4 of a page; an empty
// leaf with no such sibling is unlinked and its parent entry removed, upward
// while parents empty out. Freed pages go to the free list; a root left with
// a single child takes that child's place (the tree gets lower).
Status BTree::Rebalance(Op& op, std::vector<uint32_t> path) {
  const uint32_t ps = op.page_size();
  const uint32_t leaf_no = path.back();
  path.pop_back();
  const uint32_t parent_no = path.back();
  Result<PageHandle*> ph = op.Page(parent_no);
  if (!ph.ok()) return ph.status();
  std::vector<uint8_t> pimg = op.Image(*ph);
  NodeView parent(pimg.data(), ps);
  Result<MergePair> pair = PairForMerge(parent, leaf_no);
  if (!pair.ok()) return pair.status();
  const auto [left_no, right_no, right_entry] = *pair;
  if (left_no != 0) {
    Result<PageHandle*> lh = op.Page(left_no);
    if (!lh.ok()) return lh.status();
    Result<PageHandle*> rh = op.Page(right_no);
    if (!rh.ok()) return rh.status();
    std::vector<uint8_t> limg = op.Image(*lh), rimg = op.Image(*rh);
    NodeView l(limg.data(), ps), r(rimg.data(), ps);
    if (left_no == right_no || (l.leaf() && (l.next() != right_no || r.prev() != left_no))) {
      return Status::Corruption(StrFormat("space %u: leaves %u and %u are not linked neighbours",
                                          space_, left_no, right_no));
    }
    if (l.leaf() && r.leaf() && l.UsedBytes() + r.UsedBytes() <= l.Capacity() / 4 * 3) {
      for (uint16_t k = 0; k < r.count(); ++k) {
        if (!l.Insert(l.count(), r.Key(k), r.Value(k))) return Status::Corruption("merge overflow");
      }
      l.set_next(r.next());
      if (r.next() != 0) {
        Result<PageHandle*> nh = op.Page(r.next());
        if (!nh.ok()) return nh.status();
        std::vector<uint8_t> nimg = op.Image(*nh);
        NodeView(nimg.data(), ps).set_prev(left_no);
        op.Put(*nh, nimg);
      }
      op.Put(*lh, limg);
      parent.Remove(right_entry);
      op.Put(*ph, pimg);
      SUBITO_RETURN_IF_ERROR(op.Free(right_no));
      SUBITO_RETURN_IF_ERROR(MergeInternal(op, path));
      return CollapseRoot(op);
    }
  }
  // No merge. Only an empty leaf needs more: unlink it and remove it upward.
  Result<PageHandle*> self = op.Page(leaf_no);
  if (!self.ok()) return self.status();
  NodeView me((*self)->data(), ps);
  if (me.count() > 0) return Status::OK();
  path.push_back(leaf_no);
  return RemoveEmptyLeaf(op, std::move(path), me.prev(), me.next());
}

// Unlinks the empty leaf at the end of path from its siblings and removes
// its entry from the parent, upward while parents empty out; frees them.
Status BTree::RemoveEmptyLeaf(Op& op, std::vector<uint32_t> path, uint32_t prev, uint32_t next) {
  const uint32_t ps = op.page_size();
  auto edit = [&](uint32_t page_no, const auto& change) -> Status {
    Result<PageHandle*> h = op.Page(page_no);
    if (!h.ok()) return h.status();
    std::vector<uint8_t> img = op.Image(*h);
    NodeView v(img.data(), ps);
    change(v);
    op.Put(*h, img);
    return Status::OK();
  };
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
    SUBITO_RETURN_IF_ERROR(op.Free(gone));
    if (!parent_empty) {
      path.push_back(parent);
      SUBITO_RETURN_IF_ERROR(MergeInternal(op, std::move(path)));
      return CollapseRoot(op);
    }
    gone = parent;
  }
  return Status::OK();
}

// The internal node at the end of `path` (root first) lost an entry. Under
// a quarter full and not the root, it is merged with a sibling under the
// same parent when both, with the parent's separator between them, fit in
// 3/4 of a page: the right node's leftmost child goes under the separator
// key, its entries follow, its parent entry goes and its page is freed;
// upward while parents become underfull.
Status BTree::MergeInternal(Op& op, std::vector<uint32_t> path) {
  const uint32_t ps = op.page_size();
  while (path.size() > 1) {
    const uint32_t node_no = path.back();
    path.pop_back();
    Result<PageHandle*> nh = op.Page(node_no);
    if (!nh.ok()) return nh.status();
    {
      NodeView node((*nh)->data(), ps);
      if (node.leaf() || node.UsedBytes() >= node.Capacity() / 4) return Status::OK();
    }
    const uint32_t parent_no = path.back();
    Result<PageHandle*> ph = op.Page(parent_no);
    if (!ph.ok()) return ph.status();
    std::vector<uint8_t> pimg = op.Image(*ph);
    NodeView parent(pimg.data(), ps);
    Result<MergePair> pair = PairForMerge(parent, node_no);
    if (!pair.ok()) return pair.status();
    const auto [left_no, right_no, sep] = *pair;
    if (left_no == 0) return Status::OK();  // an only child
    Result<PageHandle*> lh = op.Page(left_no);
    if (!lh.ok()) return lh.status();
    Result<PageHandle*> rh = op.Page(right_no);
    if (!rh.ok()) return rh.status();
    std::vector<uint8_t> limg = op.Image(*lh);
    NodeView l(limg.data(), ps);
    const NodeView r((*rh)->data(), ps);
    if (left_no == right_no || l.leaf() || r.leaf() || l.level() != r.level()) {
      return Status::Corruption(StrFormat("space %u: nodes %u and %u are not internal siblings",
                                          space_, left_no, right_no));
    }
    const uint32_t separator_bytes = 4 + static_cast<uint32_t>(parent.Key(sep).size()) + 4 + 2;
    if (l.UsedBytes() + r.UsedBytes() + separator_bytes > l.Capacity() / 4 * 3) {
      return Status::OK();
    }
    if (!l.Insert(l.count(), parent.Key(sep), ChildValue(r.leftmost()))) {
      return Status::Corruption("internal merge overflow");
    }
    for (uint16_t k = 0; k < r.count(); ++k) {
      if (!l.Insert(l.count(), r.Key(k), r.Value(k))) {
        return Status::Corruption("internal merge overflow");
      }
    }
    op.Put(*lh, limg);
    parent.Remove(sep);
    op.Put(*ph, pimg);
    SUBITO_RETURN_IF_ERROR(op.Free(right_no));
  }
  return Status::OK();
}

// While the root is an internal node with a single child, the child's
// content moves into the root page and the child is freed.
Status BTree::CollapseRoot(Op& op) {
  const uint32_t ps = op.page_size();
  for (;;) {
    Result<PageHandle*> rh = op.Page(root_);
    if (!rh.ok()) return rh.status();
    NodeView root((*rh)->data(), ps);
    if (root.leaf() || root.count() > 0) return Status::OK();
    const uint32_t only = root.leftmost();
    Result<PageHandle*> ch = op.Page(only);
    if (!ch.ok()) return ch.status();
    std::vector<uint8_t> img = op.Image(*ch);
    NodeView child(img.data(), ps);
    std::vector<uint8_t> rimg(ps);
    NodeView nr(rimg.data(), ps);
    nr.Init(space_, root_, child.level());
    nr.set_leftmost(child.leftmost());  // the root has no siblings
    for (uint16_t k = 0; k < child.count(); ++k) {
      if (!nr.Insert(k, child.Key(k), child.Value(k)))
        return Status::Corruption("collapse overflow");
    }
    op.Put(*rh, rimg);
    SUBITO_RETURN_IF_ERROR(op.Free(only));
  }
}

// ---- Cursor ----

Status BTree::Cursor::Load(const uint8_t* page, uint16_t slot) {
  NodeView n(const_cast<uint8_t*>(page), tree_->pool_->page_size());
  // The cursor's own copy of the leaf stays put until it moves: its entry
  // is viewed there. A frame is unlatched once this call returns: copied.
  const bool in_copy = copy_ && page == copy_.get();
  const auto take = [in_copy](std::string_view bytes, std::string* buf) -> std::string_view {
    if (in_copy) return bytes;
    buf->assign(bytes);  // reuses buf's storage
    return *buf;
  };
  key_ = take(n.Key(slot), &key_buf_);
  const std::string_view stored = n.Value(slot);
  if (!stored.empty() && stored[0] == kInline) {
    value_ = take(stored.substr(1), &value_buf_);
  } else if (IsChainRef(stored)) {
    // Read by Finish, once the latches are gone (C2).
    if (!pending_ref_.empty()) tree_->Unpin(RefHead(pending_ref_));
    pending_ref_.assign(stored);
    tree_->Pin(RefHead(pending_ref_));
    value_ = {};
  } else {
    Result<std::string> v = tree_->ReadValue(stored);
    if (!v.ok()) {
      valid_ = false;
      return v.status();
    }
    value_buf_ = std::move(*v);
    value_ = value_buf_;
  }
  slot_ = slot;
  leaf_lsn_ = page::PageLsn(page);
  valid_ = true;
  return Status::OK();
}

Status BTree::Cursor::LoadAndCopy(const PageHandle& leaf, uint16_t slot, uint64_t changes) {
  // The header and slots, then the heap: the gap between is never read.
  const uint32_t ps = tree_->pool_->page_size();
  const NodeView n(const_cast<uint8_t*>(leaf.data()), ps);
  const uint32_t slots_end = std::min<uint32_t>(kNodeHeaderEnd + 2u * n.count(), ps);
  const uint32_t heap_start = std::clamp<uint32_t>(n.heap_start(), slots_end, ps);
  if (!copy_) copy_.reset(new uint8_t[ps]);
  std::memcpy(copy_.get(), leaf.data(), slots_end);
  std::memcpy(copy_.get() + heap_start, leaf.data() + heap_start, ps - heap_start);
  copy_changes_ = changes;
  copy_valid_ = true;
  return Load(copy_.get(), slot);
}

Status BTree::Cursor::Seek(SeekMode mode, std::string_view key) {
  copy_valid_ = false;
  plain_steps_ = 0;
  sequential_hops_ = 0;
  Status st;
  {
    std::shared_lock tree(tree_->latch_);
    st = SeekLocked(mode, key);
  }
  return Finish(std::move(st));
}

Status BTree::Cursor::Finish(Status st) {
  if (pending_ref_.empty()) return st;
  if (st.ok()) {
    Result<std::string> v = tree_->ReadValue(pending_ref_);
    if (v.ok()) {
      value_buf_ = std::move(*v);
      value_ = value_buf_;
    } else {
      valid_ = false;
      st = v.status();
    }
  }
  tree_->Unpin(RefHead(pending_ref_));
  pending_ref_.clear();
  return st;
}

BTree::Cursor::~Cursor() {
  if (!pending_ref_.empty()) tree_->Unpin(RefHead(pending_ref_));
}

Status BTree::Cursor::SeekLocked(SeekMode mode, std::string_view key) {
  valid_ = false;
  const uint32_t ps = tree_->pool_->page_size();
  // kFirst/kLast descend along the leftmost/rightmost edge.
  uint32_t page_no = tree_->root_;
  uint32_t level = 0;
  for (int depth = 0;; ++depth) {
    Result<PageHandle> h = tree_->Fetch(page_no, Latch::kShared);
    if (!h.ok()) return h.status();
    NodeView n(h->data(), ps);
    if (depth > 0 && n.level() + 1u != level) {
      return Status::Corruption(StrFormat("space %u page %u: level %u under a level-%u node",
                                          tree_->space_, page_no, n.level(), level));
    }
    level = n.level();
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
    if (slot >= 0 && slot < n.count()) {
      SUBITO_RETURN_IF_ERROR(Load(h->data(), static_cast<uint16_t>(slot)));
      tree_->NoteLeaf(key_, page_no, h->data());  // a row read is often changed next
      return Status::OK();
    }
    page_no = forward ? n.next() : n.prev();
    if (hops > 1000000) return Status::Corruption("B-tree leaf chain does not end");
  }
  return Status::OK();  // past the end: not valid
}

void BTree::Cursor::NoteLeafHop(uint32_t from, uint32_t to) {
  if (to <= from || to - from > kSequentialGap) {
    sequential_hops_ = 0;
    return;
  }
  if (++sequential_hops_ >= kSequentialHops) {
    tree_->pool_->ReadAhead({tree_->space_, to}, std::min(kReadAheadPages, 2 * sequential_hops_));
  }
}

Status BTree::Cursor::Step(bool forward) {
  if (!valid_) return Status::InvalidArgument("cursor is not positioned");
  const uint32_t ps = tree_->pool_->page_size();
  // Read before any page: a change that lands after this load is caught by
  // the next step's comparison.
  const uint64_t changes = tree_->changes_.load(std::memory_order_acquire);
  if (copy_valid_ && copy_changes_ == changes) {
    NodeView n(copy_.get(), ps);
    const int slot = forward ? slot_ + 1 : slot_ - 1;
    // Only inline values: an overflow chain is read under the leaf's latch,
    // which keeps a writer from freeing it meanwhile.
    if (slot >= 0 && slot < n.count()) {
      const std::string_view stored = n.Value(static_cast<uint16_t>(slot));
      if (!stored.empty() && stored[0] == kInline) {
        return Load(copy_.get(), static_cast<uint16_t>(slot));
      }
    }
  }
  copy_valid_ = false;
  std::shared_lock tree(tree_->latch_);
  // Raw fetch: the leaf may have been merged away and freed (or reused)
  // since; its page_lsn then differs, and nothing else of it is trusted.
  Result<PageHandle> h = tree_->pool_->Fetch({tree_->space_, leaf_}, Latch::kShared);
  if (!h.ok()) return h.status();
  if (page::PageLsn(h->data()) != leaf_lsn_) {
    // The leaf changed since we were here: find our place again by key.
    h->Release();
    const std::string last(key_);
    return SeekLocked(forward ? SeekMode::kGT : SeekMode::kLT, last);
  }
  NodeView n(h->data(), ps);
  const int slot = forward ? slot_ + 1 : slot_ - 1;
  if (slot >= 0 && slot < n.count()) {
    // The first step after a seek reads the leaf in place: short scans
    // (a point query's look past its key) would not repay the copy.
    if (plain_steps_++ == 0) return Load(h->data(), static_cast<uint16_t>(slot));
    return LoadAndCopy(*h, static_cast<uint16_t>(slot), changes);
  }
  uint32_t page_no = forward ? n.next() : n.prev();
  h->Release();
  valid_ = false;
  if (forward) NoteLeafHop(leaf_, page_no);
  for (int hops = 0; page_no != 0; ++hops) {
    Result<PageHandle> s = tree_->Fetch(page_no, Latch::kShared);
    if (!s.ok()) return s.status();
    NodeView sn(s->data(), ps);
    if (!sn.leaf()) return Status::Corruption("B-tree leaf chain leads to an internal node");
    leaf_ = page_no;
    if (sn.count() > 0) {
      const std::string before(key_);  // key_ may view the copy replaced next
      SUBITO_RETURN_IF_ERROR(
          LoadAndCopy(*s, forward ? 0 : static_cast<uint16_t>(sn.count() - 1), changes));
      // Keys must keep moving in the scan's direction (a damaged chain with
      // a cycle would otherwise scan forever).
      if ((CompareKeys(key_, before) > 0) != forward) {
        valid_ = false;
        return Status::Corruption("B-tree leaf chain is out of key order");
      }
      return Status::OK();
    }
    page_no = forward ? sn.next() : sn.prev();
    if (hops > 1000000) return Status::Corruption("B-tree leaf chain does not end");
  }
  return Status::OK();
}

Status BTree::Cursor::Next() {
  return Finish(Step(true));
}
Status BTree::Cursor::Prev() {
  return Finish(Step(false));
}

}  // namespace subito::btree
