// The per-page log region (src/ppl/ppl_region.h): entries read back in
// order across a reopen; a full block or region refuses an append (the
// caller writes the page instead); a power cut at every persist point leaves
// exactly the operations that returned, plus possibly the one in flight
// (G1-G4), never another owner's bytes (G5); a flipped byte in an owned
// block's header is refused by the open, and one in a committed entry when
// the page's entries are read or appended to, before any is handed out,
// each with the file and offset; only an empty region takes a new size.
#include "ppl/ppl_region.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine_util.h"
#include "pmem/tracking_persistence.h"
#include "test_util.h"
#include "util/coding.h"
#include "util/crc32c.h"

namespace subito::ppl {
namespace {

using Entries = std::vector<std::pair<uint64_t, std::string>>;
using State = std::map<std::pair<uint32_t, uint32_t>, Entries>;

State ReadState(const PplRegion& r) {
  State s;
  for (const auto& [key, found] : r.Pages()) {
    Entries& e = s[{key.space, key.page_no}];
    EXPECT_OK(r.ForEachEntry(key.space, key.page_no, [&](uint64_t lsn, const uint8_t* p, size_t n) {
      e.emplace_back(lsn, std::string(reinterpret_cast<const char*>(p), n));
      return Status::OK();
    }));
    size_t bytes = 0;
    for (const auto& x : e) bytes += PplRegion::EntrySizeOf(x.second.size());
    // After the read: which may have committed bytes the open kept (G2),
    // or dropped them.
    EXPECT_EQ(bytes, r.Used(key.space, key.page_no));
    EXPECT_GE(found, bytes);
  }
  return s;
}

std::string Edits(uint64_t seed, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (seed * 7 + i) % 26);
  return s;
}

Status Append(PplRegion& r, uint32_t space, uint32_t page, uint64_t lsn, const std::string& e) {
  return r.Append(space, page, lsn, reinterpret_cast<const uint8_t*>(e.data()), e.size());
}

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::remove(path);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A region of four 256-byte blocks: page 1:1 with two entries of 30 edit
// bytes (LSNs 10, 11) in block 0, page 1:2 with one (LSN 12) in block 1.
// Returns the file's bytes.
std::vector<uint8_t> ThreeEntries(const PplOptions& o) {
  {
    auto r = PplRegion::Open(o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {};
    EXPECT_OK(Append(**r, 1, 1, 10, Edits(1, 30)));
    EXPECT_OK(Append(**r, 1, 1, 11, Edits(2, 30)));
    EXPECT_OK(Append(**r, 1, 2, 12, Edits(3, 30)));
  }
  return ReadFile(o.path);
}

TEST(PplRegion, EntriesReadBackInOrderAcrossAReopen) {
  test::ScratchDir dir;
  PplOptions o{dir.Sub("ppl"), 4096 + 16 * 512, 512, 42, nullptr};
  State want;
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->block_capacity(), 448u);
    for (uint64_t lsn = 10; lsn < 40; ++lsn) {
      const uint32_t page = static_cast<uint32_t>(lsn % 3);
      const std::string e = Edits(lsn, 4 + lsn % 9);
      ASSERT_OK(Append(**r, 7, page, lsn, e));
      want[{7, page}].emplace_back(lsn, e);
    }
    EXPECT_EQ(ReadState(**r), want);
    EXPECT_EQ((*r)->stats().appends, 30u);
    EXPECT_EQ((*r)->stats().blocks_used, 3u);
  }
  auto r = PplRegion::Open(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadState(**r), want);
  // An earlier LSN than the page's last entry is a caller's error.
  EXPECT_TRUE(Append(**r, 7, 0, 5, "x").IsInvalidArgument());
  // Another database's region is refused.
  o.salt = 43;
  r.value().reset();
  auto other = PplRegion::Open(o);
  EXPECT_TRUE(other.status().IsInvalidArgument()) << other.status().ToString();
}

