//! The SQLite catalog's connection, with group commit. A synced commit waits
//! for the disk, and the connection is one: a thousand batches committing
//! at once would wait for a thousand syncs in a row. Instead, a transaction
//! that finds others waiting for the connection leaves its own open for
//! them: each runs in a savepoint of it (its failure undoes only its own
//! writes), and the last, or the [`MAX_GROUP`]th, commits them all with one
//! sync. Everyone in the group hears that commit's outcome before it
//! returns, so a transaction still returns only once it is durable.
//!
//! Plain statements ([`Sqlite::run`]) that come while a group is open run
//! inside it, and wait for its commit too; alone, each commits on its own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use super::CatalogError;
use super::db::{Sql, SqliteSql};

/// The most transactions one commit takes.
const MAX_GROUP: usize = 64;

/// How many failed commits are remembered for the members still to hear of them.
const FAILURES_KEPT: usize = 16;

pub struct Sqlite {
    state: Mutex<State>,
    /// Callers waiting for the connection: a group stays open while there are any.
    queued: AtomicUsize,
    /// Told whenever a group ends.
    ended: Condvar,
}

struct State {
    conn: rusqlite::Connection,
    /// The group open on the connection (`BEGIN`, not yet committed): its number and its members so far.
    open: Option<(u64, usize)>,
    /// The number of the group opened last.
    last: u64,
    /// Every group up to this number has ended.
    ended: u64,
    /// Groups whose commit failed, by number, with why.
    failed: Vec<(u64, String)>,
}

impl State {
    /// Ends the open group, if any: commits it (rolled back if that fails)
    /// and notes how it went for its members.
    fn end(&mut self, ended: &Condvar) -> Result<(), CatalogError> {
        let Some((group, _)) = self.open.take() else { return Ok(()) };
        let committed = self.conn.execute_batch("COMMIT");
        if committed.is_err() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        self.ended = group;
        let outcome = committed.map_err(CatalogError::from);
        if let Err(e) = &outcome {
            self.failed.push((group, e.to_string()));
            if self.failed.len() > FAILURES_KEPT {
                self.failed.remove(0);
            }
        }
        ended.notify_all();
        outcome
    }

    /// The open group, opened if none is; the caller is one more of its members.
    fn join(&mut self) -> Result<u64, CatalogError> {
        match &mut self.open {
            Some((group, members)) => {
                *members += 1;
                Ok(*group)
            }
            None => {
                self.conn.execute_batch("BEGIN IMMEDIATE")?;
                self.last += 1;
                self.open = Some((self.last, 1));
                Ok(self.last)
            }
        }
    }
}

impl Sqlite {
    pub fn new(conn: rusqlite::Connection) -> Self {
        let state = State { conn, open: None, last: 0, ended: 0, failed: Vec::new() };
        Self { state: Mutex::new(state), queued: AtomicUsize::new(0), ended: Condvar::new() }
    }

