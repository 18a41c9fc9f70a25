// The redo log's on-media format. docs/formats/redo-log.md explains it with
// examples; this header is the authority for the numbers.
//
// A log is `stream_count` files (log.0 ... log.N-1), one per stream, all of
// one size. Each file:
//
//   offset 0     FileHeader (128 B), written once at creation
//   offset 512   checkpoint slot 0 (64 B)   -- stream 0 only
//   offset 1024  checkpoint slot 1 (64 B)   -- stream 0 only
//   offset 4096  data ring of `data_size` bytes (a multiple of stripe_size)
//
// The log is one logical byte sequence addressed by LSN (log sequence number:
// a byte position, starting at kFirstLsn, never reused). It is cut into
// stripes of `stripe_size` bytes; stripe k lives in stream k % N, at ring
// position ((k / N) * stripe_size) mod data_size. LSN x and x + capacity
// (capacity = N * data_size) share a place: that is the lap.
//
// Records are 8-byte aligned, packed back to back, and may cross stripes and
// the ring's end:
//
//   +0  u32 crc32c  over salt (8 B, LE) || bytes [4, 32) || payload
//   +4  u16 type    (see RecordType)
//   +6  u16 flags   (0; reserved)
//   +8  u32 length  payload bytes
//   +12 u32 zero    (reserved, must be 0)
//   +16 u64 lsn     this record's own LSN
//   +24 u64 durable_hint  the durable LSN when the record was appended
//   +32 payload, then zero bytes up to the next multiple of 8
//
// Validity rule (numbered invariants, referred to by tests and docs):
//  I1. A record at expected position p is valid iff its lsn field == p, its
//      reserved field is 0, durable_hint <= p, it fits inside the checkpoint's
//      lap, and its crc matches. Bytes from an earlier lap carry an older lsn;
//      bytes from an earlier log at the same path carry another salt.
//  I2. The log is the chain of valid records from the checkpoint LSN; the
//      first invalid record ends it (a torn tail after power loss).
//  I3. All bytes below any valid record's durable_hint, and below the
//      checkpoint slot's durable_lsn, were durable. So an invalid record at p
//      followed anywhere by a valid record with durable_hint > p is damage,
//      not a torn tail: recovery refuses it. (While a backup copies the
//      log, hints are capped at the durable LSN of its start:
//      RedoLog::BeginBackupCopy.)
//  I4. After recovery, valid-looking records past the end (written but never
//      acknowledged before the crash) are zeroed and persisted before any new
//      record is written, so they cannot rejoin the chain later.
//  I5. A checkpoint slot is valid iff its crc and salt match; the valid slot
//      with the highest sequence wins, so a torn slot write leaves the other.
//  I7. (reach) An append waits until its end is at most B past the durable
//      LSN D it reads, and its durable_hint is read after (>= D), where B
//      is the writer's buffer size; the newest slot names B (write_reach)
//      before that writer appends. So after a crash every record of this
//      lap ends at most B past the crash's durable LSN, and every record
//      starting at s has durable_hint > s - B. Recovery looks for orphans
//      (I4) and damage evidence (I3) only in [end, end + 3B): a torn tail
//      has no record past end + B; damage at end with the log durable past
//      end + 2B leaves an intact record starting in [end + B, end + 2B)
//      whose hint passes end (unless the damage spans it too). A slot
//      naming no reach (0) has recovery look over the whole lap: slots
//      written while a backup copies the log say so, since the copy's
//      streams are read at different moments (RedoLog::BeginBackupCopy).
#pragma once

#include <cstddef>
#include <cstdint>

namespace subito::log {

using Lsn = uint64_t;

inline constexpr char kLogMagic[8] = {'S', 'U', 'B', 'I', 'T', 'O', 'L', 'G'};
inline constexpr uint32_t kLogFormatVersion = 1;
inline constexpr Lsn kFirstLsn = 4096;

inline constexpr size_t kFileHeaderOffset = 0;
inline constexpr size_t kFileHeaderSize = 128;
inline constexpr size_t kCheckpointSlotOffset[2] = {512, 1024};
inline constexpr size_t kCheckpointSlotSize = 64;
inline constexpr size_t kDataOffset = 4096;
inline constexpr size_t kRecordHeaderSize = 32;
inline constexpr size_t kRecordAlign = 8;
inline constexpr uint32_t kStripeSize = 4096;
inline constexpr uint32_t kMaxStreams = 16;

// Record type space. Types with the top bit set are "ignorable": a reader
// that does not know one may skip it; any other unknown type is an error.
enum RecordType : uint16_t {
  kRecordInvalid = 0,  // never written; zeroed memory reads as this
  // 0x0001-0x00ff: the log layer itself.
  kRecordLogTest = 0x0001,  // opaque payload (tests, benchmarks)
  kRecordCommit = 0x0002,   // opaque commit marker (benchmarks until txn/ exists)
  // Reserved ranges for later layers.
  kRecordPageFirst = 0x0100,  // page/ + buffer/ (page images, page redo)
  kRecordPageLast = 0x0fff,
  kRecordPplFirst = 0x1000,  // ppl/ (per-page logs)
  kRecordPplLast = 0x1fff,
  kRecordBtreeFirst = 0x2000,  // btree/
  kRecordBtreeLast = 0x2fff,
  kRecordTxnFirst = 0x3000,  // txn/ (begin, commit, abort, undo)
  kRecordTxnLast = 0x3fff,
  // 0x4000-0x7fff reserved. 0x8000-0xffff: ignorable.
  kRecordIgnorableBit = 0x8000,
};

struct FileHeader {
  char magic[8];
  uint32_t format_version;
  uint32_t header_size;  // kFileHeaderSize
  uint64_t salt;         // random, the same in every stream of one log
  uint32_t stream_id;
  uint32_t stream_count;
  uint64_t file_size;
  uint64_t data_offset;  // kDataOffset
  uint64_t data_size;    // ring bytes in this file; multiple of stripe_size
  uint32_t stripe_size;
  uint32_t write_ahead_size;  // at creation (informational)
  uint64_t created_unix_time;
  uint8_t reserved[52];
  uint32_t crc;  // crc32c of bytes [0, 124)
};
static_assert(sizeof(FileHeader) == kFileHeaderSize);
static_assert(offsetof(FileHeader, salt) == 16);
static_assert(offsetof(FileHeader, data_size) == 48);
static_assert(offsetof(FileHeader, crc) == kFileHeaderSize - 4);

struct CheckpointSlot {
  uint64_t checkpoint_lsn;  // recovery starts here
  uint64_t durable_lsn;     // durable end when written (I3 evidence)
  uint64_t sequence;        // highest valid wins; slot index = sequence % 2
  uint64_t salt;            // must equal the file header's
  uint32_t clean_shutdown;  // 1 if written by Close() after the last record
  uint32_t reserved0;
  // The writer's log buffer size (I7): no record it appends ends more than
  // this past the durable LSN it has seen. 0 (builds before it): unknown.
  uint64_t write_reach;
  uint8_t reserved[12];
  uint32_t crc;  // crc32c of bytes [0, 60)
};
static_assert(sizeof(CheckpointSlot) == kCheckpointSlotSize);
static_assert(offsetof(CheckpointSlot, write_reach) == 40);
static_assert(offsetof(CheckpointSlot, crc) == kCheckpointSlotSize - 4);

// Total bytes a record with `payload` bytes occupies in the log.
constexpr uint64_t RecordSpan(uint64_t payload) {
  return (kRecordHeaderSize + payload + kRecordAlign - 1) / kRecordAlign * kRecordAlign;
}

}  // namespace subito::log