TEST(PplRegion, AFullBlockOrRegionRefusesAndAFreedBlockServesAnotherPage) {
  test::ScratchDir dir;
  PplOptions o{dir.Sub("ppl"), 4096 + 2 * 128, 128, 0, nullptr};
  auto r = PplRegion::Open(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_OK(Append(**r, 1, 1, 1, Edits(1, 20)));                // 36 of 64 bytes
  EXPECT_TRUE(Append(**r, 1, 1, 2, Edits(2, 20)).IsNoSpace());  // 72 > 64
  ASSERT_OK(Append(**r, 1, 1, 2, Edits(2, 12)));                // 64 of 64
  ASSERT_OK(Append(**r, 1, 2, 3, Edits(3, 5)));
  EXPECT_TRUE(Append(**r, 1, 3, 4, Edits(4, 5)).IsNoSpace());  // no free block
  EXPECT_EQ((*r)->stats().full, 2u);
  (*r)->Free(1, 1);
  EXPECT_EQ((*r)->Used(1, 1), 0u);
  ASSERT_OK(Append(**r, 1, 3, 4, Edits(4, 5)));  // takes page 1's block
  (*r)->FreeSpace(1);
  EXPECT_TRUE((*r)->Pages().empty());
  r.value().reset();
  r = PplRegion::Open(o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)->Pages().empty());
}

// Every persist point of a scripted run (appends to new and old blocks, a
// full block, frees, a freed block taken by another page): the region a
// power cut leaves opens, and holds the state after the operations that had
// returned, or that plus the one in flight.
TEST(PplRegion, PowerCutsLeaveWhatReturnedPlusAtMostTheOperationInFlight) {
  test::ScratchDir dir;
  pmem::TrackingPersistence tp;
  PplOptions o{dir.Sub("ppl"), 4096 + 6 * 256, 256, 0, &tp};
  auto r = PplRegion::Open(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  struct Step {
    size_t events_at_return;
    State after;
  };
  std::vector<Step> steps{{tp.EventCount(), {}}};
  State model;
  std::mt19937_64 rng(test::TestSeed());
  uint64_t lsn = 100;
  size_t persisting_ops = 0;  // each has at least one persist point
  for (int op = 0; op < 200; ++op) {
    const uint32_t page = static_cast<uint32_t>(rng() % 8);  // more pages than blocks
    if (rng() % 4 == 0) {
      if ((*r)->Free(3, page)) ++persisting_ops;
      model.erase({3, page});
    } else {
      const std::string e = Edits(lsn, 1 + rng() % 40);
      Status st = Append(**r, 3, page, ++lsn, e);
      if (st.ok()) {
        ++persisting_ops;
        model[{3, page}].emplace_back(lsn, e);
      } else {
        ASSERT_TRUE(st.IsNoSpace()) << st.ToString();
      }
    }
    steps.push_back({tp.EventCount(), model});
  }
  ASSERT_EQ(ReadState(**r), model);
  tp.Freeze();
  size_t checked = 0;
  const std::string crash = dir.Sub("crash");
  tp.ForEachPersistPoint(
      [&](size_t k, const pmem::TrackingPersistence::Image& image) {
        // The last step that had returned by event k, and the next one.
        size_t done = 0;
        while (done + 1 < steps.size() && steps[done + 1].events_at_return <= k) ++done;
        WriteFile(crash, image.at(o.path));
        PplOptions co = o;
        co.path = crash;
        co.persistence = nullptr;
        auto c = PplRegion::Open(co);
        ASSERT_TRUE(c.ok()) << "cut at event " << k << ": " << c.status().ToString();
        const State got = ReadState(**c);
        const bool as_returned = got == steps[done].after;
        const bool with_next = done + 1 < steps.size() && got == steps[done + 1].after;
        ASSERT_TRUE(as_returned || with_next) << "cut at event " << k << " after step " << done;
        ++checked;
      },
      &rng);
  EXPECT_GE(checked, persisting_ops);
  EXPECT_GT(persisting_ops, 100u);
  EXPECT_GT((*r)->stats().frees, 10u);
  EXPECT_GT((*r)->stats().full, 0u);
}

// G5: a block taken by a new page after a reopen gets a generation no
// earlier owner had, so the earlier owner's later entries, still in the
// block's bytes and lined up right after the new owner's first entry (with
// an LSN that would follow it), never pass for the new owner's.
TEST(PplRegion, AReusedBlockNeverShowsItsEarlierOwnersEntries) {
  test::ScratchDir dir;
  PplOptions o{dir.Sub("ppl"), 4096 + 256, 256, 0, nullptr};  // one block
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok());
    ASSERT_OK(Append(**r, 1, 1, 100, Edits(1, 20)));
    ASSERT_OK(Append(**r, 1, 1, 200, Edits(2, 20)));
    (*r)->Free(1, 1);
  }
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok());
    ASSERT_OK(Append(**r, 1, 2, 150, Edits(3, 20)));  // same size: page 1's second entry follows
  }
  auto r = PplRegion::Open(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const State got = ReadState(**r);
  EXPECT_EQ(got, (State{{{1, 2}, {{150, Edits(3, 20)}}}}));
}

