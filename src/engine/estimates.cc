// Row-count estimates for query optimizers (Table::EstimateRange,
// Table::EstimateEntriesPerKey). They read the trees' entries directly: no
// snapshot, no locks, no row lookups.
//
// A range is counted exactly up to kExactCount entries; beyond that it is
// (Rank(hi) - Rank(lo)) x entries, where Rank assumes that sibling subtrees
// are equally large. Entries per key come from random entries: for each,
// the size g of its group of equal prefixes is estimated as a range, and
// the result is the harmonic mean of g (a random entry lands in a group
// with probability proportional to the group's size; 1/g undoes that).
#include <algorithm>
#include <random>

#include "btree/btree.h"
#include "engine/engine_impl.h"
#include "engine/row_codec.h"

namespace subito::engine {
namespace {

constexpr uint64_t kExactCount = 48;

// Entries in [lo, hi) (hi nullopt: to the end): exact up to kExactCount,
// estimated from the keys' ranks beyond.
Result<uint64_t> CountKeys(btree::BTree* tree, const std::string& lo,
                           const std::optional<std::string>& hi) {
  Result<uint64_t> n =
      tree->CountUpTo(lo, hi ? std::optional<std::string_view>(*hi) : std::nullopt, kExactCount);
  if (!n.ok() || *n < kExactCount) return n;
  Result<double> a = tree->Rank(lo);
  if (!a.ok()) return a.status();
  double b = 1.0;
  if (hi) {
    Result<double> r = tree->Rank(*hi);
    if (!r.ok()) return r.status();
    b = *r;
  }
  Result<uint64_t> entries = tree->entries();
  if (!entries.ok()) return entries.status();
  const double est = std::max(0.0, b - *a) * static_cast<double>(*entries);
  return std::max<uint64_t>(kExactCount, static_cast<uint64_t>(est));
}

}  // namespace

Result<uint64_t> TableImpl::EstimateRange(uint32_t index, const std::optional<Bound>& lo,
                                          const std::optional<Bound>& hi) {
  if (index >= indexes.size()) return Status::InvalidArgument("no such index");
  IndexImpl* ix = indexes[index].get();
  std::string lo_key;
  if (lo) {
    Result<std::string> k = EncodeKey(def_, ix->key_columns, lo->prefix);
    if (!k.ok()) return k.status();
    if (lo->inclusive) {
      lo_key = std::move(*k);
    } else {
      std::optional<std::string> s = KeySuccessor(std::move(*k));
      if (!s) return uint64_t{0};
      lo_key = std::move(*s);
    }
  }
  std::optional<std::string> hi_key;
  if (hi) {
    Result<std::string> k = EncodeKey(def_, ix->key_columns, hi->prefix);
    if (!k.ok()) return k.status();
    hi_key = hi->inclusive ? KeySuccessor(std::move(*k)) : std::optional<std::string>(*k);
  }
  if (hi_key && *hi_key <= lo_key) return uint64_t{0};
  return CountKeys(ix->tree.get(), lo_key, hi_key);
}

Result<std::vector<double>> TableImpl::EstimateEntriesPerKey(uint32_t index, uint32_t samples) {
  if (index >= indexes.size()) return Status::InvalidArgument("no such index");
  IndexImpl* ix = indexes[index].get();
  // A non-unique secondary index's prefixes that go on into the primary
  // key are searched too (MariaDB's extended keys).
  const size_t own = index == 0           ? def_.primary_key.size()
                     : ix->cat.def.unique ? ix->cat.def.columns.size()
                                          : ix->key_columns.size();
  std::vector<double> inverse_sum(own, 0.0);
  uint32_t taken = 0;
  std::mt19937_64 rng(0x5ab170 + index);
  for (uint32_t s = 0; s < samples; ++s) {
    Result<std::optional<std::string>> key = ix->tree->RandomKey(rng());
    if (!key.ok()) return key.status();
    if (!key->has_value()) break;  // empty
    ++taken;
    for (size_t j = 1; j <= own; ++j) {
      Result<size_t> len = KeyPrefixLength(def_, ix->key_columns, **key, j);
      if (!len.ok()) return len.status();
      std::string prefix = (*key)->substr(0, *len);
      std::optional<std::string> end = KeySuccessor(prefix);
      Result<uint64_t> g = CountKeys(ix->tree.get(), prefix, end);
      if (!g.ok()) return g.status();
      inverse_sum[j - 1] += 1.0 / static_cast<double>(std::max<uint64_t>(*g, 1));
    }
  }
  std::vector<double> per_key(own, 1.0);
  if (taken == 0) return per_key;
  for (size_t j = 0; j < own; ++j) per_key[j] = std::max(1.0, taken / inverse_sum[j]);
  if (index == 0 || ix->cat.def.unique) per_key[own - 1] = 1.0;
  return per_key;
}

}  // namespace subito::engine
