#include "log/log_reader.h"

#include <algorithm>
#include <cstring>

#include "util/coding.h"
#include "util/crc32c.h"
#include "util/strings.h"

namespace subito::log {
namespace {

using ull = unsigned long long;

// Reads logical LSN ranges out of the stream images.
class LogicalReader {
 public:
  LogicalReader(const std::vector<StreamView>& streams, const Geometry& g)
      : streams_(streams), g_(g) {}

  void Read(Lsn lsn, size_t n, uint8_t* dst) const {
    while (n > 0) {
      size_t chunk = std::min<uint64_t>(n, g_.ContiguousAt(lsn));
      std::memcpy(dst, Piece(lsn), chunk);
      dst += chunk;
      lsn += chunk;
      n -= chunk;
    }
  }
  // n bytes at lsn: in place when they lie in one stripe, else copied to
  // scratch.
  const uint8_t* Span(Lsn lsn, size_t n, std::vector<uint8_t>& scratch) const {
    if (g_.ContiguousAt(lsn) >= n) return Piece(lsn);
    scratch.resize(n);
    Read(lsn, n, scratch.data());
    return scratch.data();
  }
  const uint8_t* Piece(Lsn lsn) const {
    return streams_[g_.StreamOf(lsn)].data + g_.FileOffsetOf(lsn);
  }
  std::string Where(Lsn lsn) const {
    uint32_t s = g_.StreamOf(lsn);
    return StrFormat("log stream %u (%s) offset %llu, LSN %llu", s, streams_[s].name.c_str(),
                     static_cast<ull>(g_.FileOffsetOf(lsn)), static_cast<ull>(lsn));
  }