// G5 across a power cut: the generation floor must be durable, not only
// stored, or a start after the cut may hand the freed block's earlier
// generation to its next owner, whose crcs the earlier owner's stale
// entries would then pass.
TEST(PplRegion, AfterAPowerCutAReusedBlockStillNeverShowsItsEarlierOwnersEntries) {
  test::ScratchDir dir;
  pmem::TrackingPersistence tp;
  PplOptions o{dir.Sub("ppl"), 4096 + 256, 256, 0, &tp};  // one block
  const std::string crash = dir.Sub("crash");
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok());
    ASSERT_OK(Append(**r, 1, 1, 100, Edits(1, 20)));
    ASSERT_OK(Append(**r, 1, 1, 200, Edits(2, 20)));
    ASSERT_TRUE((*r)->Free(1, 1));
    tp.Freeze();
    WriteFile(crash, tp.ImageAt(tp.EventCount()).at(o.path));
  }
  PplOptions co = o;
  co.path = crash;
  co.persistence = nullptr;
  {
    auto r = PplRegion::Open(co);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_OK(Append(**r, 1, 2, 150, Edits(3, 20)));  // page 1's second entry follows
  }
  auto r = PplRegion::Open(co);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadState(**r), (State{{{1, 2}, {{150, Edits(3, 20)}}}}));
}

