//! PostgreSQL's change log as a source: a logical replication slot read
//! through the built-in `pgoutput` plugin, each source table's changes a
//! change log of its own (`changes`), with an initial snapshot taken in the
//! slot's own exported snapshot so that it hands over to the stream exactly
//! at the slot's consistent point (`snapshot`). The slot is acknowledged only
//! up to what the catalog committed (`stream`).
//!
//! In data-flow order: `server` (the connection, what the server must allow,
//! the publication and the slot), `columns` (types and values), `pgoutput`
//! (the stream's messages), `changes` (rows into Arrow), `snapshot`, `stream`.

pub mod changes;
pub mod columns;
pub mod pgoutput;
pub mod publisher;
pub mod server;
pub mod snapshot;
pub mod stream;

pub use changes::{ChangeLog, Op, Position, SourceTable};
pub use server::{PostgresConnection, Readiness};
pub use stream::{ChangeStream, Event};

use std::sync::Arc;

use anyhow::Context;
use arrow::array::RecordBatch;

use changes::BadValue;

/// What a change-log source reads: which tables, through which publication and slot.
#[derive(Debug, Clone)]
pub struct Plan {
    /// `schema.table` (or `table`, in `public`), in slot order.
    pub tables: Vec<String>,
    pub publication: String,
    pub slot: String,
    /// Copy the tables as they are first, when the slot is created.
    pub snapshot: bool,
    /// The snapshot hands a table's rows on this many at a time.
    pub chunk: usize,
}

/// An opened change log: the tables as described, the stream, and where the
/// snapshot (if one was taken) handed over to it.
pub struct Opened {
    pub tables: Vec<Arc<SourceTable>>,
    pub stream: ChangeStream,
    /// The slot's consistent point, when it was created now.
    pub created_at: Option<u64>,
    /// Snapshot rows with a value their table cannot hold, left out.
    pub bad: Vec<BadValue>,
}

/// Snapshot rows on their way to the reader: a table's slot, and rows of it.
pub type Chunks = tokio::sync::mpsc::Sender<(usize, RecordBatch)>;

/// Opens the change log of `plan`'s tables from `resume` (0: where the slot
/// is, or where it is created). The server is checked first, every problem
/// named; the publication is created when it does not exist; the slot is
/// created when it does not exist, and then (with `plan.snapshot`) each
/// table is copied in the slot's snapshot, sent to `rows` (slot index, rows)
/// a chunk at a time, before the stream starts where the snapshot ends.
pub async fn open(connection: &PostgresConnection, plan: &Plan, resume: u64, rows: Chunks) -> anyhow::Result<Opened> {
    let client = connection.connect().await?;
    Readiness::check(&client, &connection.user, &plan.slot).await?.require(&connection.location())?;
    let mut tables = Vec::with_capacity(plan.tables.len());
    for name in &plan.tables {
        tables.push(Arc::new(server::describe(&client, name).await?));
    }
    server::ensure_publication(&client, &plan.publication, &tables).await?;
    let existing = server::slot(&client, &plan.slot).await?;
    let mut session = stream::session(connection, &plan.slot, &plan.publication, resume).await?;
    let (mut created_at, mut bad) = (None, Vec::new());
    match existing {
        Some(slot) => slot.usable(&plan.slot, &connection.database)?,
        None => {
            let slot = snapshot::create_slot(&mut session, &plan.slot).await?;
            created_at = Some(slot.consistent_point);
            if plan.snapshot {
                let snapshot = snapshot::Snapshot::open(&client, &slot).await?;
                for (i, table) in tables.iter().enumerate() {
                    let mut log = ChangeLog::new(table.clone());
                    snapshot.copy(&mut log, plan.chunk, &mut bad, (i, &rows)).await?;
                }
                snapshot.close().await?;
            }
            drop(rows); // the snapshot is whole
        }
    }
    let from = created_at.unwrap_or(resume);
    let stream = ChangeStream::start(session, &tables, from, client)
        .await
        .with_context(|| format!("streaming slot {} of {}", plan.slot, connection.location()))?;
    Ok(Opened { tables, stream, created_at, bad })
}

/// PostgreSQL's epoch (2000-01-01) in microseconds after Unix's.
const PG_EPOCH_US: i64 = 946_684_800_000_000;

/// `16/B374D848` → the LSN as a number.
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.trim().split_once('/')?;
    Some((u64::from_str_radix(high, 16).ok()? << 32) | u64::from_str_radix(low, 16).ok()?)
}

/// The LSN as PostgreSQL writes it.
pub fn format_lsn(lsn: u64) -> String {
    format!("{:X}/{:X}", lsn >> 32, lsn & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    #[test]
    fn lsns_read_and_write() {
        assert_eq!(super::parse_lsn("16/B374D848"), Some(0x16_B374_D848));
        assert_eq!(super::format_lsn(0x16_B374_D848), "16/B374D848");
        assert_eq!(super::parse_lsn("nope"), None);
    }
}