    fn acquire(&self) -> MutexGuard<'_, State> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.queued.fetch_sub(1, Ordering::SeqCst);
        state
    }

    /// Lets go of the connection as a member of `group` whose own part came
    /// out as `out`: leaves the group open for those waiting (and waits for
    /// its end), or ends it. Either way `out` stands only if the group commits.
    fn release<R>(
        &self,
        mut state: MutexGuard<'_, State>,
        group: u64,
        out: Result<R, CatalogError>,
    ) -> Result<R, CatalogError> {
        let members = state.open.map_or(0, |(_, members)| members);
        if self.queued.load(Ordering::SeqCst) > 0 && members < MAX_GROUP {
            let value = out?; // failed: nothing of its own to wait for
            let state = self.ended.wait_while(state, |s| s.ended < group).unwrap_or_else(|e| e.into_inner());
            match state.failed.iter().find(|(g, _)| *g == group) {
                Some((_, why)) => Err(CatalogError::Sql {
                    message: format!("committing the catalog: {why}"),
                    unique_violation: false,
                }),
                None => Ok(value),
            }
        } else {
            state.end(&self.ended)?;
            out
        }
    }

    /// Runs `f`'s statements: inside the open group if there is one (and then
    /// returns once it has committed), each committing on its own if not.
    pub fn run<R>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<R, CatalogError>) -> Result<R, CatalogError> {
        self.run_in(self.acquire(), f)
    }

    /// [`Self::run`], not waiting for the disk when no group is open: written
    /// to SQLite's log, it survives the process being killed, and the next
    /// synced commit makes it durable.
    pub fn run_unsynced<R>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<R, CatalogError>) -> Result<R, CatalogError> {
        let state = self.acquire();
        if state.open.is_some() {
            return self.run_in(state, f);
        }
        state.conn.pragma_update(None, "synchronous", "NORMAL")?;
        let out = f(&mut SqliteSql(&state.conn));
        state.conn.pragma_update(None, "synchronous", "FULL")?;
        out
    }

    fn run_in<R>(
        &self,
        mut state: MutexGuard<'_, State>,
        f: impl FnOnce(&mut dyn Sql) -> Result<R, CatalogError>,
    ) -> Result<R, CatalogError> {
        let Some((group, members)) = &mut state.open else { return f(&mut SqliteSql(&state.conn)) };
        *members += 1;
        let group = *group;
        match catch(|| f(&mut SqliteSql(&state.conn))) {
            Ok(out) => self.release(state, group, out),
            Err(panic) => {
                let _ = self.release(state, group, Ok(()));
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// Runs `f`'s statements in one transaction, committed (with its group)
    /// if it returns `Ok`, undone if it returns an error.
    pub fn transaction<R>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<R, CatalogError>) -> Result<R, CatalogError> {
        let mut state = self.acquire();
        let group = state.join()?;
        if let Err(e) = state.conn.execute_batch("SAVEPOINT member") {
            return self.release(state, group, Err(e.into()));
        }
        let out = catch(|| f(&mut SqliteSql(&state.conn)));
        let kept = match &out {
            Ok(Ok(_)) => state.conn.execute_batch("RELEASE member"),
            _ => state.conn.execute_batch("ROLLBACK TO member; RELEASE member"),
        };
        match out {
            Ok(out) => {
                let out = kept.map_err(CatalogError::from).and(out);
                self.release(state, group, out)
            }
            Err(panic) => {
                let _ = self.release(state, group, Ok(()));
                std::panic::resume_unwind(panic)
            }
        }
    }

    /// Ends the open group, then runs `f` on the connection alone.
    pub fn alone<R>(
        &self,
        f: impl FnOnce(&rusqlite::Connection) -> Result<R, CatalogError>,
    ) -> Result<R, CatalogError> {
        let mut state = self.acquire();
        state.end(&self.ended)?;
        f(&state.conn)
    }
}

fn catch<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::db::{Value, args};
    use std::sync::Arc;
    use std::time::Duration;

    fn open(dir: &std::path::Path) -> Arc<Sqlite> {
        let conn = rusqlite::Connection::open(dir.join("group.db")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "synchronous", "FULL").unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER PRIMARY KEY)").unwrap();
        Arc::new(Sqlite::new(conn))
    }

    fn rows(db: &Sqlite) -> Vec<i64> {
        db.run(|sql| sql.query("SELECT n FROM t ORDER BY n", &[]))
            .unwrap()
            .iter()
            .map(|r| r.get::<i64>(0).unwrap())
            .collect()
    }

    /// Transactions that come together commit in fewer commits than they
    /// are; one that fails or panics takes only its own writes with it.
    #[test]
    fn transactions_that_come_together_commit_together_and_fail_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let threads: Vec<_> = (0..32i64)
            .map(|n| {
                let db = db.clone();
                std::thread::spawn(move || {
                    db.transaction(|sql| {
                        sql.execute("INSERT INTO t (n) VALUES (?1)", args![n])?;
                        std::thread::sleep(Duration::from_millis(5));
                        match n {
                            7 => Err(CatalogError::Exists("seven".into())),
                            9 => panic!("nine"),
                            _ => Ok(n),
                        }
                    })
                })
            })
            .collect();
        let outcomes: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
        for (n, outcome) in outcomes.iter().enumerate() {
            match n {
                7 => assert!(matches!(outcome, Ok(Err(CatalogError::Exists(_))))),
                9 => assert!(outcome.is_err(), "the panic reaches its caller"),
                _ => assert_eq!(outcome.as_ref().unwrap().as_ref().unwrap(), &(n as i64)),
            }
        }
        let wanted: Vec<i64> = (0..32).filter(|n| *n != 7 && *n != 9).collect();
        assert_eq!(rows(&db), wanted);
        let groups = db.state.lock().unwrap().last;
        assert!(groups < 32, "32 transactions at once took {groups} commits");
        assert!(db.state.lock().unwrap().open.is_none(), "no group is left open");
    }

    /// A plain statement that comes while a group is open is in it, and a
    /// transaction alone is committed before it returns.
    #[test]
    fn a_transaction_alone_is_committed_when_it_returns() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.transaction(|sql| sql.execute("INSERT INTO t (n) VALUES (1)", &[])).unwrap();
        assert!(db.state.lock().unwrap().open.is_none());
        let other = rusqlite::Connection::open(dir.path().join("group.db")).unwrap();
        let seen: i64 = other.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(seen, 1, "another connection sees the commit");
        db.run_unsynced(|sql| sql.execute("INSERT INTO t (n) VALUES (?1)", &[Value::Int(2)])).unwrap();
        assert_eq!(rows(&db), vec![1, 2]);
    }
}