TEST(PplRegion, AFlippedByteIsRefusedWithTheFileAndOffset) {
  test::ScratchDir dir;
  PplOptions o{dir.Sub("ppl"), 4096 + 4 * 256, 256, 0, nullptr};
  const std::vector<uint8_t> good = ThreeEntries(o);
  ASSERT_FALSE(HasFailure());
  auto names_file_and_offset = [&](const Status& st) {
    EXPECT_NE(st.ToString().find(o.path), std::string::npos) << st.ToString();
    EXPECT_NE(st.ToString().find("offset"), std::string::npos) << st.ToString();
  };
  // Refused by the open: block 0's header, block 1's header, the region
  // header.
  for (size_t off : {4096 + 9, 4096 + 256 + 60, 5}) {
    std::vector<uint8_t> bad = good;
    bad[off] ^= 0x10;
    WriteFile(o.path, bad);
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.status().IsCorruption()) << off << ": " << r.status().ToString();
    names_file_and_offset(r.status());
  }
  // Refused when the page's entries are read (and when one is appended),
  // and none of them handed out: an edit byte of block 0's second entry, of
  // block 1's entry, the crc of block 0's first entry, the length of block
  // 0's second entry, the LSN of its first, the length of block 1's entry
  // (each caught by the crc; the next test keeps the crc right). The error
  // names the entry's offset; the other page's entries still read.
  struct Flip {
    size_t off;
    uint32_t page;
    size_t entry;
  };
  for (const Flip& f :
       {Flip{4096 + 64 + 46 + 20, 1, 4096 + 64 + 46},
        Flip{4096 + 256 + 64 + 16 + 3, 2, 4096 + 256 + 64}, Flip{4096 + 64 + 1, 1, 4096 + 64},
        Flip{4096 + 64 + 46 + 4, 1, 4096 + 64 + 46}, Flip{4096 + 64 + 8, 1, 4096 + 64},
        Flip{4096 + 256 + 64 + 4, 2, 4096 + 256 + 64}}) {
    const size_t off = f.off;
    const uint32_t page = f.page;
    std::vector<uint8_t> bad = good;
    bad[off] ^= 0x10;
    WriteFile(o.path, bad);
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << off << ": " << r.status().ToString();
    int handed_out = 0;
    const Status st = (*r)->ForEachEntry(1, page, [&](uint64_t, const uint8_t*, size_t) {
      ++handed_out;
      return Status::OK();
    });
    ASSERT_TRUE(st.IsCorruption()) << off << ": " << st.ToString();
    EXPECT_NE(st.ToString().find("offset " + std::to_string(f.entry) + ":"), std::string::npos)
        << st.ToString();
    names_file_and_offset(st);
    EXPECT_EQ(handed_out, 0) << off;
    const Status append = Append(**r, 1, page, 100, Edits(9, 10));
    EXPECT_TRUE(append.IsCorruption()) << off << ": " << append.ToString();
    int other = 0;
    EXPECT_OK((*r)->ForEachEntry(1, 3 - page, [&](uint64_t, const uint8_t*, size_t) {
      ++other;
      return Status::OK();
    }));
    EXPECT_EQ(other, page == 1 ? 1 : 2) << off;
  }
  // Bytes of a free block are never read: a flip there is harmless.
  std::vector<uint8_t> free_flip = good;
  free_flip[4096 + 3 * 256 + 100] ^= 0x10;
  WriteFile(o.path, free_flip);
  auto r = PplRegion::Open(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Used(1, 1), 2 * PplRegion::EntrySizeOf(30));
}

// An entry written in place at `off` of the image, with its crc made right
// for the block's generation (as a buggy writer or a replayed old entry
// would leave it): the checks other than the crc are what refuse it.
void PutEntry(std::vector<uint8_t>* image, size_t block, size_t off, uint64_t lsn,
              const std::string& edits) {
  uint8_t* e = image->data() + off;
  EncodeFixed16(e + 4, static_cast<uint16_t>(edits.size()));
  EncodeFixed16(e + 6, 0);
  EncodeFixed64(e + 8, lsn);
  std::memcpy(e + 16, edits.data(), edits.size());
  uint8_t g[8];
  std::memcpy(g, image->data() + block + 16, 8);  // the block's generation
  EncodeFixed32(e, crc32c::Extend(crc32c::Value(g, 8), e + 4, 12 + edits.size()));
}

