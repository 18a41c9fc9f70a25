// Damaged log files: every bit flip in bytes the log relies on is refused with
// Corruption naming the file and the offset; flips in bytes it does not rely
// on change nothing; no damage ever yields a wrong record.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include "log/log_reader.h"
#include "log/redo_log.h"
#include "pmem/tracking_persistence.h"
#include "test_util.h"

namespace subito::log {
namespace {

struct Written {
  Lsn start, end;
  uint32_t length;
  std::vector<uint8_t> payload;
};

class Corruption : public ::testing::TestWithParam<uint32_t> {
 protected:
  // Writes a log of `count` committed records and returns the stream files'
  // bytes. If `clean`, the log was closed; otherwise the bytes are what a
  // kill -9 right after the last commit leaves.
  void Build(bool clean, int count = 300) {
    LogOptions o = Options();
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    geometry_ = (*log)->recovered().geometry;
    for (int i = 0; i < count; ++i) {
      uint32_t len = 1 + (static_cast<uint32_t>(i) * 53) % 300;
      auto p = test::Payload(static_cast<uint64_t>(i), len);
      auto r = (*log)->Commit(kRecordLogTest, p.data(), len);
      ASSERT_TRUE(r.ok());
      written_.push_back({r->start, r->end, len, p});
    }
    if (clean) {
      ASSERT_TRUE((*log)->Close().ok());
    }
    for (uint32_t s = 0; s < GetParam(); ++s) {
      original_.push_back(test::ReadFile(LogFiles::StreamPath(o.dir, s)));
    }
  }
  LogOptions Options() {
    LogOptions o = test::SmallLog(dir_.Sub("log"), LogWriteMode::kNf, GetParam());
    o.file_size = file_size_;
    return o;
  }
  // Restores every file into a copy directory, lets `damage` change each
  // stream's bytes, and opens the copy.
  Result<std::unique_ptr<RedoLog>> OpenDamagedAll(
      const std::function<void(uint32_t, std::vector<uint8_t>&)>& damage) {
    std::string dir = dir_.Sub("copy");
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (uint32_t i = 0; i < original_.size(); ++i) {
      auto bytes = original_[i];
      damage(i, bytes);
      test::WriteFile(LogFiles::StreamPath(dir, i), bytes);
    }
    LogOptions o = Options();
    o.dir = dir;
    return RedoLog::Open(o);
  }
  Result<std::unique_ptr<RedoLog>> OpenDamaged(
      uint32_t s, const std::function<void(std::vector<uint8_t>&)>& damage) {
    return OpenDamagedAll([&](uint32_t i, std::vector<uint8_t>& b) {
      if (i == s) damage(b);
    });
  }
  // The LSN stored at byte `offset` of stream s (first lap), or 0 if none.
  Lsn LsnAt(uint32_t s, uint64_t offset) const {
    if (offset < kDataOffset) return 0;
    uint64_t ring = offset - kDataOffset;
    uint64_t stripe = (ring / geometry_.stripe_size) * geometry_.stream_count + s;
    return stripe * geometry_.stripe_size + ring % geometry_.stripe_size;
  }
  const Written* RecordHolding(Lsn lsn) const {
    for (const Written& w : written_) {
      if (lsn >= w.start && lsn < w.end) return &w;
    }
    return nullptr;
  }
  void ExpectAllRecords(RedoLog& log, size_t count) {
    size_t i = 0;
    Status st = log.ForEachRecoveredRecord([&](const LogRecordView& r) {
      EXPECT_LT(i, written_.size());
      if (i >= written_.size()) return Status::Corruption("extra record");
      EXPECT_EQ(r.lsn, written_[i].start);
      EXPECT_EQ(std::vector<uint8_t>(r.payload, r.payload + r.length), written_[i].payload);
      ++i;
      return Status::OK();
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(i, count);
  }

  uint64_t file_size_ = 4096 + 128 * 1024;
  test::ScratchDir dir_;
  Geometry geometry_;
  std::vector<Written> written_;
  std::vector<std::vector<uint8_t>> original_;
};

TEST_P(Corruption, RandomBitFlipsAreRefusedOrHarmless) {
  Build(/*clean=*/true);
  std::mt19937_64 rng(test::TestSeed());
  const uint64_t file_size = original_[0].size();
  int refused = 0, harmless = 0;
  for (int trial = 0; trial < 300; ++trial) {
    uint32_t s = static_cast<uint32_t>(rng() % GetParam());
    // Half the flips aim at the live records, the rest anywhere.
    uint64_t off = rng() % file_size;
    if (trial % 2 == 0) {
      const Written& w = written_[rng() % written_.size()];
      Lsn lsn = w.start + rng() % (w.end - w.start);
      s = geometry_.StreamOf(lsn);
      off = geometry_.FileOffsetOf(lsn);
    }
    int bit = static_cast<int>(rng() % 8);
    SCOPED_TRACE(::testing::Message() << "stream " << s << " offset " << off << " bit " << bit);
    auto log =
        OpenDamaged(s, [&](std::vector<uint8_t>& b) { b[off] ^= static_cast<uint8_t>(1 << bit); });

    const Lsn lsn = LsnAt(s, off);
    const Written* rec = RecordHolding(lsn);
    const bool in_header = off < kFileHeaderSize;
    const bool covered = rec && lsn < rec->start + kRecordHeaderSize + rec->length;
    if (in_header || covered) {
      ASSERT_FALSE(log.ok()) << "damage accepted";
      EXPECT_TRUE(log.status().IsCorruption()) << log.status().ToString();
      std::string where =
          in_header ? LogFiles::StreamPath(dir_.Sub("copy"), s) + " offset 0"
                    : LogFiles::StreamPath(dir_.Sub("copy"), geometry_.StreamOf(rec->start)) +
                          ") offset " + std::to_string(geometry_.FileOffsetOf(rec->start));
      EXPECT_NE(log.status().message().find(where), std::string::npos)
          << log.status().ToString() << "\nexpected to name: " << where;
      ++refused;
    } else {
      // Checkpoint slots (the other one takes over), unused header bytes,
      // alignment padding, bytes past the end: nothing read depends on them.
      ASSERT_TRUE(log.ok()) << log.status().ToString();
      ExpectAllRecords(**log, written_.size());
      ++harmless;
    }
  }
  EXPECT_GT(refused, 100);
  EXPECT_GT(harmless, 10);
}

TEST_P(Corruption, DamageBeforeTheLastRecordIsCaughtAfterACrash) {
  Build(/*clean=*/false);
  // Every record but the last is vouched for by the durable hint of the
  // record after it (I3).
  for (size_t i = 0; i + 1 < written_.size(); i += 7) {
    Lsn lsn = written_[i].start + 20;
    auto log = OpenDamaged(geometry_.StreamOf(lsn), [&](std::vector<uint8_t>& b) {
      b[geometry_.FileOffsetOf(lsn)] ^= 0x10;
    });
    ASSERT_FALSE(log.ok()) << "record " << i;
    EXPECT_TRUE(log.status().IsCorruption());
    EXPECT_NE(log.status().message().find("not a torn tail"), std::string::npos);
  }
  // The last record's damage cannot be told from a torn write: it is dropped
  // as the torn tail, and every earlier record is intact.
  Lsn last = written_.back().start + 40;
  auto log = OpenDamaged(geometry_.StreamOf(last),
                         [&](std::vector<uint8_t>& b) { b[geometry_.FileOffsetOf(last)] ^= 0x01; });
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ((*log)->recovered().end_lsn, written_.back().start);
  ExpectAllRecords(**log, written_.size() - 1);
}

TEST_P(Corruption, ARefusedOpenWritesNothing) {
  Build(/*clean=*/false);
  Lsn lsn = written_[written_.size() / 2].start + 20;
  const uint32_t s = geometry_.StreamOf(lsn);
  auto log = OpenDamaged(s, [&](std::vector<uint8_t>& b) { b[geometry_.FileOffsetOf(lsn)] ^= 4; });
  ASSERT_FALSE(log.ok());
  std::vector<std::vector<uint8_t>> before;
  for (uint32_t i = 0; i < GetParam(); ++i) {
    before.push_back(test::ReadFile(LogFiles::StreamPath(dir_.Sub("copy"), i)));
  }
  // Open again on the same damaged files: refused the same way, and no byte
  // changed (no checkpoint slot, no zeroing) by either attempt.
  LogOptions o = Options();
  o.dir = dir_.Sub("copy");
  auto again = RedoLog::Open(o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().ToString(), log.status().ToString());
  for (uint32_t i = 0; i < GetParam(); ++i) {
    auto now = test::ReadFile(LogFiles::StreamPath(o.dir, i));
    auto expect = original_[i];
    if (i == s) expect[geometry_.FileOffsetOf(lsn)] ^= 4;
    EXPECT_EQ(now, before[i]) << "stream " << i;
    EXPECT_EQ(now, expect) << "stream " << i;
  }
}

TEST_P(Corruption, HeadersOfUnsupportedLayoutsAreRefused) {
  Build(/*clean=*/true);
  for (auto change : std::vector<std::function<void(FileHeader&)>>{
           [](FileHeader& h) { h.stripe_size = 8192; }, [](FileHeader& h) { h.stream_count = 64; },
           [](FileHeader& h) { h.data_size += 4096; },
           [](FileHeader& h) { h.format_version = 2; }}) {
    auto log = OpenDamaged(0, [&](std::vector<uint8_t>& b) {
      FileHeader h;
      std::memcpy(&h, b.data(), sizeof h);
      change(h);
      SealFileHeader(&h);  // a valid checksum: only the layout is wrong
      std::memcpy(b.data(), &h, sizeof h);
    });
    ASSERT_FALSE(log.ok());
    EXPECT_FALSE(log.status().ok());
    EXPECT_NE(log.status().message().find("log.0"), std::string::npos) << log.status().ToString();
  }
}

TEST_P(Corruption, TruncationIsRefused) {
  Build(/*clean=*/true);
  std::mt19937_64 rng(test::TestSeed());
  for (uint32_t s = 0; s < GetParam(); ++s) {
    for (uint64_t len : {uint64_t{0}, uint64_t{100}, uint64_t{4095},
                         kDataOffset + rng() % (original_[s].size() - kDataOffset)}) {
      auto log = OpenDamaged(s, [&](std::vector<uint8_t>& b) { b.resize(len); });
      ASSERT_FALSE(log.ok()) << "stream " << s << " truncated to " << len;
      EXPECT_TRUE(log.status().IsCorruption()) << log.status().ToString();
      EXPECT_NE(log.status().message().find("truncated"), std::string::npos)
          << log.status().ToString();
      EXPECT_NE(log.status().message().find("log." + std::to_string(s)), std::string::npos);
    }
  }
}

TEST_P(Corruption, BothCheckpointSlotsDamagedIsRefused) {
  Build(/*clean=*/true);
  auto log = OpenDamaged(0, [&](std::vector<uint8_t>& b) {
    b[kCheckpointSlotOffset[0] + 3] ^= 1;
    b[kCheckpointSlotOffset[1] + 3] ^= 1;
  });
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("no valid checkpoint slot"), std::string::npos);
}

TEST_P(Corruption, UnacknowledgedRecordsPastTheEndAreErased) {
  // A batch of appends made durable by one write; then the batch's first
  // record is lost (as if its lines never reached PM). Its successors carry
  // hints no newer than it, so they are unacknowledged orphans (I4).
  LogOptions o = Options();
  Lsn hole, batch_end;
  {
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->Commit(kRecordLogTest, "first", 5).ok());
    hole = (*log)->durable_lsn();
    for (int i = 0; i < 10; ++i) ASSERT_TRUE((*log)->Append(kRecordLogTest, "orphan!!", 8).ok());
    batch_end = (*log)->reserved_lsn();
    ASSERT_TRUE((*log)->WaitDurable(batch_end).ok());
  }
  for (uint32_t s = 0; s < GetParam(); ++s) {
    original_.push_back(test::ReadFile(LogFiles::StreamPath(o.dir, s)));
  }
  geometry_ = Geometry{GetParam(), kStripeSize, o.file_size - kDataOffset};
  // Lose the hole's record header, and the clean-shutdown slot that would
  // vouch for the batch, as a crash before Close would have.
  auto log = OpenDamagedAll([&](uint32_t s, std::vector<uint8_t>& b) {
    if (s == geometry_.StreamOf(hole)) {
      std::fill_n(b.begin() + static_cast<long>(geometry_.FileOffsetOf(hole)), 16, 0);
    }
    if (s == 0) std::fill_n(b.begin() + kCheckpointSlotOffset[0], kCheckpointSlotSize, 0);
  });
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ((*log)->recovered().end_lsn, hole);
  EXPECT_EQ((*log)->recovered().orphan_end, batch_end);
  EXPECT_EQ((*log)->recovered().records, 1u);
  // New records of other sizes now fill the space; the old orphans must not
  // rejoin the chain even where a new record ends exactly on an old start.
  ASSERT_TRUE((*log)->Commit(kRecordLogTest, "x", 1).ok());  // 40 bytes: ends on orphan #1
  ASSERT_TRUE((*log)->Close().ok());
  log.value().reset();
  LogOptions copy = Options();
  copy.dir = dir_.Sub("copy");
  auto again = RedoLog::Open(copy);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->recovered().records, 2u);
  EXPECT_EQ((*again)->recovered().end_lsn, hole + RecordSpan(1));
}

// I7: with a log far larger than three buffers (64 KiB here), damage early
// in a long crashed log is still told from a torn tail: an intact record a
// buffer or two past it vouches for it.
TEST_P(Corruption, DamageFarBeforeTheEndIsCaughtWithinTheReach) {
  file_size_ = 4096 + (1 << 20);
  Build(/*clean=*/false, 3000);
  ASSERT_GT(written_.back().end - written_.front().start, 8u * 64 * 1024);
  for (size_t i : {size_t{0}, size_t{100}, size_t{1500}, written_.size() - 2}) {
    const Lsn lsn = written_[i].start + 20;
    auto log = OpenDamaged(geometry_.StreamOf(lsn), [&](std::vector<uint8_t>& b) {
      b[geometry_.FileOffsetOf(lsn)] ^= 0x10;
    });
    ASSERT_FALSE(log.ok()) << "record " << i;
    EXPECT_NE(log.status().message().find("not a torn tail"), std::string::npos);
  }
}

// I7 with hints lagging: records appended without waiting carry hints up to
// a buffer behind them (the ring waits for durability only when full), so
// the record after the damaged one may not vouch for it; a later one in the
// window does. (A window of one buffer passes this too: the writer persists
// as it goes, so hints lag far less than a buffer here.)
TEST_P(Corruption, DamageIsCaughtWhenHintsLagByABuffer) {
  file_size_ = 4096 + (1 << 20);
  LogOptions o = Options();
  {
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok());
    geometry_ = (*log)->recovered().geometry;
    for (int i = 0; i < 3000; ++i) {
      const uint32_t len = 1 + (static_cast<uint32_t>(i) * 53) % 300;
      auto p = test::Payload(static_cast<uint64_t>(i), len);
      auto r = (*log)->Append(kRecordLogTest, p.data(), len);
      ASSERT_TRUE(r.ok());
      written_.push_back({r->start, r->end, len, p});
    }
    ASSERT_TRUE((*log)->WaitDurable(written_.back().end).ok());
  }  // destroyed without Close: what a kill -9 after the last write leaves
  for (uint32_t s = 0; s < GetParam(); ++s) {
    original_.push_back(test::ReadFile(LogFiles::StreamPath(o.dir, s)));
  }
  // The damaged record's next neighbours carry hints at or before it.
  size_t lagging = 0;
  for (size_t i : {size_t{10}, size_t{700}, size_t{1500}}) {
    const Lsn lsn = written_[i].start + 20;
    const std::vector<uint8_t>& b = original_[geometry_.StreamOf(written_[i + 1].start)];
    uint64_t hint = 0;
    const uint64_t at = geometry_.FileOffsetOf(written_[i + 1].start + 24);
    if (geometry_.ContiguousAt(written_[i + 1].start + 24) >= 8) {
      std::memcpy(&hint, b.data() + at, sizeof hint);
      lagging += hint <= written_[i].start;
    }
    auto log = OpenDamaged(geometry_.StreamOf(lsn), [&](std::vector<uint8_t>& d) {
      d[geometry_.FileOffsetOf(lsn)] ^= 0x10;
    });
    ASSERT_FALSE(log.ok()) << "record " << i;
    EXPECT_NE(log.status().message().find("not a torn tail"), std::string::npos);
  }
  EXPECT_GT(lagging, 0u) << "no hint lagged: the test does not reach past the next record";
}