 private:
  const std::vector<StreamView>& streams_;
  const Geometry& g_;
};

// The view of the record at p with header h.
LogRecordView ViewOf(const uint8_t* h, Lsn p, const uint8_t* payload, uint32_t length) {
  return {DecodeFixed16(h + 4), DecodeFixed16(h + 6), p, p + RecordSpan(length), payload, length};
}

// Where a record's payload is read: in the log's own bytes where it lies in
// one stripe (valid while nothing appends: the open's walks), or always
// copied to scratch (a read while appends may wrap over it).
enum class Payload { kInPlace, kCopied };

// I1, for the record expected at p. On success fills `out`.
bool CheckRecord(const LogicalReader& r, const LogState& st, Lsn p, std::vector<uint8_t>& scratch,
                 LogRecordView* out, std::string* why, Payload where) {
  Lsn limit = st.checkpoint_lsn + st.geometry.capacity();
  if (p + kRecordHeaderSize > limit) {
    *why = "log is full up to here";
    return false;
  }
  uint8_t h[kRecordHeaderSize];
  r.Read(p, sizeof h, h);
  uint64_t lsn = DecodeFixed64(h + 16);
  if (lsn != p) {
    *why = lsn == 0 ? "no record (zeroed space)"
                    : StrFormat("record from another position or lap (its LSN field is %llu)",
                                static_cast<ull>(lsn));
    return false;
  }
  uint32_t length = DecodeFixed32(h + 8);
  uint64_t hint = DecodeFixed64(h + 24);
  if (DecodeFixed32(h + 12) != 0) {
    *why = "reserved header field is not zero";
    return false;
  }
  if (hint > p) {
    *why = StrFormat("durable hint %llu lies ahead of the record", static_cast<ull>(hint));
    return false;
  }
  if (RecordSpan(length) > limit - p) {
    *why = StrFormat("length %u runs past the end of the log", length);
    return false;
  }
  const uint8_t* payload;
  if (where == Payload::kInPlace) {
    payload = r.Span(p + kRecordHeaderSize, length, scratch);
  } else {
    scratch.resize(length);
    r.Read(p + kRecordHeaderSize, length, scratch.data());
    payload = scratch.data();
  }
  if (RecordCrc(st.salt, h, payload, length) != DecodeFixed32(h)) {
    *why = "checksum mismatch";
    return false;
  }
  *out = ViewOf(h, p, payload, length);
  return true;
}

// A record ScanLog found valid, read again (and copied) while appends may
// run: failing now means the bytes changed since the scan.
Status RecheckRecord(const LogicalReader& r, const LogState& st, Lsn p,
                     std::vector<uint8_t>& scratch, LogRecordView* out) {
  std::string why;
  if (!CheckRecord(r, st, p, scratch, out, &why, Payload::kCopied)) {
    return Status::Corruption(r.Where(p) + ": " + why + " (changed since the scan)");
  }
  return Status::OK();
}

// The record at p of the chain ScanLog has just checked, before anything is
// appended: its header is read again (the chain must still lead from the
// checkpoint to the end), not its checksum.
Status WalkRecord(const LogicalReader& r, const LogState& st, Lsn p, std::vector<uint8_t>& scratch,
                  LogRecordView* out) {
  uint8_t h[kRecordHeaderSize];
  r.Read(p, sizeof h, h);
  const uint32_t length = DecodeFixed32(h + 8);
  if (DecodeFixed64(h + 16) != p || RecordSpan(length) > st.end_lsn - p) {
    return Status::Corruption(r.Where(p) + ": record header changed since the scan");
  }
  *out = ViewOf(h, p, r.Span(p + kRecordHeaderSize, length, scratch), length);
  return Status::OK();
}

Status CheckStreams(const std::vector<StreamView>& streams, LogState* st) {
  if (streams.empty()) return Status::InvalidArgument("no log streams given");
  FileHeader first{};
  for (size_t i = 0; i < streams.size(); ++i) {
    Result<FileHeader> h = ReadFileHeader(streams[i]);
    if (!h.ok()) return h.status();
    const std::string& name = streams[i].name;
    if (i == 0) {
      first = *h;
      if (first.stream_count != streams.size()) {
        return Status::Corruption(StrFormat("%s: header says %u streams, found %zu files",
                                            name.c_str(), first.stream_count, streams.size()));
      }
    } else if (h->salt != first.salt || h->stream_count != first.stream_count ||
               h->data_size != first.data_size || h->stripe_size != first.stripe_size) {
      return Status::Corruption(name + ": header belongs to another log than " + streams[0].name);
    }
    if (h->stream_id != i) {
      return Status::Corruption(
          StrFormat("%s: header says stream %u, expected %zu", name.c_str(), h->stream_id, i));
    }
  }
  st->salt = first.salt;
  st->geometry.stream_count = first.stream_count;
  st->geometry.stripe_size = first.stripe_size;
  st->geometry.data_size = first.data_size;
  return Status::OK();
}

Status ReadCheckpoint(const StreamView& s0, LogState* st) {
  bool found = false;
  for (size_t off : kCheckpointSlotOffset) {
    CheckpointSlot slot{};
    std::memcpy(&slot, s0.data + off, sizeof slot);
    if (crc32c::Value(&slot, offsetof(CheckpointSlot, crc)) != slot.crc || slot.salt != st->salt) {
      continue;  // I5: torn or never written
    }
    if (found && slot.sequence <= st->checkpoint_sequence) continue;
    found = true;
    st->checkpoint_lsn = slot.checkpoint_lsn;
    st->checkpoint_sequence = slot.sequence;
    st->clean_shutdown = slot.clean_shutdown == 1;
    st->write_reach = slot.write_reach;
    st->end_lsn = slot.durable_lsn;  // evidence only, replaced by the scan
  }
  if (!found) {
    return Status::Corruption(s0.name + ": no valid checkpoint slot at offset 512 or 1024");
  }
  if (st->checkpoint_lsn < kFirstLsn || st->checkpoint_lsn % kRecordAlign != 0 ||
      st->end_lsn < st->checkpoint_lsn) {
    return Status::Corruption(StrFormat("%s: checkpoint slot holds impossible LSNs %llu/%llu",
                                        s0.name.c_str(), static_cast<ull>(st->checkpoint_lsn),
                                        static_cast<ull>(st->end_lsn)));
  }
  return Status::OK();
}

}  // namespace

uint32_t RecordCrc(uint64_t salt, const uint8_t* header, const uint8_t* payload, size_t n) {
  uint8_t s[8];
  EncodeFixed64(s, salt);
  uint32_t crc = crc32c::Value(s, sizeof s);
  crc = crc32c::Extend(crc, header + 4, kRecordHeaderSize - 4);
  return crc32c::Extend(crc, payload, n);
}

void SealFileHeader(FileHeader* h) {
  h->crc = crc32c::Value(h, offsetof(FileHeader, crc));
}

void SealCheckpointSlot(CheckpointSlot* slot) {
  slot->crc = crc32c::Value(slot, offsetof(CheckpointSlot, crc));
}

Result<FileHeader> ReadFileHeader(const StreamView& s) {
  if (s.size < kDataOffset) {
    return Status::Corruption(StrFormat("%s: truncated: %zu bytes, a log file has at least %zu",
                                        s.name.c_str(), s.size, kDataOffset));
  }
  FileHeader h{};
  std::memcpy(&h, s.data, sizeof h);
  if (std::memcmp(h.magic, kLogMagic, sizeof h.magic) != 0) {
    return Status::Corruption(s.name + " offset 0: not a Subito log file (bad magic)");
  }
  if (crc32c::Value(&h, offsetof(FileHeader, crc)) != h.crc) {
    return Status::Corruption(s.name + " offset 0: file header checksum mismatch");
  }
  if (h.format_version != kLogFormatVersion) {
    return Status::NotSupported(StrFormat("%s: log format version %u, this build reads %u",
                                          s.name.c_str(), h.format_version, kLogFormatVersion));
  }
  if (h.file_size != s.size) {
    return Status::Corruption(StrFormat("%s: file is %zu bytes, its header says %llu (truncated?)",
                                        s.name.c_str(), s.size, static_cast<ull>(h.file_size)));
  }
  // Only layouts this build writes are accepted: the writer's ring buffer
  // and stripe arithmetic rely on them.
  if (h.header_size != kFileHeaderSize || h.data_offset != kDataOffset ||
      h.stripe_size != kStripeSize || h.data_size == 0 || h.data_size % h.stripe_size != 0 ||
      h.data_offset + h.data_size != h.file_size || h.stream_count == 0 ||
      h.stream_count > kMaxStreams) {
    return Status::Corruption(s.name + " offset 0: file header holds an impossible layout");
  }
  return h;
}

Result<LogState> ScanLog(const std::vector<StreamView>& streams) {
  LogState st;
  SUBITO_RETURN_IF_ERROR(CheckStreams(streams, &st));
  SUBITO_RETURN_IF_ERROR(ReadCheckpoint(streams[0], &st));
  const Lsn slot_durable = st.end_lsn;
  LogicalReader reader(streams, st.geometry);
  std::vector<uint8_t> scratch;
  LogRecordView rec{};

  // I2: walk the chain.
  Lsn p = st.checkpoint_lsn;
  std::string why;
  while (CheckRecord(reader, st, p, scratch, &rec, &why, Payload::kInPlace)) {
    p = rec.end;
    ++st.records;
  }
  st.end_lsn = p;
  st.orphan_end = p;
  st.end_reason = why;

  // I3: evidence that p had been durable is damage.
  Lsn evidence = 0;
  Lsn witness = 0;
  if (slot_durable > p) evidence = slot_durable;
  // I7: past end + 3B nothing is looked at (the whole lap if B is unknown).
  Lsn limit = st.checkpoint_lsn + st.geometry.capacity();
  if (st.write_reach != 0 && st.write_reach < st.geometry.capacity()) {
    limit = std::min(limit, p + 3 * st.write_reach);
  }
  const uint64_t stripe = st.geometry.stripe_size;
  for (Lsn x = p + kRecordAlign; x + kRecordHeaderSize <= limit;) {
    // Most positions hold no record of this lap: their would-be lsn field
    // (16 bytes in) is not their LSN. Skip those in a tight loop over the
    // stripe's bytes, without a record check each (this loop covers up to
    // three log buffers, or the log's whole capacity, so its speed is the
    // clean open's).
    const uint64_t in = x % stripe;
    if (in + 24 <= stripe) {
      const uint8_t* base = reader.Piece(x);
      const uint64_t room = std::min<uint64_t>(stripe - in, limit - x);
      uint64_t off = 0;
      while (off + 24 <= room && DecodeFixed64(base + off + 16) != x + off) off += kRecordAlign;
      if (off + 24 > room && off != 0) {
        x += off;  // the stripe's last two positions: their lsn field is in the next
        continue;
      }
      x += off;
    }
    // A record's lsn field sits 16 bytes in; most of the time it is in the
    // same stripe and is read in place.
    uint8_t w[8];
    if (x % stripe + 24 <= stripe) {
      std::memcpy(w, reader.Piece(x) + 16, sizeof w);
    } else {
      reader.Read(x + 16, sizeof w, w);
    }
    std::string ignored;
    if (DecodeFixed64(w) != x ||
        !CheckRecord(reader, st, x, scratch, &rec, &ignored, Payload::kInPlace)) {
      x += kRecordAlign;
      continue;
    }
    uint8_t h[kRecordHeaderSize];
    reader.Read(x, sizeof h, h);
    uint64_t hint = DecodeFixed64(h + 24);
    if (hint > p && hint > evidence) {
      evidence = hint;
      witness = x;
    }
    st.orphan_end = std::max(st.orphan_end, rec.end);
    x = rec.end;
  }
  if (evidence > p) {
    std::string proof =
        witness != 0 ? StrFormat("the record at LSN %llu shows the log was durable up to LSN %llu",
                                 static_cast<ull>(witness), static_cast<ull>(evidence))
                     : StrFormat("the checkpoint slot shows the log was durable up to LSN %llu",
                                 static_cast<ull>(evidence));
    return Status::Corruption(reader.Where(p) + ": damaged record (" + why + "); " + proof +
                              ", so this is damage, not a torn tail");
  }
  return st;
}

Status ForEachRecord(const std::vector<StreamView>& streams, const LogState& state,
                     const std::function<Status(const LogRecordView&)>& fn) {
  LogicalReader reader(streams, state.geometry);
  std::vector<uint8_t> scratch;
  LogRecordView rec{};
  for (Lsn p = state.checkpoint_lsn; p < state.end_lsn; p = rec.end) {
    SUBITO_RETURN_IF_ERROR(WalkRecord(reader, state, p, scratch, &rec));
    SUBITO_RETURN_IF_ERROR(fn(rec));
  }
  return Status::OK();
}

Status ReadRecordAt(const std::vector<StreamView>& streams, const LogState& state, Lsn lsn,
                    std::vector<uint8_t>* scratch, LogRecordView* rec) {
  LogicalReader reader(streams, state.geometry);
  if (lsn < state.checkpoint_lsn || lsn >= state.end_lsn) {
    return Status::InvalidArgument(
        StrFormat("LSN %llu is outside the recovered log [%llu, %llu)", static_cast<ull>(lsn),
                  static_cast<ull>(state.checkpoint_lsn), static_cast<ull>(state.end_lsn)));
  }
  return RecheckRecord(reader, state, lsn, *scratch, rec);
}

}  // namespace subito::log