// Each check of an entry on its own, with the crc right: the order of LSNs,
// the length against the bytes in use, and `used` itself (outside the
// header's crc) cut inside an entry. Complete entries past `used` (G2) are
// kept by the first read only if their LSNs follow, without a write (the
// next append raises `used` over them); an append to a block no read has
// checked yet checks it first.
TEST(PplRegion, EntriesAreRefusedForOrderOrLengthAndKeptPastUsedOnlyInOrder) {
  test::ScratchDir dir;
  PplOptions o{dir.Sub("ppl"), 4096 + 4 * 256, 256, 0, nullptr};
  const std::vector<uint8_t> good = ThreeEntries(o);
  ASSERT_FALSE(HasFailure());
  const size_t b0 = 4096, second = b0 + 64 + 46;
  auto refused_at = [&](const std::vector<uint8_t>& image, size_t entry) {
    WriteFile(o.path, image);
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Status st = (*r)->ForEachEntry(1, 1, [](uint64_t, const uint8_t*, size_t) {
      ADD_FAILURE() << "an entry was handed out";
      return Status::OK();
    });
    ASSERT_TRUE(st.IsCorruption()) << st.ToString();
    EXPECT_NE(st.ToString().find("offset " + std::to_string(entry) + ":"), std::string::npos)
        << st.ToString();
  };
  {
    SCOPED_TRACE("the second entry's LSN below the first's");
    std::vector<uint8_t> bad = good;
    PutEntry(&bad, b0, second, 9, Edits(2, 30));
    refused_at(bad, second);
  }
  {
    SCOPED_TRACE("the second entry's length past the bytes in use");
    std::vector<uint8_t> bad = good;
    PutEntry(&bad, b0, second, 11, Edits(2, 31));
    refused_at(bad, second);
  }
  {
    SCOPED_TRACE("used cut inside the second entry");
    std::vector<uint8_t> bad = good;
    EncodeFixed32(bad.data() + b0 + 56, 46 + 20);
    refused_at(bad, second);
  }
  const size_t third = second + 46;
  {
    SCOPED_TRACE("a complete entry past used whose LSN does not follow: ignored");
    std::vector<uint8_t> image = good;
    PutEntry(&image, b0, third, 11, Edits(4, 30));
    WriteFile(o.path, image);
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ((*r)->Used(1, 1), 3 * PplRegion::EntrySizeOf(30)) << "found, not yet checked";
    EXPECT_EQ(ReadState(**r)[std::make_pair(1u, 1u)].size(), 2u);
    EXPECT_EQ((*r)->Used(1, 1), 2 * PplRegion::EntrySizeOf(30));
  }
  const uint32_t two = 2 * PplRegion::EntrySizeOf(30);
  auto used_field = [&] { return DecodeFixed32(ReadFile(o.path).data() + b0 + 56); };
  EXPECT_EQ(used_field(), two);
  {
    SCOPED_TRACE("a complete entry past used that follows: kept from the first read on");
    std::vector<uint8_t> image = good;
    PutEntry(&image, b0, third, 13, Edits(4, 30));
    WriteFile(o.path, image);
    for (int open = 0; open < 2; ++open) {  // the first open reads nothing
      auto r = PplRegion::Open(o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ((*r)->Used(1, 1), 3 * PplRegion::EntrySizeOf(30));
      if (open == 1) {
        EXPECT_EQ(ReadState(**r)[std::make_pair(1u, 1u)].size(), 3u);
      }
    }
    EXPECT_EQ(used_field(), two) << "a read writes nothing";
    {
      auto r = PplRegion::Open(o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_TRUE(Append(**r, 1, 1, 13, Edits(5, 10)).IsInvalidArgument()) << "after the kept one";
      ASSERT_OK(Append(**r, 1, 1, 14, Edits(5, 10)));
    }
    EXPECT_EQ(used_field(), 3 * PplRegion::EntrySizeOf(30) + PplRegion::EntrySizeOf(10));
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Entries e = ReadState(**r)[std::make_pair(1u, 1u)];
    ASSERT_EQ(e.size(), 4u);
    EXPECT_EQ(e[2], std::make_pair(uint64_t{13}, Edits(4, 30)));
    EXPECT_EQ(e[3], std::make_pair(uint64_t{14}, Edits(5, 10)));
  }
  {
    SCOPED_TRACE("an append to a block no read has checked");
    WriteFile(o.path, good);
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(Append(**r, 1, 1, 11, Edits(5, 10)).IsInvalidArgument());
    ASSERT_OK(Append(**r, 1, 1, 12, Edits(5, 10)));
    const State s = ReadState(**r);
    ASSERT_EQ(s.at({1, 1}).size(), 3u);
    EXPECT_EQ(s.at({1, 1})[2], std::make_pair(uint64_t{12}, Edits(5, 10)));
    std::vector<uint8_t> bad = good;
    PutEntry(&bad, b0, second, 9, Edits(2, 30));
    WriteFile(o.path, bad);
    auto r2 = PplRegion::Open(o);
    ASSERT_TRUE(r2.ok()) << r2.status().ToString();
    EXPECT_TRUE(Append(**r2, 1, 1, 20, Edits(5, 10)).IsCorruption());
  }
}

// Two blocks naming one page (this code never makes them: a page's block
// is freed before it can take another): the newer generation wins and the
// older is freed, but only once the winner's entries pass; else the region
// is refused and left as it was.
TEST(PplRegion, OfTwoBlocksOfOnePageTheNewerWinsIfItsEntriesPass) {
  test::ScratchDir dir;
  PplOptions o{dir.Sub("ppl"), 4096 + 4 * 256, 256, 0, nullptr};
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok());
    ASSERT_OK(Append(**r, 1, 1, 10, Edits(1, 30)));  // block 0
    ASSERT_OK(Append(**r, 1, 2, 12, Edits(3, 30)));  // block 1, a newer generation
  }
  std::vector<uint8_t> twice = ReadFile(o.path);
  const size_t b0 = 4096, b1 = 4096 + 256;
  EncodeFixed32(twice.data() + b1 + 12, 1);  // block 1 now names page 1:1
  EncodeFixed32(twice.data() + b1 + 60, crc32c::Value(twice.data() + b1, 56));
  WriteFile(o.path, twice);
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const State s = ReadState(**r);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s.at({1, 1}), (Entries{{12, Edits(3, 30)}}));
  }
  EXPECT_EQ(DecodeFixed32(ReadFile(o.path).data() + b0 + 56), 0u) << "the older block is freed";
  std::vector<uint8_t> bad = twice;
  bad[b1 + 64 + 16] ^= 0x10;  // the winner's entry
  WriteFile(o.path, bad);
  auto r = PplRegion::Open(o);
  ASSERT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().ToString().find("offset " + std::to_string(b1 + 64) + ":"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(ReadFile(o.path), bad) << "a refused region is left as it was";
}