// I7's limit, and old slots: damage wider than the reach (every byte from
// one record on, over more than three buffers) leaves no evidence inside
// the window, so it is taken for a torn tail; a slot without a reach (0, as
// builds before I7 wrote) makes the scan cover the whole lap, which finds
// the later records whose hints vouch for the damaged bytes.
TEST_P(Corruption, DamageWiderThanTheReachIsOnlySeenByAFullScan) {
  file_size_ = 4096 + (1 << 20);
  Build(/*clean=*/false, 3000);
  const Written& first = written_[100];
  const Lsn wiped_end = first.start + 3 * 64 * 1024 + 4096;
  ASSERT_LT(wiped_end + 64 * 1024, written_.back().start);
  auto wipe = [&](uint32_t s, std::vector<uint8_t>& b) {
    for (Lsn x = first.start; x < wiped_end; ++x) {
      if (geometry_.StreamOf(x) == s) b[geometry_.FileOffsetOf(x)] = 0;
    }
  };
  auto windowed = OpenDamagedAll(wipe);
  ASSERT_TRUE(windowed.ok()) << windowed.status().ToString();
  EXPECT_EQ((*windowed)->recovered().end_lsn, first.start);
  windowed.value().reset();
  auto full = OpenDamagedAll([&](uint32_t s, std::vector<uint8_t>& b) {
    wipe(s, b);
    if (s == 0) test::SetCheckpointReach(b, 0);
  });
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("not a torn tail"), std::string::npos);
}

