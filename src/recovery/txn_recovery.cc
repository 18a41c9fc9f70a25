#include "recovery/txn_recovery.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "util/coding.h"
#include "util/strings.h"

namespace subito::recovery {
namespace {

// Where a transaction's undo list is, from the log since the checkpoint:
// its undo file's first anchor.count entries (if an anchor was found), then
// its undo records after the anchor (and after any undo reset), by LSN.
struct UndoTrail {
  std::optional<txn::UndoAnchor> anchor;
  log::Lsn anchor_lsn = 0;
  std::vector<log::Lsn> tail;
  void DropBefore(log::Lsn lsn) {
    std::erase_if(tail, [&](log::Lsn at) { return at < lsn; });
  }
  // A cut record (txn_records.h): the list is its first `count` entries,
  // at or above the anchor's. Analysis may have begun after some of the
  // list's records (a relocation or an anchor after the cut moved the
  // transaction's pin past them): then the records seen are cut to
  // `count` at most, and the reset or anchor that follows in the log
  // supersedes them.
  Status Cut(uint64_t count, log::Lsn lsn) {
    const uint64_t in_file = anchor ? anchor->count : 0;
    if (count < in_file) {
      return Status::Corruption(StrFormat(
          "undo-cut record at LSN %llu keeps %llu entries of a list whose undo file holds %llu",
          static_cast<unsigned long long>(lsn), static_cast<unsigned long long>(count),
          static_cast<unsigned long long>(in_file)));
    }
    if (count - in_file < tail.size()) tail.resize(count - in_file);
    return Status::OK();
  }
};

struct Analysis {
  std::map<uint64_t, UndoTrail> losers;
  std::unordered_map<uint64_t, std::string> prepared;  // losers with a prepare record: xid
};

// Analysis, record by record, in the same pass as page redo: a
// transaction with undo records and no commit or abort record is a loser.
// The same pass follows every transaction's undo trail (dropped at its
// end), so that the losers' undo needs no second pass over the log.
class Analyzer {
 public:
  explicit Analyzer(RecoveryStats& stats) : stats_(stats) {}
  Status Add(const log::LogRecordView& r) {
    if (r.type == txn::kRecordTxnCommit || r.type == txn::kRecordTxnAbort) {
      Result<uint64_t> id = txn::DecodeTxnEnd(r.payload, r.length);
      if (!id.ok()) return id.status();
      ended_.insert(*id);
      trails_.erase(*id);
      stats_.max_txn = std::max(stats_.max_txn, *id);
      ++(r.type == txn::kRecordTxnCommit ? stats_.committed : stats_.aborted);
    } else if (r.type == txn::kRecordTxnUnprepare) {
      Result<uint64_t> id = txn::DecodeTxnEnd(r.payload, r.length);
      if (!id.ok()) return id.status();
      prepared_.erase(*id);  // its rollback had begun: a loser
    } else if (r.type == txn::kRecordTxnPrepare) {
      Result<std::pair<uint64_t, std::string>> p = txn::DecodePrepare(r.payload, r.length);
      if (!p.ok()) return p.status();
      prepared_[p->first] = std::move(p->second);
    } else if (r.type == txn::kRecordTxnUndo) {
      if (r.length < 8) return Status::Corruption("undo record: truncated header");
      const uint64_t id = DecodeFixed64(r.payload);
      trails_[id].tail.push_back(r.lsn);
      stats_.max_txn = std::max(stats_.max_txn, id);
    } else if (r.type == txn::kRecordTxnUndoFile) {
      Result<txn::UndoAnchor> a = txn::DecodeUndoAnchor(r.payload, r.length);
      if (!a.ok()) return a.status();
      UndoTrail& t = trails_[a->txn];
      t.DropBefore(r.lsn);  // U3: the records before it are in the file
      t.anchor = *a;
      t.anchor_lsn = r.lsn;
      stats_.max_txn = std::max(stats_.max_txn, a->txn);
    } else if (r.type == txn::kRecordTxnUndoReset) {
      Result<std::pair<uint64_t, uint64_t>> reset =
          txn::DecodeTxnValue(r.payload, r.length, "undo-reset");
      if (!reset.ok()) return reset.status();
      if (auto it = trails_.find(reset->first); it != trails_.end()) {
        it->second.DropBefore(reset->second);
      }
    } else if (r.type == txn::kRecordTxnUndoCut) {
      Result<std::pair<uint64_t, uint64_t>> cut =
          txn::DecodeTxnValue(r.payload, r.length, "undo-cut");
      if (!cut.ok()) return cut.status();
      SUBITO_RETURN_IF_ERROR(trails_[cut->first].Cut(cut->second, r.lsn));
    } else if (r.type >= log::kRecordTxnFirst && r.type <= log::kRecordTxnLast) {
      // Past the types above: a later format's record, whose meaning this
      // recovery would miss.
      return Status::Corruption(StrFormat("unknown transaction record type 0x%04x at LSN %llu",
                                          r.type, static_cast<unsigned long long>(r.lsn)));
    }
    return Status::OK();
  }
  Analysis Finish() {
    Analysis a;
    for (auto& [id, trail] : trails_) {
      if (ended_.count(id)) continue;
      a.losers.emplace(id, std::move(trail));
      if (auto p = prepared_.find(id); p != prepared_.end()) a.prepared[id] = p->second;
    }
    return a;
  }