// A region large enough to be analysed by several threads (runs of 16,384
// blocks, one per core): every page's entries come back, a block cut
// before its commit in the last run is kept (G2) as in the first, and
// of two damaged blocks the first in block order is the one reported.
TEST(PplRegion, ALargeRegionAnalysedInRunsReadsAsOneScanWould) {
  test::ScratchDir dir;
  constexpr uint32_t kBlocks = 65536;
  PplOptions o{dir.Sub("ppl"), 4096 + uint64_t{kBlocks} * 128, 128, 0, nullptr};
  constexpr uint32_t kPages = 60000;
  State written;
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (uint32_t p = 0; p < kPages; ++p) {
      // Two entries on the first and last pages (G2 below), one elsewhere.
      const int entries = p == 0 || p == kPages - 1 ? 2 : 1;
      for (int e = 0; e < entries; ++e) {
        const std::string edits = Edits(p * 2 + e, 8);
        ASSERT_OK(Append(**r, 1 + p % 3, p, 100 + e, edits));
        written[{1 + p % 3, p}].emplace_back(100 + e, edits);
      }
    }
    ASSERT_EQ((*r)->PagesUsed(), kPages);
  }
  std::ifstream in(o.path, std::ios::binary);
  const std::vector<uint8_t> good((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  // Blocks are taken lowest first: page p holds block p.
  auto block = [](uint32_t b) { return size_t{4096} + size_t{b} * 128; };
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(ReadState(**r), written);
  }
  // Both two-entry blocks lose the commit of their second entry.
  std::vector<uint8_t> cut = good;
  for (uint32_t b : {0u, kPages - 1}) {
    const uint32_t one = PplRegion::EntrySizeOf(8);
    ASSERT_EQ(DecodeFixed32(cut.data() + block(b) + 56), 2 * one);
    EncodeFixed32(cut.data() + block(b) + 56, one);
  }
  WriteFile(o.path, cut);
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(ReadState(**r), written);
  }
  std::ifstream again(o.path, std::ios::binary);
  const std::vector<uint8_t> after((std::istreambuf_iterator<char>(again)),
                                   std::istreambuf_iterator<char>());
  for (uint32_t b : {0u, kPages - 1}) {  // (each open also raises the header's floor)
    EXPECT_EQ(DecodeFixed32(after.data() + block(b) + 56), PplRegion::EntrySizeOf(8))
        << "block " << b << ": a read wrote its field (G2: the next append raises it)";
  }
  // Damage in the first run and in the last: the first is reported. (A
  // block header's page number: the open checks headers; entries wait for
  // a read.)
  std::vector<uint8_t> bad = good;
  bad[block(kPages - 100) + 8] ^= 0x04;
  WriteFile(o.path, bad);
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.status().IsCorruption()) << r.status().ToString();
    EXPECT_NE(r.status().ToString().find("block " + std::to_string(kPages - 100) + " "),
              std::string::npos)
        << r.status().ToString();
  }
  bad[block(100) + 8] ^= 0x04;
  WriteFile(o.path, bad);
  auto r = PplRegion::Open(o);
  ASSERT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().ToString().find("block 100 "), std::string::npos) << r.status().ToString();
}

