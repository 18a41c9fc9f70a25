#include "recovery/txn_recovery.h"

#include <unordered_set>
#include <vector>

#include "util/coding.h"
#include "util/strings.h"

namespace subito::recovery {
namespace {

struct Analysis {
  std::unordered_set<uint64_t> losers;
  log::Lsn first_loser_lsn = 0;
};

Result<Analysis> Analyze(log::RedoLog* log, RecoveryStats& stats) {
  std::unordered_set<uint64_t> ended;
  std::vector<std::pair<uint64_t, log::Lsn>> first;  // txn, its first undo record
  std::unordered_set<uint64_t> seen;
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
      if (seen.insert(id).second) first.emplace_back(id, r.lsn);
      stats.max_txn = std::max(stats.max_txn, id);
    }
    return Status::OK();
  }));
  Analysis a;
  for (auto [id, lsn] : first) {  // in log order
    if (ended.count(id)) continue;
    if (a.losers.empty()) a.first_loser_lsn = lsn;
    a.losers.insert(id);
  }
  return a;
}

Status UndoLosers(buffer::BufferPool* pool, const Analysis& a, const ApplyUndo& apply,
                  const IsDropped& dropped, RecoveryStats& stats) {
  log::RedoLog* log = pool->log();
  std::vector<std::pair<log::Lsn, txn::UndoRecord>> undo;
  SUBITO_RETURN_IF_ERROR(log->ForEachRecoveredRecord([&](const log::LogRecordView& r) {
    if (r.type == txn::kRecordTxnUndoReset) {
      Result<std::pair<uint64_t, uint64_t>> reset = txn::DecodeUndoReset(r.payload, r.length);
      if (!reset.ok()) return reset.status();
      std::erase_if(undo, [&](const auto& u) {
        return u.second.txn == reset->first && u.first < reset->second;
      });
      return Status::OK();
    }
    if (r.type != txn::kRecordTxnUndo) return Status::OK();
    Result<txn::UndoRecord> u = txn::DecodeUndo(r.payload, r.length);
    if (!u.ok()) {
      return Status::Corruption(StrFormat("undo record at LSN %llu: %s",
                                          static_cast<unsigned long long>(r.lsn),
                                          u.status().message().c_str()));
    }
    if (a.losers.count(u->txn) && !(dropped && dropped(u->space))) {
      undo.emplace_back(r.lsn, std::move(*u));
    }
    return Status::OK();
  }));
  // The losers pin the checkpoint: waiting for log space could wait for
  // ever. Their undo (bounded per transaction) fits in the quarter of the
  // log that LogFreeCheck keeps free.
  buffer::BufferPool::LogFreeExemption exempt;
  for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
    SUBITO_RETURN_IF_ERROR(apply(it->second));
    ++stats.undo_applied;
  }
  log::Lsn end = 0;
  for (uint64_t id : a.losers) {
    const std::string rec = txn::EncodeTxnEnd(id);
    Result<log::AppendResult> r = log->Append(txn::kRecordTxnAbort, rec.data(), rec.size());
    if (!r.ok()) return r.status();
    end = r->end;
  }
  stats.losers = a.losers.size();
  return log->WaitDurable(end);
}

}  // namespace

Result<RecoveryStats> Recover(buffer::BufferPool* pool, buffer::DoubleWrite* dwb,
                              const ApplyUndo& apply, const IsDropped& dropped) {
  RecoveryStats stats;
  pool->HoldCheckpoint();
  Result<buffer::PageRecoveryStats> pages = buffer::RecoverPages(pool, dwb, dropped);
  Result<Analysis> analysis =
      pages.ok() ? Analyze(pool->log(), stats) : Result<Analysis>(pages.status());
  if (!analysis.ok() || analysis->losers.empty()) {
    pool->ReleaseCheckpoint();
    if (!analysis.ok()) return analysis.status();
    stats.pages = *pages;
    return stats;
  }
  stats.pages = *pages;
  const uint64_t pin = pool->PinCheckpoint(analysis->first_loser_lsn);
  pool->ReleaseCheckpoint();
  Status st = UndoLosers(pool, *analysis, apply, dropped, stats);
  pool->EndChange(pin);
  SUBITO_RETURN_IF_ERROR(st);
  return stats;
}

}  // namespace subito::recovery