// I7: a writer whose buffer differs from the recovered slot's names its own
// reach in a new slot before it appends; one with the same buffer writes
// no slot.
TEST_P(Corruption, AWriterNamesItsReachBeforeItsFirstAppend) {
  LogOptions o = Options();
  {
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok());
    EXPECT_EQ((*log)->recovered().write_reach, o.buffer_size);
    ASSERT_TRUE((*log)->Commit(kRecordLogTest, "a", 1).ok());
  }
  o.buffer_size *= 2;
  uint64_t sequence = 0;
  {
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok());
    EXPECT_EQ((*log)->recovered().write_reach, o.buffer_size / 2);
    sequence = (*log)->recovered().checkpoint_sequence;
  }  // closed: a clean slot, with this writer's reach
  {
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok());
    EXPECT_EQ((*log)->recovered().write_reach, o.buffer_size);
    EXPECT_EQ((*log)->recovered().checkpoint_sequence, sequence + 2);  // Start's slot, Close's
    sequence = (*log)->recovered().checkpoint_sequence;
  }
  auto log = RedoLog::Open(o);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ((*log)->recovered().checkpoint_sequence, sequence + 1);  // Close's only
}

INSTANTIATE_TEST_SUITE_P(Streams, Corruption, ::testing::Values(1u, 3u),
                         [](const auto& info) { return std::to_string(info.param) + "streams"; });

}  // namespace
}  // namespace subito::log

