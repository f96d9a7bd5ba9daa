//! The catalog's database: SQLite in the data directory (the embedded
//! default) or a PostgreSQL server (the catalog several nodes share).
//!
//! Every statement is written once, in the SQL both understand, with
//! SQLite's `?1` parameters (renumbered `$1` for PostgreSQL); values cross as
//! [`Value`]s, rows come back as [`Row`]s. What differs lives here: opening,
//! transactions (SQLite takes the write lock at `BEGIN IMMEDIATE`; PostgreSQL
//! runs at read committed, and the catalog's compare-and-set is written as
//! conditional writes, which are exact under it), migrations and errors.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::CatalogError;

/// One value in or out of a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v.into())
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(v.into())
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(v.into())
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_owned())
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Blob(v.to_vec())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A statement's parameters: `args![a, b]`.
macro_rules! args {
    ($($v:expr),* $(,)?) => { &[$($crate::catalog::db::Value::from($v)),*][..] };
}
pub(crate) use args;

/// What a column's value can be read as.
pub trait FromValue: Sized {
    fn from_value(v: &Value) -> Option<Self>;
}
impl FromValue for i64 {
    fn from_value(v: &Value) -> Option<Self> {
        if let Value::Int(i) = v { Some(*i) } else { None }
    }
}
impl FromValue for i32 {
    fn from_value(v: &Value) -> Option<Self> {
        i64::from_value(v).and_then(|i| i.try_into().ok())
    }
}
impl FromValue for u64 {
    fn from_value(v: &Value) -> Option<Self> {
        i64::from_value(v).map(|i| i as u64)
    }
}
impl FromValue for bool {
    fn from_value(v: &Value) -> Option<Self> {
        i64::from_value(v).map(|i| i != 0)
    }
}
impl FromValue for String {
    fn from_value(v: &Value) -> Option<Self> {
        if let Value::Text(s) = v { Some(s.clone()) } else { None }
    }
}
impl FromValue for Vec<u8> {
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Blob(b) => Some(b.clone()),
            Value::Text(s) => Some(s.as_bytes().to_vec()),
            _ => None,
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> Option<Self> {
        match v {
            Value::Null => Some(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// One row of a result.
#[derive(Debug)]
pub struct Row(Vec<Value>);

impl Row {
    pub fn get<T: FromValue>(&self, i: usize) -> Result<T, CatalogError> {
        let v = self.0.get(i).unwrap_or(&Value::Null);
        T::from_value(v).ok_or_else(|| CatalogError::Sql {
            message: format!("column {i} holds {v:?}, not a {}", std::any::type_name::<T>()),
            unique_violation: false,
        })
    }
}

/// Runs statements: inside a transaction, or one at a time.
pub trait Sql {
    /// Runs statements that take no parameters and return nothing (DDL).
    fn batch(&mut self, sql: &str) -> Result<(), CatalogError>;
    /// Runs a statement; returns how many rows it changed.
    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64, CatalogError>;
    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>, CatalogError>;

    fn query_opt(&mut self, sql: &str, args: &[Value]) -> Result<Option<Row>, CatalogError> {
        Ok(self.query(sql, args)?.into_iter().next())
    }

    fn query_one(&mut self, sql: &str, args: &[Value]) -> Result<Row, CatalogError> {
        self.query_opt(sql, args)?.ok_or_else(|| CatalogError::Sql {
            message: format!("no row for `{}`", sql.split_whitespace().collect::<Vec<_>>().join(" ")),
            unique_violation: false,
        })
    }
}

/// The catalog's database.
pub enum Db {
    Sqlite(super::group_commit::Sqlite),
    Postgres(Mutex<postgres::Session>),
}

impl Db {
    /// Runs `f`'s statements one at a time (each commits on its own; in
    /// SQLite, with the transactions committing at that moment, if any).
    pub fn run<R>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<R, CatalogError>) -> Result<R, CatalogError> {
        match self {
            Db::Sqlite(sqlite) => sqlite.run(f),
            Db::Postgres(session) => f(&mut *lock(session)),
        }
    }

    /// [`Self::run`] for bookkeeping that a power loss may take without harm
    /// (how long a committed batch's steps took). SQLite writes it to its log
    /// without waiting for the disk: it survives the process being killed,
    /// and the next synced commit makes it durable. PostgreSQL: as `run`.
    pub fn run_unsynced<R>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<R, CatalogError>) -> Result<R, CatalogError> {
        match self {
            Db::Sqlite(sqlite) => sqlite.run_unsynced(f),
            Db::Postgres(session) => f(&mut *lock(session)),
        }
    }

    /// Runs `f`'s statements in one transaction: committed if it returns
    /// `Ok`, rolled back if it returns an error. SQLite takes its write lock
    /// at the start, so transactions run one after another, those that come
    /// together committed together (`group_commit`); PostgreSQL runs them
    /// side by side at read committed.
    pub fn transaction<R>(&self, f: impl FnOnce(&mut dyn Sql) -> Result<R, CatalogError>) -> Result<R, CatalogError> {
        match self {
            Db::Sqlite(sqlite) => sqlite.transaction(f),
            Db::Postgres(session) => lock(session).transaction(f),
        }
    }

    /// SQLite: empties the write-ahead log into the database file, so what
    /// was overwritten leaves the log too. PostgreSQL: nothing.
    pub fn truncate_log(&self) -> Result<(), CatalogError> {
        if let Db::Sqlite(sqlite) = self {
            sqlite.alone(|conn| Ok(conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?))?;
        }
        Ok(())
    }

    /// Which database this is, for messages: `SQLite` or `PostgreSQL`.
    pub fn kind(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "SQLite",
            Db::Postgres(_) => "PostgreSQL",
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// SQLite.

/// Opens the SQLite catalog file, applying the migrations it lacks.
pub fn open_sqlite(path: &std::path::Path, migrations: &[Migration]) -> Result<Db, CatalogError> {
    let mut conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(30))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // FULL: a commit is on disk before we tell Kafka, whatever happens to the machine.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // What is deleted or overwritten is zeroed, not left in free pages.
    conn.pragma_update(None, "secure_delete", "ON")?;
    // Every statement the catalog runs stays prepared (16 by default: they were prepared again and again).
    conn.set_prepared_statement_cache_capacity(256);
    // ...and runs the plan it was prepared with. Without this, SQLite plans
    // again for each new value bound where a value might pick a better plan
    // (a partial index's condition, a LIKE pattern): every query by
    // `table_id = ?` was parsed and planned anew, a tenth of a busy node's CPU.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    let version = |conn: &rusqlite::Connection| conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0));
    if version(&conn)? as usize != migrations.len() {
        // One process at a time: two opening a new catalog at once would both
        // find it empty, and the second to create its tables would fail.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let current = version(&tx)? as usize;
        if current > migrations.len() {
            return Err(newer_schema(current, migrations.len()));
        }
        for m in &migrations[current..] {
            tx.execute_batch(m.sqlite)?;
        }
        tx.pragma_update(None, "user_version", migrations.len() as i64)?;
        tx.commit()?;
    }
    Ok(Db::Sqlite(super::group_commit::Sqlite::new(conn)))
}

/// A catalog a newer weir has migrated: this one must not write to it.
fn newer_schema(current: usize, known: usize) -> CatalogError {
    CatalogError::Sql {
        message: format!(
            "the catalog's schema is at version {current}, newer than this weir knows ({known}): upgrade weir"
        ),
        unique_violation: false,
    }
}

/// One step of the catalog's schema, in each database's DDL.
pub struct Migration {
    pub sqlite: &'static str,
    pub postgres: &'static str,
}

pub(super) struct SqliteSql<'a>(pub(super) &'a rusqlite::Connection);

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::ValueRef;
        Ok(rusqlite::types::ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

impl Sql for SqliteSql<'_> {
    fn batch(&mut self, sql: &str) -> Result<(), CatalogError> {
        Ok(self.0.execute_batch(sql)?)
    }

    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64, CatalogError> {
        let mut stmt = self.0.prepare_cached(sql)?;
        Ok(stmt.execute(rusqlite::params_from_iter(args))? as u64)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>, CatalogError> {
        use rusqlite::types::ValueRef;
        let mut stmt = self.0.prepare_cached(sql)?;
        let n = stmt.column_count();
        let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| {
            let mut values = Vec::with_capacity(n);
            for i in 0..n {
                values.push(match r.get_ref(i)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(i) => Value::Int(i),
                    ValueRef::Real(f) => Value::Text(f.to_string()),
                    ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Value::Blob(b.to_vec()),
                });
            }
            Ok(Row(values))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

impl From<rusqlite::Error> for CatalogError {
    fn from(e: rusqlite::Error) -> Self {
        // A unique or primary key constraint, as a bare or extended code.
        let unique_violation = matches!(&e, rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::ConstraintViolation
                && matches!(f.extended_code, 1555 | 2067 | 19));
        CatalogError::Sql { message: e.to_string(), unique_violation }
    }
}

pub mod postgres {
    //! The PostgreSQL catalog: one session (a connection, reconnected when
    //! it drops, and its prepared statements).
    //!
    //! The connection's socket is driven by a thread of its own; statements
    //! are sent to it and awaited with a plain executor, so the catalog can
    //! be called from anywhere, the async reactor's threads included (as
    //! SQLite's is), without nesting runtimes.

    use super::*;
    use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

    pub struct Session {
        config: tokio_postgres::Config,
        /// Where it points, without its password: for messages.
        shown: String,
        client: Option<tokio_postgres::Client>,
        statements: HashMap<String, tokio_postgres::Statement>,
        /// Inside a transaction a dropped connection is an error, never a
        /// silent reconnect that would run the rest outside it.
        in_transaction: bool,
    }

    /// Connects to the catalog at `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB`),
    /// applying the migrations it lacks. Nodes starting together migrate one at a time.
    pub fn open(url: &str, migrations: &[Migration]) -> Result<Db, CatalogError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| CatalogError::Sql {
            message: format!("the catalog URL is not a PostgreSQL URL (postgres://USER@HOST:PORT/DB): {e}"),
            unique_violation: false,
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("weir");
        }
        let shown = shown(&config);
        let mut session = Session { config, shown, client: None, statements: HashMap::new(), in_transaction: false };
        session.migrate(migrations)?;
        Ok(Db::Postgres(Mutex::new(session)))
    }

    fn shown(config: &tokio_postgres::Config) -> String {
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "localhost".into(),
        };
        let port = config.get_ports().first().copied().unwrap_or(5432);
        format!(
            "postgres://{}@{host}:{port}/{}",
            config.get_user().unwrap_or(""),
            config.get_dbname().unwrap_or(config.get_user().unwrap_or(""))
        )
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        futures::executor::block_on(f)
    }

    impl Session {
        /// The connection, opened again if it dropped (a server restart, a
        /// network cut): statements in flight then fail, the next ones work.
        fn client(&mut self) -> Result<&tokio_postgres::Client, CatalogError> {
            if self.client.as_ref().is_none_or(|c| c.is_closed()) {
                if self.in_transaction {
                    return Err(CatalogError::Sql {
                        message: format!(
                            "the connection to the catalog at {} dropped inside a transaction: nothing of it was committed",
                            self.shown
                        ),
                        unique_violation: false,
                    });
                }
                self.statements.clear();
                self.client = None;
                self.client = Some(self.connect()?);
            }
            Ok(self.client.as_ref().expect("just connected"))
        }

        fn connect(&self) -> Result<tokio_postgres::Client, CatalogError> {
            let config = self.config.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            let shown = self.shown.clone();
            std::thread::Builder::new()
                .name("weir-catalog-pg".into())
                .spawn(move || {
                    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                        Ok(rt) => rt,
                        Err(e) => return drop(tx.send(Err(e.to_string()))),
                    };
                    rt.block_on(async move {
                        match config.connect(tokio_postgres::NoTls).await {
                            Ok((client, connection)) => {
                                if tx.send(Ok(client)).is_ok() {
                                    // Runs until the client is dropped or the server goes away.
                                    let _ = connection.await;
                                }
                            }
                            Err(e) => drop(tx.send(Err(describe(&e)))),
                        }
                    })
                })
                .map_err(|e| CatalogError::Sql {
                    message: format!("a thread for the catalog: {e}"),
                    unique_violation: false,
                })?;
            match rx.recv() {
                Ok(Ok(client)) => Ok(client),
                Ok(Err(e)) => Err(CatalogError::Sql {
                    message: format!(
                        "cannot reach the catalog at {shown}: {e} (is PostgreSQL running, and is the URL right?)"
                    ),
                    unique_violation: false,
                }),
                Err(_) => Err(CatalogError::Sql {
                    message: format!("cannot reach the catalog at {shown}"),
                    unique_violation: false,
                }),
            }
        }

        fn statement(&mut self, sql: &str) -> Result<tokio_postgres::Statement, CatalogError> {
            if let Some(s) = self.statements.get(sql) {
                return Ok(s.clone());
            }
            let text = numbered(sql);
            let statement = block_on(self.client()?.prepare(&text))?;
            self.statements.insert(sql.to_owned(), statement.clone());
            Ok(statement)
        }

        pub(super) fn transaction<R>(
            &mut self,
            f: impl FnOnce(&mut dyn Sql) -> Result<R, CatalogError>,
        ) -> Result<R, CatalogError> {
            block_on(self.client()?.batch_execute("BEGIN"))?;
            self.in_transaction = true;
            let out = f(self).and_then(|out| {
                block_on(self.client()?.batch_execute("COMMIT"))?;
                Ok(out)
            });
            self.in_transaction = false;
            if out.is_err() {
                // A dropped connection rolls back by itself.
                if let Some(client) = self.client.as_ref().filter(|c| !c.is_closed()) {
                    let _ = block_on(client.batch_execute("ROLLBACK"));
                }
            }
            out
        }

        fn migrate(&mut self, migrations: &[Migration]) -> Result<(), CatalogError> {
            self.transaction(|sql| {
                // One node at a time: the lock is held to the transaction's end.
                sql.execute("SELECT pg_advisory_xact_lock(7751632)", &[])?;
                sql.batch("CREATE TABLE IF NOT EXISTS weir_schema (version BIGINT NOT NULL)")?;
                let current: Option<i64> = sql.query_one("SELECT MAX(version) FROM weir_schema", &[])?.get(0)?;
                let current = current.unwrap_or(0) as usize;
                if current > migrations.len() {
                    return Err(super::newer_schema(current, migrations.len()));
                }
                for (i, m) in migrations.iter().enumerate().skip(current) {
                    sql.batch(m.postgres)?;
                    sql.execute("INSERT INTO weir_schema (version) VALUES (?1)", args![(i + 1) as i64])?;
                }
                Ok(())
            })
        }
    }

    impl Sql for Session {
        fn batch(&mut self, sql: &str) -> Result<(), CatalogError> {
            Ok(block_on(self.client()?.batch_execute(sql))?)
        }

        fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64, CatalogError> {
            let statement = self.statement(sql)?;
            let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|v| v as _).collect();
            Ok(block_on(self.client()?.execute(&statement, &params))?)
        }

        fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>, CatalogError> {
            let statement = self.statement(sql)?;
            let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|v| v as _).collect();
            let rows = block_on(self.client()?.query(&statement, &params))?;
            rows.iter()
                .map(|r| (0..r.len()).map(|i| r.try_get::<_, Value>(i)).collect::<Result<Vec<_>, _>>().map(Row))
                .collect::<Result<_, _>>()
                .map_err(Into::into)
        }
    }

