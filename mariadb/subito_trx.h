// The engine instance the plugin opened, and each connection's transaction.
//
// A connection's Subito transaction begins at the first statement that
// touches a Subito table and ends through the handlerton (commit/rollback,
// for the statement or the whole transaction). Each statement starts at a
// savepoint, so a failed statement rolls back alone, as in InnoDB.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "subito/database.h"
#include "subito/interrupt.h"

class THD;
struct handlerton;

namespace subito::mariadb {

extern handlerton* subito_hton;
// nullptr until the plugin's init opened the engine.
Database* engine();
// The engine's page size (subito_page_size).
uint32_t PageSize();
// Whether the double-write area is on the PM tier (subito_double_write_on_pm).
bool DoubleWriteOnPm();
// Where TEMPORARY tables' page files go: <data_home_dir>/tmp.
const std::string& TemporaryDir();

struct Trx {
  std::unique_ptr<Transaction> txn;
  uint64_t statement_savepoint = 0;
  int tables_in_statement = 0;
  bool serializable = false;  // plain reads take shared locks
  // txn's id, for KILL from another thread (which must not touch txn).
  std::atomic<uint64_t> txn_id{0};
  // txn_id is in the lock-wait reports' map (NameTransaction).
  bool named = false;
};

// The connection's transaction state (created on first use).
Trx* GetTrx(THD* thd);
// Starts the transaction if needed and registers a statement with the
// server; called once per table at the start of each statement.
int BeginStatement(THD* thd, Trx* trx);
// Maps an engine error to a handler error code, reporting its message.
int ToHaError(THD* thd, const Status& st);
// The message of the last engine error reported through ToHaError.
const std::string& LastErrorMessage();

// The exception barrier. Every handler and handlerton entry point runs its
// body through Guard: an exception (std::bad_alloc, a std::filesystem or
// std::variant error, anything) never crosses into the server; it becomes
// the statement's error (HA_ERR_OUT_OF_MEM, or HA_ERR_INTERNAL_ERROR with
// its text, also in the error log). Guard also opens the InterruptScope
// through which the engine's waits for log space see a KILL.
int ReportException(THD* thd, const char* entry) noexcept;
bool Killed(void* thd);

template <typename Fn>
auto GuardOr(THD* thd, const char* entry, decltype(std::declval<Fn&>()()) on_error,
             Fn&& fn) noexcept -> decltype(fn()) {
  try {
    InterruptScope scope(&Killed, thd);
    return fn();
  } catch (...) {
    (void)ReportException(thd, entry);
    return on_error;
  }
}

template <typename Fn>
int Guard(THD* thd, const char* entry, Fn&& fn) noexcept {
  try {
    InterruptScope scope(&Killed, thd);
    return fn();
  } catch (...) {
    return ReportException(thd, entry);
  }
}

}  // namespace subito::mariadb
