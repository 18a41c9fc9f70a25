#include "txn/txn_records.h"

#include "util/coding.h"

namespace subito::txn {

std::string EncodeUndo(uint64_t txn, uint32_t space, std::string_view key,
                       const std::optional<std::string>& before, bool before_chain, bool empties) {
  std::string out;
  // One allocation, not one per append.
  out.reserve(kUndoHeaderSize + (empties ? 0 : key.size() + (before ? before->size() : 0)));
  out.resize(kUndoHeaderSize);
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  EncodeFixed64(p, txn);
  EncodeFixed32(p + 8, space);
  if (empties) {
    p[12] = 3;
    return out;  // key length 0, no value
  }
  p[12] = !before.has_value() ? 0 : before_chain ? 2 : 1;
  EncodeFixed32(p + 13, static_cast<uint32_t>(key.size()));
  out.append(key);
  if (before) out.append(*before);
  return out;
}

Result<UndoRecord> DecodeUndo(const uint8_t* payload, uint32_t length) {
  if (length < kUndoHeaderSize) return Status::Corruption("undo record: truncated header");
  UndoRecord r;
  r.txn = DecodeFixed64(payload);
  r.space = DecodeFixed32(payload + 8);
  const uint8_t had_before = payload[12];
  const uint32_t key_length = DecodeFixed32(payload + 13);
  if (had_before > 3 || key_length > length - kUndoHeaderSize) {
    return Status::Corruption("undo record: bad key length or flag");
  }
  if (had_before == 3) {
    if (length != kUndoHeaderSize) {
      return Status::Corruption("undo record: bytes after an index-emptying record");
    }
    r.empties = true;
    return r;
  }
  const char* key = reinterpret_cast<const char*>(payload + kUndoHeaderSize);
  r.key.assign(key, key_length);
  const uint32_t rest = length - kUndoHeaderSize - key_length;
  if (had_before) {
    r.before.emplace(key + key_length, rest);
    r.before_chain = had_before == 2;
  } else if (rest != 0) {
    return Status::Corruption("undo record: bytes after an absent value");
  }
  return r;
}

std::string EncodeTxnEnd(uint64_t txn) {
  std::string out(8, '\0');
  EncodeFixed64(reinterpret_cast<uint8_t*>(out.data()), txn);
  return out;
}

Result<uint64_t> DecodeTxnEnd(const uint8_t* payload, uint32_t length) {
  if (length != 8) return Status::Corruption("commit/abort record: wrong length");
  return DecodeFixed64(payload);
}

std::string EncodeTxnValue(uint64_t txn, uint64_t value) {
  std::string out(16, '\0');
  EncodeFixed64(reinterpret_cast<uint8_t*>(out.data()), txn);
  EncodeFixed64(reinterpret_cast<uint8_t*>(out.data()) + 8, value);
  return out;
}

Result<std::pair<uint64_t, uint64_t>> DecodeTxnValue(const uint8_t* payload, uint32_t length,
                                                     const char* record) {
  if (length != 16) return Status::Corruption(std::string(record) + " record: wrong length");
  return std::pair<uint64_t, uint64_t>(DecodeFixed64(payload), DecodeFixed64(payload + 8));
}

std::string EncodePrepare(uint64_t txn, std::string_view xid) {
  std::string out(12, '\0');
  EncodeFixed64(reinterpret_cast<uint8_t*>(out.data()), txn);
  EncodeFixed32(reinterpret_cast<uint8_t*>(out.data()) + 8, static_cast<uint32_t>(xid.size()));
  out.append(xid);
  return out;
}

Result<std::pair<uint64_t, std::string>> DecodePrepare(const uint8_t* payload, uint32_t length) {
  if (length < 12) return Status::Corruption("prepare record: truncated header");
  const uint32_t xid_length = DecodeFixed32(payload + 8);
  if (xid_length > kMaxXidBytes || xid_length != length - 12) {
    return Status::Corruption("prepare record: bad xid length");
  }
  return std::pair<uint64_t, std::string>(
      DecodeFixed64(payload), std::string(reinterpret_cast<const char*>(payload + 12), xid_length));
}

}  // namespace subito::txn