    /// `?1` parameters as PostgreSQL's `$1` (outside quoted text).
    pub(super) fn numbered(sql: &str) -> String {
        let mut out = String::with_capacity(sql.len());
        let mut quoted = false;
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => quoted = !quoted,
                '?' if !quoted && chars.peek().is_some_and(char::is_ascii_digit) => {
                    out.push('$');
                    continue;
                }
                _ => {}
            }
            out.push(c);
        }
        out
    }

    type BoxError = Box<dyn std::error::Error + Sync + Send>;

    impl ToSql for Value {
        fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, BoxError> {
            match (self, ty) {
                (Value::Null, _) => Ok(IsNull::Yes),
                (Value::Int(i), &Type::INT8) => i.to_sql(ty, out),
                (Value::Int(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
                (Value::Int(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
                (Value::Int(i), &Type::BOOL) => (*i != 0).to_sql(ty, out),
                (Value::Text(s), _) if <&str as ToSql>::accepts(ty) => s.as_str().to_sql(ty, out),
                (Value::Blob(b), &Type::BYTEA) => b.as_slice().to_sql(ty, out),
                (v, ty) => Err(format!("a {v:?} cannot be a parameter of type {ty}").into()),
            }
        }

        fn accepts(_: &Type) -> bool {
            true
        }

        to_sql_checked!();
    }

    impl<'a> FromSql<'a> for Value {
        fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
            Ok(match *ty {
                Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
                Type::INT4 => Value::Int(i32::from_sql(ty, raw)?.into()),
                Type::INT2 => Value::Int(i16::from_sql(ty, raw)?.into()),
                Type::BOOL => Value::Int(bool::from_sql(ty, raw)?.into()),
                Type::BYTEA => Value::Blob(raw.to_vec()),
                _ if <&str as FromSql>::accepts(ty) => Value::Text(<&str>::from_sql(ty, raw)?.to_owned()),
                _ => return Err(format!("a catalog column of type {ty}").into()),
            })
        }

        fn from_sql_null(_: &Type) -> Result<Self, BoxError> {
            Ok(Value::Null)
        }

        fn accepts(_: &Type) -> bool {
            true
        }
    }

    /// The server's own words, where it sent any.
    fn describe(e: &tokio_postgres::Error) -> String {
        match e.as_db_error() {
            Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
            None => {
                let mut text = e.to_string();
                let mut source = std::error::Error::source(e);
                while let Some(s) = source {
                    text.push_str(&format!(": {s}"));
                    source = s.source();
                }
                text
            }
        }
    }

    impl From<tokio_postgres::Error> for CatalogError {
        fn from(e: tokio_postgres::Error) -> Self {
            let unique_violation = e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION);
            CatalogError::Sql { message: describe(&e), unique_violation }
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn parameters_are_renumbered_outside_quoted_text() {
            assert_eq!(
                super::numbered("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d IN (?2, ?10)"),
                "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d IN ($2, $10)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Db, open_sqlite};

    #[test]
    fn a_cached_query_keeps_its_plan_whatever_is_bound() {
        let dir = tempfile::tempdir().unwrap();
        let db = open_sqlite(&dir.path().join("catalog.db"), crate::catalog::migrations::MIGRATIONS).unwrap();
        let Db::Sqlite(sqlite) = &db else { unreachable!("opened SQLite") };
        // A condition a partial index of the table has too: SQLite would plan it
        // again for each new value (`table_versions_unlogged`).
        let sql = "SELECT COALESCE(MAX(version), 0) + 1 FROM table_versions WHERE table_id = ?1";
        let reprepared = sqlite
            .alone(|conn| {
                for table in 1..=3 {
                    conn.prepare_cached(sql)?.query_row([table], |_| Ok(()))?;
                }
                Ok(conn.prepare_cached(sql)?.get_status(rusqlite::StatementStatus::RePrepare))
            })
            .unwrap();
        assert_eq!(reprepared, 0, "prepared again on a new value");
    }
}
