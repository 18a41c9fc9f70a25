// Row locks: compatibility, upgrades, first-come grants, deadlock victims
// and timeouts (L1-L4), interrupted waits (L5), range locks against inserts
// (L6-L8, L11), and mutual exclusion under a concurrent stress.
#include "txn/lock_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>
#include <thread>

#include "test_util.h"

namespace subito::txn {
namespace {

using namespace std::chrono_literals;
constexpr auto kLong = 10s;

TEST(LockManager, SharedLocksShareAndExclusiveLocksExclude) {
  LockManager lm;
  ASSERT_TRUE(lm.Lock(1, 7, "a", LockMode::kShared, kLong).ok());
  ASSERT_TRUE(lm.Lock(2, 7, "a", LockMode::kShared, kLong).ok());
  EXPECT_TRUE(lm.Holds(1, 7, "a", LockMode::kShared));
  EXPECT_FALSE(lm.Holds(1, 7, "a", LockMode::kExclusive));
  // Same key in another space is another lock.
  ASSERT_TRUE(lm.Lock(3, 8, "a", LockMode::kExclusive, kLong).ok());
  EXPECT_TRUE(lm.Lock(3, 7, "a", LockMode::kExclusive, 50ms).IsTimedOut());  // L4
  lm.ReleaseAll(1);
  lm.ReleaseAll(2);
  ASSERT_TRUE(lm.Lock(3, 7, "a", LockMode::kExclusive, kLong).ok());
  ASSERT_TRUE(lm.Lock(3, 7, "a", LockMode::kShared, kLong).ok());  // L1: X covers S
  EXPECT_TRUE(lm.Holds(3, 7, "a", LockMode::kExclusive));
  EXPECT_EQ(lm.stats().timeouts, 1u);
}

// Each (transaction, key) counts once against the memory budget (L9),
// however often it is locked and whatever the number of other holders;
// a transaction's end releases exactly its own share.
TEST(LockManager, EachHeldKeyCountsOnceUntilItsHolderEnds) {
  LockManager lm;
  const uint64_t cost = LockManager::kLockCost + 2 * (4 + 3);  // space id + 3-byte keys
  for (TxnId t : {1, 2, 3}) {
    for (int round = 0; round < 2; ++round) {
      for (const char* k : {"k01", "k02", "k03"}) {
        ASSERT_TRUE(lm.Lock(t, 1, k, LockMode::kShared, kLong).ok());
      }
    }
  }
  EXPECT_EQ(lm.stats().memory_bytes, 9 * cost);
  lm.ReleaseAll(1);  // the inline holder of every key goes first
  EXPECT_EQ(lm.stats().memory_bytes, 6 * cost);
  EXPECT_FALSE(lm.Holds(1, 1, "k02", LockMode::kShared));
  EXPECT_TRUE(lm.Holds(2, 1, "k02", LockMode::kShared));
  EXPECT_TRUE(lm.Holds(3, 1, "k02", LockMode::kShared));
  EXPECT_TRUE(lm.Lock(4, 1, "k02", LockMode::kExclusive, 20ms).IsTimedOut());
  lm.ReleaseAll(3);
  // Transaction 2, sole holder now, upgrades without counting again.
  ASSERT_TRUE(lm.Lock(2, 1, "k02", LockMode::kExclusive, kLong).ok());
  EXPECT_EQ(lm.stats().memory_bytes, 3 * cost);
  lm.ReleaseAll(2);
  EXPECT_EQ(lm.stats().memory_bytes, 0u);
  ASSERT_TRUE(lm.Lock(4, 1, "k02", LockMode::kExclusive, 0ms).ok());  // free at once
  EXPECT_EQ(lm.stats().memory_bytes, cost);
}

// Past the budget, a key held by another transaction is refused like any
// new one and counts nothing; a waiter that timed out leaves no entry
// behind once the holder ends.
TEST(LockManager, RefusalsAndTimedOutWaitersLeaveNothingBehind) {
  LockManager lm;
  const uint64_t cost = LockManager::kLockCost + 2 * (4 + 1);
  lm.SetMemoryBudget(cost + cost / 2);
  ASSERT_TRUE(lm.Lock(1, 1, "a", LockMode::kShared, kLong).ok());
  EXPECT_TRUE(lm.Lock(2, 1, "a", LockMode::kShared, kLong).IsTooManyLocks());
  EXPECT_TRUE(lm.Lock(1, 1, "a", LockMode::kExclusive, kLong).ok());  // held already
  EXPECT_EQ(lm.stats().memory_bytes, cost);
  lm.SetMemoryBudget(0);
  EXPECT_TRUE(lm.Lock(2, 1, "a", LockMode::kShared, 20ms).IsTimedOut());
  lm.ReleaseAll(1);
  EXPECT_EQ(lm.stats().memory_bytes, 0u);
  EXPECT_FALSE(lm.Holds(2, 1, "a", LockMode::kShared));
  ASSERT_TRUE(lm.Lock(3, 1, "a", LockMode::kExclusive, 0ms).ok());
  EXPECT_EQ(lm.stats().refused_over_budget, 1u);
}

TEST(LockManager, AWaiterIsGrantedWhenTheHolderEnds) {
  LockManager lm;
  ASSERT_TRUE(lm.Lock(1, 1, "k", LockMode::kExclusive, kLong).ok());
  auto waiter =
      std::async(std::launch::async, [&] { return lm.Lock(2, 1, "k", LockMode::kShared, kLong); });
  EXPECT_EQ(waiter.wait_for(100ms), std::future_status::timeout);
  lm.ReleaseAll(1);
  ASSERT_TRUE(waiter.get().ok());
  EXPECT_TRUE(lm.Holds(2, 1, "k", LockMode::kShared));
  EXPECT_EQ(lm.stats().waits, 1u);
}

// Release gives up one key: a waiter takes it at once, the key no longer
// counts against the budget, the holder's other keys stay held and go at
// its end. Lock says which requests granted a key the holder had not held.
TEST(LockManager, AReleasedKeyGoesToItsWaiterAndTheRestStays) {
  LockManager lm;
  const uint64_t cost = LockManager::kLockCost + 2 * (4 + 1);
  bool granted_new = false;
  ASSERT_TRUE(lm.Lock(1, 1, "a", LockMode::kShared, kLong, nullptr, &granted_new).ok());
  EXPECT_TRUE(granted_new);
  ASSERT_TRUE(lm.Lock(1, 1, "a", LockMode::kExclusive, kLong, nullptr, &granted_new).ok());
  EXPECT_FALSE(granted_new);  // an upgrade
  for (const char* k : {"b", "c"}) ASSERT_TRUE(lm.Lock(1, 1, k, LockMode::kExclusive, kLong).ok());
  auto waiter = std::async(std::launch::async, [&] {
    bool fresh = false;
    Status st = lm.Lock(2, 1, "b", LockMode::kExclusive, kLong, nullptr, &fresh);
    EXPECT_TRUE(fresh);
    return st;
  });
  EXPECT_EQ(waiter.wait_for(100ms), std::future_status::timeout);
  lm.Release(1, 1, "b");
  ASSERT_TRUE(waiter.get().ok());
  EXPECT_FALSE(lm.Holds(1, 1, "b", LockMode::kShared));
  EXPECT_TRUE(lm.Holds(2, 1, "b", LockMode::kExclusive));
  lm.Release(1, 1, "b");  // held no more: nothing happens
  lm.Release(3, 1, "a");  // not its lock
  EXPECT_TRUE(lm.Holds(1, 1, "a", LockMode::kExclusive));
  EXPECT_EQ(lm.stats().memory_bytes, 3 * cost);
  lm.Release(1, 1, "c");
  EXPECT_TRUE(lm.Lock(3, 1, "c", LockMode::kExclusive, 0ms).ok());
  lm.ReleaseAll(1);
  lm.ReleaseAll(2);
  lm.ReleaseAll(3);
  EXPECT_EQ(lm.stats().memory_bytes, 0u);
  EXPECT_TRUE(lm.Lock(4, 1, "a", LockMode::kExclusive, 0ms).ok());
}

// A downgraded lock is shared: waiting readers take it at once, a writer
// still waits, and the holder may upgrade again once alone.
TEST(LockManager, ADowngradedLockLetsReadersIn) {
  LockManager lm;
  ASSERT_TRUE(lm.Lock(1, 1, "k", LockMode::kExclusive, kLong).ok());
  auto reader =
      std::async(std::launch::async, [&] { return lm.Lock(2, 1, "k", LockMode::kShared, kLong); });
  EXPECT_EQ(reader.wait_for(100ms), std::future_status::timeout);
  lm.Downgrade(1, 1, "k");
  ASSERT_TRUE(reader.get().ok());
  EXPECT_TRUE(lm.Holds(1, 1, "k", LockMode::kShared));
  EXPECT_FALSE(lm.Holds(1, 1, "k", LockMode::kExclusive));
  EXPECT_TRUE(lm.Lock(3, 1, "k", LockMode::kExclusive, 0ms).IsTimedOut());
  lm.Downgrade(2, 1, "k");  // shared already: nothing happens
  lm.ReleaseAll(2);
  ASSERT_TRUE(lm.Lock(1, 1, "k", LockMode::kExclusive, 0ms).ok());
  lm.ReleaseAll(1);
  EXPECT_EQ(lm.stats().memory_bytes, 0u);
}

// L10: the hook hears of each holder once the request is queued, under the
// manager's mutex (each one it names still holds the key); the waiter is
// granted when the holders end.
TEST(LockManager, TheWaitHookHearsOfEachHolderWhileItHolds) {
  LockManager lm;
  std::vector<std::pair<TxnId, TxnId>> heard;
  lm.SetWaitHook([&](TxnId waiter, TxnId holder) { heard.emplace_back(waiter, holder); });
  ASSERT_TRUE(lm.Lock(2, 1, "k", LockMode::kShared, 0ms).ok());
  ASSERT_TRUE(lm.Lock(3, 1, "k", LockMode::kShared, 0ms).ok());
  auto waiter =
      std::async(std::launch::async, [&] { return lm.Lock(1, 1, "k", LockMode::kExclusive, 5s); });
  std::this_thread::sleep_for(100ms);
  lm.ReleaseAll(2);
  lm.ReleaseAll(3);
  ASSERT_TRUE(waiter.get().ok());
  EXPECT_TRUE(lm.Holds(1, 1, "k", LockMode::kExclusive));
  ASSERT_EQ(heard.size(), 2u);  // each holder once
  EXPECT_EQ(heard[0], (std::pair<TxnId, TxnId>{1, 2}));
  EXPECT_EQ(heard[1], (std::pair<TxnId, TxnId>{1, 3}));
  // Granted at once: nothing to hear.
  ASSERT_TRUE(lm.Lock(4, 1, "other", LockMode::kExclusive, 0ms).ok());
  EXPECT_EQ(heard.size(), 2u);
}

TEST(LockManager, UpgradesWaitOnlyForOtherHolders) {
  LockManager lm;
  ASSERT_TRUE(lm.Lock(1, 1, "k", LockMode::kShared, kLong).ok());
  ASSERT_TRUE(lm.Lock(1, 1, "k", LockMode::kExclusive, kLong).ok());  // sole holder
  EXPECT_TRUE(lm.Holds(1, 1, "k", LockMode::kExclusive));
  lm.ReleaseAll(1);
  ASSERT_TRUE(lm.Lock(1, 1, "k", LockMode::kShared, kLong).ok());
  ASSERT_TRUE(lm.Lock(2, 1, "k", LockMode::kShared, kLong).ok());
  auto up = std::async(std::launch::async,
                       [&] { return lm.Lock(1, 1, "k", LockMode::kExclusive, kLong); });
  EXPECT_EQ(up.wait_for(100ms), std::future_status::timeout);
  lm.ReleaseAll(2);
  ASSERT_TRUE(up.get().ok());
  EXPECT_TRUE(lm.Holds(1, 1, "k", LockMode::kExclusive));
}

TEST(LockManager, WritersAreNotStarvedByLaterReaders) {
  LockManager lm;
  ASSERT_TRUE(lm.Lock(1, 1, "k", LockMode::kShared, kLong).ok());
  auto writer = std::async(std::launch::async,
                           [&] { return lm.Lock(2, 1, "k", LockMode::kExclusive, kLong); });
  while (lm.stats().waits < 1) std::this_thread::sleep_for(1ms);
  // L2: a new reader queues behind the waiting writer.
  EXPECT_TRUE(lm.Lock(3, 1, "k", LockMode::kShared, 50ms).IsTimedOut());
  lm.ReleaseAll(1);
  ASSERT_TRUE(writer.get().ok());
}

TEST(LockManager, AnInterruptedWaiterFailsAtOnceAndTheQueueMovesOn) {
  LockManager lm;
  ASSERT_TRUE(lm.Lock(1, 1, "k", LockMode::kExclusive, kLong).ok());
  std::atomic<bool> killed{false};
  const std::function<bool()> check = [&] { return killed.load(); };
  auto victim = std::async(std::launch::async, [&] {
    return lm.Lock(2, 1, "k", LockMode::kExclusive, std::chrono::hours(24 * 366), check);
  });
  while (lm.stats().waits < 1) std::this_thread::sleep_for(1ms);
  auto behind =
      std::async(std::launch::async, [&] { return lm.Lock(3, 1, "k", LockMode::kShared, kLong); });
  while (lm.stats().waits < 2) std::this_thread::sleep_for(1ms);
  lm.Wake(2);  // not killed yet: the waiter checks and waits on
  EXPECT_EQ(victim.wait_for(100ms), std::future_status::timeout);
  lm.Wake(99);  // not waiting: nothing happens
  killed = true;
  lm.Wake(2);
  ASSERT_EQ(victim.wait_for(5s), std::future_status::ready);  // not its year-long timeout
  EXPECT_TRUE(victim.get().IsInterrupted());
  EXPECT_FALSE(lm.Holds(2, 1, "k", LockMode::kShared));
  lm.ReleaseAll(1);
  ASSERT_TRUE(behind.get().ok());  // the interrupted request left the queue
  EXPECT_EQ(lm.stats().interrupted, 1u);
  // Once the check holds, a request that would wait fails without waiting;
  // one that needs no wait is granted.
  EXPECT_TRUE(lm.Lock(2, 1, "k", LockMode::kExclusive, kLong, check).IsInterrupted());
  EXPECT_TRUE(lm.Lock(2, 1, "other", LockMode::kExclusive, kLong, check).ok());
  EXPECT_EQ(lm.stats().waits, 2u);
  EXPECT_EQ(lm.stats().interrupted, 2u);
}

TEST(LockManager, TheRequestClosingACycleIsTheVictim) {
  LockManager lm;
  ASSERT_TRUE(lm.Lock(1, 1, "a", LockMode::kExclusive, kLong).ok());
  ASSERT_TRUE(lm.Lock(2, 1, "b", LockMode::kExclusive, kLong).ok());
  ASSERT_TRUE(lm.Lock(3, 1, "c", LockMode::kExclusive, kLong).ok());
  auto t1 = std::async(std::launch::async,
                       [&] { return lm.Lock(1, 1, "b", LockMode::kExclusive, kLong); });
  auto t2 = std::async(std::launch::async,
                       [&] { return lm.Lock(2, 1, "c", LockMode::kExclusive, kLong); });
  while (lm.stats().waits < 2) std::this_thread::sleep_for(1ms);
  // 3 -> a (held by 1) closes 1 -> b -> 2 -> c -> 3.
  Status victim = lm.Lock(3, 1, "a", LockMode::kExclusive, kLong);
  EXPECT_TRUE(victim.IsDeadlock()) << victim.ToString();
  lm.ReleaseAll(3);  // the victim rolls back
  ASSERT_TRUE(t2.get().ok());
  lm.ReleaseAll(2);
  ASSERT_TRUE(t1.get().ok());
  EXPECT_EQ(lm.stats().deadlocks, 1u);
}

TEST(LockManager, TwoUpgradersDeadlock) {
  LockManager lm;
  ASSERT_TRUE(lm.Lock(1, 1, "k", LockMode::kShared, kLong).ok());
  ASSERT_TRUE(lm.Lock(2, 1, "k", LockMode::kShared, kLong).ok());
  auto up = std::async(std::launch::async,
                       [&] { return lm.Lock(1, 1, "k", LockMode::kExclusive, kLong); });
  while (lm.stats().waits < 1) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(lm.Lock(2, 1, "k", LockMode::kExclusive, kLong).IsDeadlock());
  lm.ReleaseAll(2);
  ASSERT_TRUE(up.get().ok());
}

TEST(LockManager, ExclusiveHoldersNeverOverlapUnderStress) {
  LockManager lm;
  std::atomic<int> inside[8] = {};
  std::atomic<uint64_t> deadlocks{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(test::TestSeed() + t);
      for (int i = 0; i < 300; ++i) {
        const TxnId txn = static_cast<TxnId>(t) * 100000 + i + 1;
        const int a = static_cast<int>(rng() % 8), b = static_cast<int>(rng() % 8);
        Status s1 = lm.Lock(txn, 1, std::string(1, 'a' + a), LockMode::kExclusive, kLong);
        Status s2 =
            s1.ok() ? lm.Lock(txn, 1, std::string(1, 'a' + b), LockMode::kExclusive, kLong) : s1;
        if (s2.ok()) {
          for (int k : {a, b}) {
            if (k == b && a == b) break;
            ASSERT_EQ(inside[k].fetch_add(1), 0) << "two exclusive holders of one key";
          }
          std::this_thread::yield();
          for (int k : {a, b}) {
            if (k == b && a == b) break;
            inside[k].fetch_sub(1);
          }
          ++done;
        } else {
          ASSERT_TRUE(s2.IsDeadlock()) << s2.ToString();
          ++deadlocks;
        }
        lm.ReleaseAll(txn);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(done + deadlocks, 1200u);
  EXPECT_GT(done.load(), 600u);
}

KeyRange Range(std::optional<std::string> lo, std::optional<std::string> hi, bool lo_in = true,
               bool hi_in = true) {
  return KeyRange{std::move(lo), std::move(hi), lo_in, hi_in};
}

TEST(LockManagerRanges, AnInsertIntoAnotherTransactionsRangeWaitsForItsEnd) {
  LockManager lm;
  lm.LockRange(1, 5, Range("b", "d", /*lo_in=*/false));
  // Outside the range, in another space, or the holder's own: no wait (L7).
  ASSERT_TRUE(lm.WaitForRanges(2, 5, "b", kLong).ok());
  ASSERT_TRUE(lm.WaitForRanges(2, 5, "e", kLong).ok());
  ASSERT_TRUE(lm.WaitForRanges(2, 6, "c", kLong).ok());
  ASSERT_TRUE(lm.WaitForRanges(1, 5, "c", kLong).ok());
  // Range locks neither block nor wait for key locks or each other (L6).
  ASSERT_TRUE(lm.Lock(2, 5, "c", LockMode::kExclusive, kLong).ok());
  lm.LockRange(3, 5, Range("a", "z"));
  EXPECT_TRUE(lm.WaitForRanges(2, 5, "d", 50ms).IsTimedOut());
  EXPECT_TRUE(lm.WaitForRanges(2, 5, "d", 0ms).IsTimedOut());  // NOWAIT
  lm.ReleaseAll(3);
  auto insert = std::async(std::launch::async, [&] { return lm.WaitForRanges(2, 5, "c", kLong); });
  EXPECT_EQ(insert.wait_for(100ms), std::future_status::timeout);
  lm.ReleaseAll(1);
  ASSERT_TRUE(insert.get().ok());
  EXPECT_EQ(lm.stats().insert_waits, 2u);  // NOWAIT never waited
  EXPECT_EQ(lm.stats().ranges, 0u);
}

TEST(LockManagerRanges, UnboundedRangesAndAScansStepsMergeIntoOne) {
  LockManager lm;
  lm.LockRange(1, 1, Range("m", std::nullopt, false));  // past the last key
  EXPECT_TRUE(lm.WaitForRanges(2, 1, "zzz", 0ms).IsTimedOut());
  ASSERT_TRUE(lm.WaitForRanges(2, 1, "m", 0ms).ok());
  lm.LockRange(1, 2, Range("c", "d"));
  lm.LockRange(1, 2, Range("d", "f", false));
  lm.LockRange(1, 2, Range("f", "h", false));
  lm.LockRange(1, 2, Range("a", "c", true, false));  // a backward step
  lm.LockRange(1, 2, Range("b", "c"));               // inside: nothing new
  EXPECT_EQ(lm.stats().ranges, 2u);
  lm.LockRange(1, 2, Range("h", "i", false));  // (h is in [a, h]: continues it)
  lm.LockRange(1, 2, Range("x", "y", false));  // not contiguous: a range of its own
  EXPECT_EQ(lm.stats().ranges, 3u);
  for (const char* k : {"a", "b", "e", "g", "h"}) {
    EXPECT_TRUE(lm.WaitForRanges(2, 2, k, 0ms).IsTimedOut()) << k;
  }
  ASSERT_TRUE(lm.WaitForRanges(2, 2, "j", 0ms).ok());
  EXPECT_TRUE(lm.WaitForRanges(2, 2, "i", 0ms).IsTimedOut());
  lm.ReleaseAll(1);
  EXPECT_EQ(lm.stats().ranges, 0u);
}

// L11: a grant is undone while the transaction's newest range is what the
// grant left, and a waiting insert hears of it.
TEST(LockManagerRanges, AGrantGivenBackUndoesOnlyItsOwnStep) {
  LockManager lm;
  const RangeGrant first = lm.LockRange(1, 1, Range("c", "e"));
  EXPECT_EQ(first.kind, RangeGrant::Kind::kAdded);
  const RangeGrant step = lm.LockRange(1, 1, Range("e", "g", false));
  EXPECT_EQ(step.kind, RangeGrant::Kind::kExtendedHi);
  auto insert = std::async(std::launch::async, [&] { return lm.WaitForRanges(2, 1, "f", kLong); });
  EXPECT_EQ(insert.wait_for(100ms), std::future_status::timeout);
  lm.GiveBackRange(1, step);
  ASSERT_TRUE(insert.get().ok());
  EXPECT_TRUE(lm.WaitForRanges(2, 1, "e", 0ms).IsTimedOut());  // the first step stays
  const RangeGrant inside = lm.LockRange(1, 1, Range("c", "d"));
  EXPECT_EQ(inside.kind, RangeGrant::Kind::kNone);
  lm.GiveBackRange(1, inside);
  EXPECT_TRUE(lm.WaitForRanges(2, 1, "d", 0ms).IsTimedOut());
  const RangeGrant back = lm.LockRange(1, 1, Range("a", "c", true, false));
  EXPECT_EQ(back.kind, RangeGrant::Kind::kExtendedLo);
  lm.GiveBackRange(1, back);
  ASSERT_TRUE(lm.WaitForRanges(2, 1, "b", 0ms).ok());
  // A grant that a later one changed is kept.
  const RangeGrant other = lm.LockRange(1, 1, Range("x", "y"));
  EXPECT_EQ(other.kind, RangeGrant::Kind::kAdded);
  lm.LockRange(1, 1, Range("y", "z", false));
  lm.GiveBackRange(1, other);
  EXPECT_TRUE(lm.WaitForRanges(2, 1, "x", 0ms).IsTimedOut());
  EXPECT_EQ(lm.stats().ranges, 2u);
  const RangeGrant last = lm.LockRange(1, 2, Range("p", "q"));
  lm.GiveBackRange(1, last);
  EXPECT_EQ(lm.stats().ranges, 2u);
  ASSERT_TRUE(lm.WaitForRanges(2, 2, "p", 0ms).ok());
  lm.ReleaseAll(1);
  EXPECT_EQ(lm.stats().ranges, 0u);
}

TEST(LockManagerRanges, ARangeNeverWaitsAndAnInsertIntoIt) {
  LockManager lm;
  ASSERT_TRUE(lm.Lock(2, 1, "c", LockMode::kExclusive, kLong).ok());  // 2's insert of c
  lm.LockRange(1, 1, Range("a", "f"));  // no wait for 2 (L8: the caller reads again)
  EXPECT_TRUE(lm.WaitForRanges(2, 1, "c", 0ms).IsTimedOut());  // 2's second check (L7)
  EXPECT_EQ(lm.stats().waits, 0u);
  lm.ReleaseAll(1);
  ASSERT_TRUE(lm.WaitForRanges(2, 1, "c", 0ms).ok());
}

TEST(LockManagerRanges, DeadlocksThroughRangesChooseTheRequesterAsVictim) {
  LockManager lm;
  // 1 holds a range and waits for 2's key; 2's insert into the range would
  // close the cycle.
  lm.LockRange(1, 1, Range("a", "m"));
  ASSERT_TRUE(lm.Lock(2, 1, "x", LockMode::kExclusive, kLong).ok());
  auto waiter =
      std::async(std::launch::async, [&] { return lm.Lock(1, 1, "x", LockMode::kShared, kLong); });
  ASSERT_EQ(waiter.wait_for(100ms), std::future_status::timeout);
  EXPECT_TRUE(lm.WaitForRanges(2, 1, "c", kLong).IsDeadlock());
  lm.ReleaseAll(2);
  ASSERT_TRUE(waiter.get().ok());
  lm.ReleaseAll(1);

  // The other order: 2 waits to insert into 1's range, then 1 asks for
  // 2's key.
  lm.LockRange(1, 1, Range("a", "m"));
  ASSERT_TRUE(lm.Lock(2, 1, "x", LockMode::kExclusive, kLong).ok());
  auto insert = std::async(std::launch::async, [&] { return lm.WaitForRanges(2, 1, "c", kLong); });
  ASSERT_EQ(insert.wait_for(100ms), std::future_status::timeout);
  EXPECT_TRUE(lm.Lock(1, 1, "x", LockMode::kShared, kLong).IsDeadlock());
  lm.ReleaseAll(1);
  ASSERT_TRUE(insert.get().ok());
  EXPECT_EQ(lm.stats().deadlocks, 2u);
}

TEST(LockManagerRanges, AWaitingInsertIsInterruptedByWake) {
  LockManager lm;
  lm.LockRange(1, 1, Range(std::nullopt, std::nullopt));
  std::atomic<bool> killed{false};
  auto insert = std::async(std::launch::async, [&] {
    return lm.WaitForRanges(2, 1, "k", kLong, [&] { return killed.load(); });
  });
  ASSERT_EQ(insert.wait_for(100ms), std::future_status::timeout);
  killed = true;
  lm.Wake(2);
  EXPECT_TRUE(insert.get().IsInterrupted());
}

}  // namespace
}  // namespace subito::txn
