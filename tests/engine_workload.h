// A deterministic multi-threaded transaction workload for crash tests.
//
// Thread w owns primary keys [w*1000, w*1000+40) and unique values "w<w>-…",
// so threads never conflict and each thread's rows after a crash must equal
// its model after some number k of its committed transactions, where k lies
// between the transactions acknowledged and the commits started before the
// crash. Transactions insert, update (changing both secondary keys) and
// delete; some roll back, some roll back to a savepoint; a few values use
// overflow pages, some of them more than one mini-transaction can write.
// Replaying a thread's plan without a database gives the same models (the
// plan depends only on the seed and the model).
#pragma once

#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "btree/btree.h"
#include "engine_util.h"

namespace subito::test {

class ThreadWorkload {
 public:
  // A slow thread sleeps between the operations of its transactions, so
  // they span other threads' commits and checkpoints.
  // A big thread's transactions change hundreds of rows each (more undo
  // than 1/16 of a small log: they spill to undo files), and a third of them
  // roll back to a savepoint among their first changes.
  ThreadWorkload(int thread, uint64_t seed, bool slow = false, bool big = false)
      : w_(thread), slow_(slow), big_(big), rng_(seed * 7919 + thread) {
    states_.emplace_back();
  }
  // Runs the next transaction (in db if not null). Returns whether it was
  // committed; the model advances then. `before_commit` is called just
  // before Commit.
  template <typename Hook>
  Status Next(Database* db, Table* t, bool* committed, Hook&& before_commit) {
    ++seq_;
    std::map<int64_t, Row> work = states_.back(), at_sp = work;
    std::unique_ptr<Transaction> txn = db ? db->Begin() : nullptr;
    uint64_t sp = txn ? txn->Savepoint() : 0;
    const int ops = big_ ? 150 + static_cast<int>(rng_() % 300) : 1 + static_cast<int>(rng_() % 4);
    const int sp_at = rng_() % (big_ ? 3 : 10) == 0 ? static_cast<int>(rng_() % ops) : -1;
    for (int i = 0; i < ops; ++i) {
      if (i == sp_at) {
        sp = txn ? txn->Savepoint() : 0;
        at_sp = work;
      }
      const int64_t id = w_ * 1000 + static_cast<int64_t>(rng_() % (big_ ? 300 : 40));
      // Some values take a chain of overflow pages; a few take chains
      // longer than one mini-transaction can write (btree.h).
      const size_t len = big_               ? rng_() % 300
                         : rng_() % 80 == 0 ? 40000 + rng_() % 120000
                         : rng_() % 25 == 0 ? 3000 + rng_() % 3000
                                            : rng_() % 300;
      std::optional<std::string> u;
      if (rng_() % 2)
        u = "w" + std::to_string(w_) + "-" + std::to_string(seq_) + "-" + std::to_string(i);
      const Row row = SampleRow(id, seq_ % 13, u,
                                "w" + std::to_string(w_) + "s" + std::to_string(seq_) +
                                    std::string(len, static_cast<char>('a' + seq_ % 26)));
      const bool del = rng_() % 3 == 0;
      Status s;
      if (work.count(id)) {
        if (del) {
          if (txn) s = txn->Delete(t, row);
          work.erase(id);
        } else {
          if (txn) s = txn->Update(t, work[id], row);
          work[id] = row;
        }
      } else {
        if (txn) s = txn->Insert(t, row);
        work[id] = row;
      }
      if (!s.ok()) return s;
      if (slow_ && txn) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
    if (sp_at >= 0) {
      if (txn) SUBITO_RETURN_IF_ERROR(txn->RollbackTo(sp));
      work = at_sp;
    }
    *committed = rng_() % 6 != 0;
    if (!*committed) return txn ? txn->Rollback() : Status::OK();
    before_commit(seq_);
    if (txn) SUBITO_RETURN_IF_ERROR(txn->Commit());
    states_.push_back(std::move(work));
    return Status::OK();
  }
  // states()[k]: the model after k committed transactions.
  const std::vector<std::map<int64_t, Row>>& states() const { return states_; }
  int thread() const { return w_; }

 private:
  const int w_;
  const bool slow_, big_;
  std::mt19937_64 rng_;
  uint32_t seq_ = 0;
  std::vector<std::map<int64_t, Row>> states_;
};

// Checks a recovered database: thread w's rows equal states[k] for some
// k in [min_k[w], max_k[w]] (stored in found[w] if given), and every index
// agrees with the table.
inline void CheckRecovered(Database* db, const std::vector<const ThreadWorkload*>& threads,
                           const std::vector<size_t>& min_k, const std::vector<size_t>& max_k,
                           std::vector<size_t>* found = nullptr) {
  Table* t = db->FindTable("t");
  ASSERT_NE(t, nullptr);
  auto txn = db->Begin();
  const std::vector<Row> rows = ScanAll(txn.get(), t);
  for (size_t w = 0; w < threads.size(); ++w) {
    std::map<int64_t, Row> got;
    for (const Row& r : rows) {
      const int64_t id = std::get<int64_t>(r[0]);
      if (id / 1000 == threads[w]->thread()) got[id] = r;
    }
    const auto& states = threads[w]->states();
    bool match = false;
    for (size_t k = min_k[w]; k <= max_k[w] && k < states.size() && !match; ++k) {
      match = states[k] == got;
      if (match && found) (*found)[w] = k;
    }
    auto describe = [](const std::map<int64_t, Row>& m) {
      std::string s;
      for (const auto& [id, r] : m) {
        s += " " + std::to_string(id) + ":k=" + std::to_string(std::get<uint64_t>(r[1])) +
             ",v=" + std::to_string(std::get<std::string>(r[3]).size()) + "B";
      }
      return s;
    };
    std::string near;
    for (size_t k = min_k[w] > 0 ? min_k[w] - 1 : 0; k <= max_k[w] + 1 && k < states.size(); ++k) {
      near += "\n  state " + std::to_string(k) + ":" + describe(states[k]);
    }
    ASSERT_TRUE(match) << "thread " << w << ": recovered rows (" << got.size()
                       << ") match no state with " << min_k[w] << ".." << max_k[w]
                       << " committed transactions\n  recovered:" << describe(got) << near;
  }
  for (uint32_t index = 1; index <= 2; ++index) {
    std::vector<Row> by_index = ScanAll(txn.get(), t, index);
    std::sort(by_index.begin(), by_index.end(), [](const Row& a, const Row& b) {
      return std::get<int64_t>(a[0]) < std::get<int64_t>(b[0]);
    });
    ASSERT_EQ(by_index, rows) << "index " << index << " disagrees with the table";
  }
  // The trees' entry counts include a loser's rows until the background
  // undo has rolled it back (readers never see them). A crash leaves each
  // count off by at most its slack (BTree::entries) plus the changes in
  // flight (16: more than the workload's threads); callers cut power at
  // most twice between checks (LazyRecoveryCuts cuts a recovery). Counted
  // again, the leaves hold one entry per row.
  ASSERT_TRUE(AwaitBackgroundUndo(db));
  for (const IndexStats& is : t->Stats().indexes) {
    const uint64_t off =
        is.entries > rows.size() ? is.entries - rows.size() : rows.size() - is.entries;
    ASSERT_LE(off, 2 * (btree::BTree::CountSlack(is.entries) + 16)) << "index " << is.name;
  }
  ASSERT_OK(t->Recount());
  for (const IndexStats& is : t->Stats().indexes) {
    ASSERT_EQ(is.entries, rows.size()) << "index " << is.name << " entry count";
  }
  ASSERT_OK(txn->Commit());
}

}  // namespace subito::test
