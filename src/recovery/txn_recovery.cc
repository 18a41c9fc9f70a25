#include "recovery/txn_recovery.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "util/coding.h"
#include "util/strings.h"

namespace subito::recovery {
namespace {

struct Analysis {
  std::unordered_set<uint64_t> losers;
};

Result<Analysis> Analyze(log::RedoLog* log, RecoveryStats& stats) {
  std::unordered_set<uint64_t> ended, seen;  // seen: transactions with undo records
  SUBITO_RETURN_IF_ERROR(log->ForEachRecoveredRecord([&](const log::LogRecordView& r) {
    if (r.type == txn::kRecordTxnCommit || r.type == txn::kRecordTxnAbort) {
      Result<uint64_t> id = txn::DecodeTxnEnd(r.payload, r.length);
      if (!id.ok()) return id.status();
      ended.insert(*id);
      stats.max_txn = std::max(stats.max_txn, *id);
      ++(r.type == txn::kRecordTxnCommit ? stats.committed : stats.aborted);
    } else if (r.type == txn::kRecordTxnUndo) {
      if (r.length < 8) return Status::Corruption("undo record: truncated header");
      const uint64_t id = DecodeFixed64(r.payload);
      seen.insert(id);
      stats.max_txn = std::max(stats.max_txn, id);
    }
    return Status::OK();
  }));
  Analysis a;
  for (uint64_t id : seen) {
    if (!ended.count(id)) a.losers.insert(id);
  }
  return a;
}

// Each loser's undo records (after any undo reset), in log order.
using LoserUndo = std::map<uint64_t, std::vector<std::pair<log::Lsn, txn::UndoRecord>>>;

Result<LoserUndo> CollectUndo(log::RedoLog* log, const Analysis& a, const IsDropped& dropped) {
  LoserUndo undo;
  for (uint64_t id : a.losers) undo[id];
  SUBITO_RETURN_IF_ERROR(log->ForEachRecoveredRecord([&](const log::LogRecordView& r) {
    if (r.type == txn::kRecordTxnUndoReset) {
      Result<std::pair<uint64_t, uint64_t>> reset = txn::DecodeUndoReset(r.payload, r.length);
      if (!reset.ok()) return reset.status();
      auto it = undo.find(reset->first);
      if (it != undo.end()) {
        std::erase_if(it->second, [&](const auto& u) { return u.first < reset->second; });
      }
      return Status::OK();
    }
    if (r.type != txn::kRecordTxnUndo) return Status::OK();
    Result<txn::UndoRecord> u = txn::DecodeUndo(r.payload, r.length);
    if (!u.ok()) {
      return Status::Corruption(StrFormat("undo record at LSN %llu: %s",
                                          static_cast<unsigned long long>(r.lsn),
                                          u.status().message().c_str()));
    }
    auto it = undo.find(u->txn);
    if (it != undo.end() && !(dropped && dropped(u->space))) {
      it->second.emplace_back(r.lsn, std::move(*u));
    }
    return Status::OK();
  }));
  return undo;
}

// Rolls one loser back: its undo newest first, then its abort record, made
// durable. The loser's pin keeps its records readable until then.
Status UndoLoser(buffer::BufferPool* pool, uint64_t id,
                 const std::vector<std::pair<log::Lsn, txn::UndoRecord>>& undo,
                 const ApplyUndo& apply, RecoveryStats& stats) {
  {
    // The losers pin the checkpoint, so waiting for log space could wait
    // for ever: one transaction's undo is bounded (1/16 of the log) and
    // fits in the quarter of the log that LogFreeCheck keeps free.
    buffer::BufferPool::LogFreeExemption exempt;
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      SUBITO_RETURN_IF_ERROR(apply(it->second));
      ++stats.undo_applied;
    }
  }
  const std::string rec = txn::EncodeTxnEnd(id);
  Result<log::AppendResult> r = pool->log()->Append(txn::kRecordTxnAbort, rec.data(), rec.size());
  if (!r.ok()) return r.status();
  ++stats.losers;
  return pool->log()->WaitDurable(r->end);
}

}  // namespace

Result<RecoveryStats> Recover(buffer::BufferPool* pool, buffer::DoubleWrite* dwb,
                              const ApplyUndo& apply, const IsDropped& dropped) {
  RecoveryStats stats;
  pool->HoldCheckpoint();
  Result<buffer::PageRecoveryStats> pages = buffer::RecoverPages(pool, dwb, dropped);
  Result<Analysis> analysis =
      pages.ok() ? Analyze(pool->log(), stats) : Result<Analysis>(pages.status());
  Result<LoserUndo> undo = !analysis.ok() ? Result<LoserUndo>(analysis.status())
                           : analysis->losers.empty()
                               ? Result<LoserUndo>(LoserUndo{})
                               : CollectUndo(pool->log(), *analysis, dropped);
  if (!undo.ok()) {
    pool->ReleaseCheckpoint();
    return undo.status();
  }
  stats.pages = *pages;
  // One pin per loser at its first needed record, taken while the
  // checkpoint is still held; losers are then rolled back oldest first, each
  // unpinned once its abort record is durable.
  std::vector<std::tuple<log::Lsn, uint64_t, uint64_t>> order;  // first LSN, txn, pin
  for (const auto& [id, records] : *undo) {
    const log::Lsn first = records.empty() ? pool->log()->reserved_lsn() : records.front().first;
    order.emplace_back(first, id, pool->PinCheckpoint(first));
  }
  pool->ReleaseCheckpoint();
  std::sort(order.begin(), order.end());
  Status st;
  for (const auto& [first, id, pin] : order) {
    if (st.ok()) st = UndoLoser(pool, id, (*undo)[id], apply, stats);
    pool->EndChange(pin);
  }
  SUBITO_RETURN_IF_ERROR(st);
  return stats;
}

}  // namespace subito::recovery