 private:
  RecoveryStats& stats_;
  std::unordered_set<uint64_t> ended_;
  std::unordered_map<uint64_t, UndoTrail> trails_;  // transactions with undo, not ended
  std::unordered_map<uint64_t, std::string> prepared_;
};

// A loser's undo list: its undo file's first anchor.count entries (if an
// anchor was found), then `tail`, its undo records after the anchor (and
// after any undo reset), in log order, as the log holds them (checked).
struct Loser {
  std::optional<txn::UndoAnchor> anchor;
  log::Lsn anchor_lsn = 0;
  std::vector<std::pair<log::Lsn, std::string>> tail;
  std::unique_ptr<txn::UndoFile> file;
  uint64_t from_before_crash = 0;  // entries the file held at analysis
  uint64_t pin = 0;
  std::optional<std::string> xid;  // prepared: kept, not undone (P1)
};
using Losers = std::map<uint64_t, Loser>;

// Reads the loser's undo records the analysis found (by LSN; the checkpoint
// is still held), skipping those of dropped spaces.
Status CollectUndo(log::RedoLog* log, const IsDropped& dropped, const UndoTrail& trail,
                   Loser& loser) {
  loser.anchor = trail.anchor;
  loser.anchor_lsn = trail.anchor_lsn;
  std::vector<uint8_t> scratch;
  log::LogRecordView r{};
  for (log::Lsn lsn : trail.tail) {
    SUBITO_RETURN_IF_ERROR(log->ReadRecoveredRecord(lsn, &scratch, &r));
    Result<txn::UndoRecord> u =
        r.type == txn::kRecordTxnUndo
            ? txn::DecodeUndo(r.payload, r.length)
            : Result<txn::UndoRecord>(Status::Corruption("not an undo record"));
    if (!u.ok()) {
      return Status::Corruption(StrFormat("undo record at LSN %llu: %s",
                                          static_cast<unsigned long long>(lsn),
                                          u.status().message().c_str()));
    }
    if (dropped && dropped(u->space)) continue;
    loser.tail.emplace_back(lsn, std::string(reinterpret_cast<const char*>(r.payload), r.length));
  }
  return Status::OK();
}

// Appends an anchor naming all of each loser's file (and, for a prepared
// one, a copy of its prepare record: P1), makes them durable and moves each
// loser's pin to its anchor.
Status AnchorAll(buffer::BufferPool* pool, std::vector<Loser*>& pending) {
  log::RedoLog* log = pool->log();
  std::vector<uint64_t> new_pins;
  Status st;
  log::Lsn end = 0;
  for (Loser* l : pending) {
    new_pins.push_back(pool->BeginChange());
    const std::string rec = txn::EncodeUndoAnchor(l->file->anchor());
    Result<log::AppendResult> a =
        log->Append(txn::kRecordTxnUndoFile, rec.data(), static_cast<uint32_t>(rec.size()));
    if (a.ok() && l->xid) {
      const std::string prep = txn::EncodePrepare(l->file->anchor().txn, *l->xid);
      a = log->Append(txn::kRecordTxnPrepare, prep.data(), static_cast<uint32_t>(prep.size()));
    }
    if (!a.ok()) {
      st = a.status();
      break;
    }
    end = a->end;
  }
  if (st.ok() && end != 0) st = log->WaitDurable(end);
  for (size_t i = 0; i < new_pins.size(); ++i) {
    uint64_t& old = pending[i]->pin;
    pool->EndChange(st.ok() ? old : new_pins[i]);
    if (st.ok()) old = new_pins[i];
  }
  return st;
}

// Moves each loser's undo into its file (U1), anchored.
Status ToFiles(buffer::BufferPool* pool, const UndoFiles& files, Losers& losers,
               std::vector<Loser*>& pending) {
  for (auto& [id, l] : losers) {
    Result<std::unique_ptr<txn::UndoFile>> f =
        l.anchor ? txn::UndoFile::Open(files.fs, files.dir, *l.anchor)
                 : txn::UndoFile::Create(files.fs, files.dir, id);
    if (!f.ok()) return f.status();
    l.file = std::move(*f);
    l.from_before_crash = l.file->count();
    std::vector<std::string> payloads;
    payloads.reserve(l.tail.size());
    for (auto& [lsn, payload] : l.tail) payloads.push_back(std::move(payload));
    l.tail.clear();
    SUBITO_RETURN_IF_ERROR(l.file->Append(payloads));
    pending.push_back(&l);
  }
  return AnchorAll(pool, pending);
}

// Rolls back pending.front() from its file, newest first, in chunks whose
// compensation fits in the quarter of the log kept free (every loser pins
// the checkpoint, so this may not wait for log space); between chunks every
// pending loser is anchored anew, and then the log may be waited for. Then
// its abort record, made durable.
Status UndoLoser(buffer::BufferPool* pool, uint64_t id, std::vector<Loser*>& pending,
                 const ApplyUndo& apply, const IsDropped& dropped, RecoveryStats& stats) {
  txn::UndoFile* file = pending.front()->file.get();
  const uint64_t chunk_bytes = txn::RollbackChunkBytes(pool->log()->capacity());
  while (file->count() > 0) {
    const uint64_t end = file->count();
    uint64_t first = end;
    {
      buffer::BufferPool::LogFreeExemption exempt;
      uint64_t bytes = 0;
      while (first > 0 && bytes < chunk_bytes) {
        const uint64_t from = first - std::min<uint64_t>(first, 256);
        Result<std::vector<txn::UndoRecord>> records = file->Read(from, first);
        if (!records.ok()) return records.status();
        for (auto u = records->rbegin(); u != records->rend(); ++u) {
          bytes += txn::RollbackWeight(u->key, u->before, u->empties,
                                       pool->page_size());  // a root image and the header
          if (dropped && dropped(u->space)) continue;
          SUBITO_RETURN_IF_ERROR(apply(*u));
          ++stats.undo_applied;
          const uint64_t index = first - 1 - static_cast<uint64_t>(u - records->rbegin());
          stats.undo_file_entries += index < pending.front()->from_before_crash;
        }
        first = from;
      }
    }
    SUBITO_RETURN_IF_ERROR(file->Truncate(first));
    SUBITO_RETURN_IF_ERROR(AnchorAll(pool, pending));
    if (first > 0) SUBITO_RETURN_IF_ERROR(pool->LogFreeCheck());
  }
  const std::string rec = txn::EncodeTxnEnd(id);
  Result<log::AppendResult> r = pool->log()->Append(txn::kRecordTxnAbort, rec.data(), rec.size());
  if (!r.ok()) return r.status();
  ++stats.losers;
  return pool->log()->WaitDurable(r->end);
}

}  // namespace

Result<RecoveryStats> Recover(buffer::BufferPool* pool, buffer::DoubleWrite* dwb,
                              const ApplyUndo& apply, const IsDropped& dropped,
                              const UndoFiles& files, bool lazy_redo, bool keep_losers) {
  RecoveryStats stats;
  auto since = std::chrono::steady_clock::now();
  auto lap = [&since](double* seconds) {
    const auto now = std::chrono::steady_clock::now();
    *seconds += std::chrono::duration<double>(now - since).count();
    since = now;
  };
  pool->HoldCheckpoint();
  Analyzer analyzer(stats);
  Result<buffer::PageRecoveryStats> pages = buffer::RecoverPages(
      pool, dwb, dropped, lazy_redo, [&](const log::LogRecordView& r) { return analyzer.Add(r); });
  Result<Analysis> analysis = pages.ok() ? analyzer.Finish() : Result<Analysis>(pages.status());
  Losers losers;
  Status st = analysis.status();
  lap(&stats.pass_seconds);
  if (st.ok()) {
    for (auto& [id, trail] : analysis->losers) {
      st = CollectUndo(pool->log(), dropped, trail, losers[id]);
      if (!st.ok()) break;
    }
    for (auto& [id, xid] : analysis->prepared) losers[id].xid = xid;
  }
  lap(&stats.collect_seconds);
  if (!st.ok()) {
    pool->ReleaseCheckpoint();
    return st;
  }
  stats.pages = *pages;
  // One pin per loser at its first needed record, taken while the
  // checkpoint is still held; each moves to the loser's anchors, and goes
  // once its abort record is durable.
  for (auto& [id, l] : losers) {
    const log::Lsn first = l.anchor          ? l.anchor_lsn
                           : !l.tail.empty() ? l.tail.front().first
                                             : pool->log()->reserved_lsn();
    l.pin = pool->PinCheckpoint(first);
  }
  pool->ReleaseCheckpoint();
  for (auto& [id, l] : losers) stats.losers_with_undo_files += l.anchor.has_value();
  std::vector<Loser*> pending;
  st = ToFiles(pool, files, losers, pending);
  // Prepared ones last: each undo below takes pending.front(), and the
  // prepared stay pending (anchored again with the others) to the end.
  std::stable_partition(pending.begin(), pending.end(), [](Loser* l) { return !l->xid; });
  std::vector<uint64_t> done;
  for (auto& [id, l] : losers) {
    if (l.xid || keep_losers) continue;
    if (st.ok()) {
      st = UndoLoser(pool, id, pending, apply, dropped, stats);
      if (st.ok()) {
        pending.erase(pending.begin());
        done.push_back(id);
      }
    }
    pool->EndChange(l.pin);
  }
  for (auto& [id, l] : losers) {
    if (!l.xid && !keep_losers) continue;
    if (!st.ok()) {
      pool->EndChange(l.pin);
      continue;
    }
    if (!l.xid) {
      ++stats.losers_kept;
      stats.undo_file_entries += l.from_before_crash;  // the background rollback applies them
    }
    stats.prepared.push_back({id, l.xid.has_value(), l.xid.value_or(""), std::move(l.file), l.pin});
  }
  for (uint64_t id : done) {
    const std::string path = losers[id].file->path();
    losers[id].file.reset();
    (void)files.fs->Remove(path);
  }
  lap(&stats.undo_seconds);
  SUBITO_RETURN_IF_ERROR(st);
  return stats;
}

}  // namespace subito::recovery
