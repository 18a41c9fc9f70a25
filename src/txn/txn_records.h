// Transaction records in the redo log (type range kRecordTxnFirst..Last).
//
//   kRecordTxnUndo    u64 txn, u32 space, u8 had_before, u32 key_length,
//                     key bytes, then the value before the change (if
//                     had_before). Appended BEFORE the page edits it undoes,
//                     so any log prefix holding the edits holds the undo.
//   kRecordTxnCommit  u64 txn. A transaction is committed iff this record
//                     is durable.
//   kRecordTxnAbort   u64 txn. Appended after its rollback's page edits.
//
// Undo is logical and idempotent: "make key hold `before` (or be absent)".
// The writer holds the key's exclusive lock from before the undo record
// until its commit or abort record, so no other change to the key can lie
// between; applying a transaction's undo records newest to oldest restores
// every key it touched, however much of it was already applied (a rollback
// or a recovery cut short).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "log/format.h"
#include "subito/status.h"

namespace subito::txn {

inline constexpr uint16_t kRecordTxnUndo = log::kRecordTxnFirst + 1;
inline constexpr uint16_t kRecordTxnCommit = log::kRecordTxnFirst + 2;
inline constexpr uint16_t kRecordTxnAbort = log::kRecordTxnFirst + 3;
inline constexpr uint32_t kUndoHeaderSize = 17;

struct UndoRecord {
  uint64_t txn = 0;
  uint32_t space = 0;
  std::string key;
  std::optional<std::string> before;
};

std::string EncodeUndo(uint64_t txn, uint32_t space, std::string_view key,
                       const std::optional<std::string>& before);
Result<UndoRecord> DecodeUndo(const uint8_t* payload, uint32_t length);
std::string EncodeTxnEnd(uint64_t txn);  // commit and abort
Result<uint64_t> DecodeTxnEnd(const uint8_t* payload, uint32_t length);

}  // namespace subito::txn
