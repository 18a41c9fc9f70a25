// Recovery reader: validates a log given as byte images of its stream files
// and finds its durable end (format.h, invariants I1-I5). ScanLog and
// ReadRecordAt never trust the bytes: every length and offset is
// bounds-checked, every checksum checked, and damage is reported as
// Corruption naming the file and the offset. ForEachRecord trusts the
// checksums ScanLog has just checked (see there).
//
// Pure over memory, so tests hand it crash images directly; RedoLog::Open
// hands it the mapped files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "log/format.h"
#include "log/geometry.h"
#include "subito/status.h"

namespace subito::log {

struct StreamView {
  std::string name;  // file path, for messages
  const uint8_t* data;
  size_t size;
};

struct LogRecordView {
  uint16_t type;
  uint16_t flags;
  Lsn lsn;  // start
  Lsn end;  // start of the next record
  const uint8_t* payload;
  uint32_t length;
};

struct LogState {
  Geometry geometry;
  uint64_t salt = 0;
  Lsn checkpoint_lsn = 0;
  uint64_t checkpoint_sequence = 0;
  bool clean_shutdown = false;
  uint64_t write_reach = 0;  // the newest slot's (format.h I7); 0: unknown
  Lsn end_lsn = 0;           // first byte past the last valid record: the durable end
  Lsn orphan_end = 0;        // valid-looking unacknowledged records end here (I4)
  uint64_t records = 0;
  std::string end_reason;  // why the chain stopped at end_lsn
};

// Checks headers and checkpoint slots, walks the record chain from the
// checkpoint, and tells a torn tail from damage (I3).
Result<LogState> ScanLog(const std::vector<StreamView>& streams);

// Calls fn for each record in [state.checkpoint_lsn, state.end_lsn), in LSN
// order; stops at the first non-OK status fn returns. `state` must come from
// ScanLog over the same bytes, whose checksums it checked: the walk reads
// each header again (the chain must hold) but not the checksums. A record's
// payload may point into the log's bytes; it is valid during fn, and only
// while no append can wrap over those records (the checkpoint held).
Status ForEachRecord(const std::vector<StreamView>& streams, const LogState& state,
                     const std::function<Status(const LogRecordView&)>& fn);

// Reads the record that starts at `lsn`, which must lie in [state.checkpoint_lsn,
// state.end_lsn) and start a record of the chain ScanLog walked; the payload
// is copied into `scratch`. For reads of single records after the scan
// (lazy redo: buffer/pending_redo.h).
Status ReadRecordAt(const std::vector<StreamView>& streams, const LogState& state, Lsn lsn,
                    std::vector<uint8_t>* scratch, LogRecordView* rec);

// File header and checkpoint slot codecs, shared with the writer.
void SealFileHeader(FileHeader* h);
void SealCheckpointSlot(CheckpointSlot* slot);
Result<FileHeader> ReadFileHeader(const StreamView& stream);

// crc of a record: salt || header bytes [4, 32) || payload.
uint32_t RecordCrc(uint64_t salt, const uint8_t* header, const uint8_t* payload, size_t n);

}  // namespace subito::log