// OpenResizing: an empty region takes new geometry (or goes, with size 0); a
// region with entries keeps its own; a new geometry that cannot be made
// leaves the old region in place; a creation cut short (ppl.tmp) is cleared.
TEST(PplRegion, OnlyAnEmptyRegionTakesANewSize) {
  test::ScratchDir dir;
  PplOptions o{dir.Sub("ppl"), 4096 + 4 * 256, 256, 0, nullptr};
  bool kept = true;
  {
    auto r = PplRegion::OpenResizing(o, &kept);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(kept);
    EXPECT_EQ((*r)->PageCapacity(), 4u);
    ASSERT_OK(Append(**r, 1, 1, 10, Edits(1, 30)));
  }
  PplOptions bigger = o;
  bigger.size = 4096 + 10 * 512;
  bigger.block_size = 512;
  {
    auto r = PplRegion::OpenResizing(bigger, &kept);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(kept);
    EXPECT_EQ((*r)->PageCapacity(), 4u);
    EXPECT_EQ((*r)->block_size(), 256u);
    EXPECT_EQ((*r)->Used(1, 1), PplRegion::EntrySizeOf(30));
    EXPECT_TRUE((*r)->Free(1, 1));
  }
  PplOptions impossible = bigger;
  impossible.size = 4096 + 100;  // no room for one block
  auto bad = PplRegion::OpenResizing(impossible, &kept);
  EXPECT_TRUE(bad.status().IsInvalidArgument()) << bad.status().ToString();
  {
    auto r = PplRegion::Open(o);
    ASSERT_TRUE(r.ok()) << "a failed resize lost the region: " << r.status().ToString();
    EXPECT_EQ((*r)->PageCapacity(), 4u);
  }
  { std::ofstream(o.path + ".tmp") << "half made"; }
  {
    auto r = PplRegion::OpenResizing(bigger, &kept);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(kept);
    EXPECT_EQ((*r)->PageCapacity(), 10u);
    EXPECT_EQ((*r)->block_size(), 512u);
    EXPECT_TRUE((*r)->Pages().empty());
  }
  EXPECT_FALSE(std::filesystem::exists(o.path + ".tmp"));
  PplOptions off = o;
  off.size = 0;
  auto none = PplRegion::OpenResizing(off, &kept);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->get(), nullptr);
  EXPECT_FALSE(std::filesystem::exists(o.path));
}

}  // namespace
}  // namespace subito::ppl