namespace subito::log {
namespace {

// I7's persist point: a writer with a smaller buffer than the crashed one
// erases the old reach's orphans (I4) before its slot names the new reach.
// After a power cut at every persist point of that open (and of appends
// after it), every orphan still valid-looking past the end lies inside the
// window the image's newest slot gives, so the next open erases it.
TEST(ReachCuts, EveryCutKeepsTheOldReachsOrphansInsideTheWindow) {
  test::ScratchDir dir;
  LogOptions o = test::SmallLog(dir.Sub("log"), LogWriteMode::kNf, 1);
  o.file_size = 4096 + (4 << 20);
  o.buffer_size = 1 << 20;
  Lsn hole = 0;
  std::vector<Lsn> orphans;
  {
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    ASSERT_TRUE((*log)->Commit(kRecordLogTest, "first", 5).ok());
    hole = (*log)->durable_lsn();
    for (int i = 0; i < 3000; ++i) {
      auto r = (*log)->Append(kRecordLogTest, std::string(200, 'o').data(), 200);
      ASSERT_TRUE(r.ok());
      orphans.push_back(r->start);
    }
    ASSERT_TRUE((*log)->WaitDurable((*log)->reserved_lsn()).ok());
  }
  ASSERT_GT(orphans.back() - hole, 3u * 64 * 1024) << "orphans must reach past the new window";
  // The crash: the hole's record lost, and the clean-shutdown slot with it.
  std::vector<uint8_t> bytes = test::ReadFile(LogFiles::StreamPath(o.dir, 0));
  const Geometry g{1, kStripeSize, o.file_size - kDataOffset};
  std::fill_n(bytes.begin() + static_cast<long>(g.FileOffsetOf(hole)), 16, 0);
  std::fill_n(bytes.begin() + kCheckpointSlotOffset[0], kCheckpointSlotSize, 0);
  LogOptions again = o;
  again.dir = dir.Sub("again");
  std::filesystem::create_directories(again.dir);
  test::WriteFile(LogFiles::StreamPath(again.dir, 0), bytes);
  again.buffer_size = 64 * 1024;
  pmem::TrackingPersistence tracker;
  again.persistence = &tracker;
  {
    auto log = RedoLog::Open(again);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ((*log)->recovered().end_lsn, hole);
    for (int i = 0; i < 20; ++i) ASSERT_TRUE((*log)->Commit(kRecordLogTest, "new", 3).ok());
    tracker.Freeze();
  }
  const std::string name = LogFiles::StreamPath(again.dir, 0);
  size_t points = 0, narrowed = 0;
  tracker.ForEachPersistPoint([&](size_t k, const pmem::TrackingPersistence::Image& image) {
    ++points;
    SCOPED_TRACE(::testing::Message() << "cut after event " << k);
    const std::vector<uint8_t>& b = image.at(name);
    auto st = ScanLog({{name, b.data(), b.size()}});
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    narrowed += st->write_reach == again.buffer_size;
    for (Lsn x : orphans) {
      if (x < st->end_lsn) continue;
      uint64_t lsn_field = 0;
      std::memcpy(&lsn_field, b.data() + g.FileOffsetOf(x + 16), sizeof lsn_field);
      if (lsn_field != x) continue;  // erased
      ASSERT_TRUE(st->write_reach == 0 || x < st->end_lsn + 3 * st->write_reach)
          << "orphan at " << x << " lies past the window of reach " << st->write_reach;
    }
  });
  EXPECT_GT(points, 10u);
  EXPECT_GT(narrowed, 0u) << "no cut came after the new reach's slot";
}

}  // namespace
}  // namespace subito::log
