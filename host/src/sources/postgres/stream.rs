//! The replication stream, a transaction at a time: each change of a source
//! table added to that table's change log, and the transaction's commit
//! position handed back once it is whole, so that a batch only ever closes
//! between transactions. The slot hears of a position only when told to
//! (`acknowledge`), after the catalog committed it; a transaction at or
//! before the position resumed from is read past, never added twice.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, bail};
use arrow::array::RecordBatch;
use pgwire_replication::{Lsn, ReplicationClient, ReplicationEvent};

use super::changes::{BadValue, ChangeLog, Op, Position, SourceTable};
use super::pgoutput::{self, Message, Relation, RelationColumn};
use super::server::PostgresConnection;

/// What the stream has for the reader.
#[derive(Debug)]
pub enum Event {
    /// A whole transaction's changes were added to the logs (`changes` of them,
    /// none when it touched no source table). `bad` are the changes with a
    /// value their table cannot hold, left out.
    Committed { commit_lsn: u64, end_lsn: u64, changes: u64, bad: Vec<BadValue> },
    /// Nothing is in flight, and the server has sent everything up to `wal_end`.
    Idle { wal_end: u64 },
    /// A table (`slot`) has new columns (nullable, at its end), which its log
    /// now has too: `before` are the rows read so far under its old columns,
    /// finished (`None`: there were none). Can come in the middle of a
    /// transaction; reading goes on from there.
    Evolved { slot: usize, before: Option<RecordBatch> },
    /// The logs hold what [`ChangeStream::hold_at_most`] allows, in the middle
    /// of a transaction: take their rows out before reading on.
    Full,
    /// The server ended the stream.
    Ended,
}

/// A table's columns changed in a way its change log cannot follow.
#[derive(Debug, thiserror::Error)]
#[error("the columns of {table} changed: {change}. weir stopped reading it, its position unmoved")]
pub struct SchemaChanged {
    pub table: String,
    pub change: String,
}

/// The transaction being read.
struct Transaction {
    xid: u32,
    commit_lsn: u64,
    commit_ts: i64,
    ordinal: i64,
    /// Committed before the position resumed from: read past.
    skip: bool,
    bad: Vec<BadValue>,
}

/// A started replication stream over some tables' change logs.
pub struct ChangeStream {
    client: ReplicationClient,
    /// A table's oid → its index among the logs the reader passes.
    tables: HashMap<u32, usize>,
    described: Vec<Arc<SourceTable>>,
    resume: u64,
    open: Option<Transaction>,
    /// An ordinary session, to describe columns a table gains.
    sql: tokio_postgres::Client,
    /// Columns a table gained, not yet followed (kept across a cancelled read).
    growing: Option<(usize, Vec<RelationColumn>)>,
    /// What the logs may hold in the middle of a transaction (bytes read).
    hold_at_most: u64,
}

/// A replication session that has not started (to create the slot first).
pub async fn session(
    connection: &PostgresConnection,
    slot: &str,
    publication: &str,
    start: u64,
) -> anyhow::Result<ReplicationClient> {
    let config = connection
        .replication(slot, publication)
        .with_start_lsn(Lsn(start))
        // Until told otherwise, the slot hears the position resumed from, never more.
        .with_ack_lsn(Lsn(start))
        // An acknowledged position reaches the server within a second.
        .with_status_interval(std::time::Duration::from_secs(1));
    ReplicationClient::connect_gated(config)
        .await
        .with_context(|| format!("opening a replication session to {}", connection.location()))
}

impl ChangeStream {
    /// Starts streaming on `session` (from its start position, or the slot's
    /// confirmed position when that is 0); transactions that committed before
    /// `resume` are read past.
    pub async fn start(
        mut session: ReplicationClient,
        tables: &[Arc<SourceTable>],
        resume: u64,
        sql: tokio_postgres::Client,
    ) -> anyhow::Result<Self> {
        session.start().await?;
        session.wait_started().await.context("starting replication")?;
        Ok(Self {
            client: session,
            tables: tables.iter().enumerate().map(|(i, t)| (t.oid, i)).collect(),
            described: tables.to_vec(),
            resume,
            open: None,
            sql,
            growing: None,
            hold_at_most: u64::MAX,
        })
    }

    /// Past `bytes` in the logs in the middle of a transaction, [`Event::Full`]
    /// comes, so that no transaction is ever held whole.
    pub fn hold_at_most(&mut self, bytes: u64) {
        self.hold_at_most = bytes;
    }

    /// Whether a transaction is being read: a batch must not close inside it.
    pub fn in_transaction(&self) -> bool {
        self.open.is_some()
    }

    /// Tells the slot that everything before `lsn` is committed: the server
    /// may recycle that WAL, and a restart begins there.
    pub fn acknowledge(&self, lsn: u64) {
        self.client.update_applied_lsn(Lsn(lsn));
    }

    /// Reads until a transaction is whole, the stream is idle, or it ends.
    /// Safe to cancel: what was read stays read.
    pub async fn next(&mut self, logs: &mut [ChangeLog]) -> anyhow::Result<Event> {
        loop {
            if let Some((slot, added)) = &self.growing {
                let grown = Arc::new(super::server::with_added(&self.sql, &self.described[*slot], added).await?);
                let slot = *slot;
                self.growing = None;
                self.described[slot] = grown.clone();
                return Ok(Event::Evolved { slot, before: logs[slot].evolve(grown) });
            }
            let Some(event) = self.client.recv().await.context("reading the replication stream")? else {
                return Ok(Event::Ended);
            };
            match event {
                ReplicationEvent::Begin { final_lsn, xid, commit_time_micros } => {
                    self.open = Some(Transaction {
                        xid,
                        commit_lsn: final_lsn.0,
                        commit_ts: commit_time_micros + super::PG_EPOCH_US,
                        ordinal: 0,
                        skip: final_lsn.0 < self.resume,
                        bad: Vec::new(),
                    });
                }
                ReplicationEvent::XLogData { data, .. } => {
                    let message = pgoutput::parse(&data)?;
                    self.apply(message, logs)?;
                    if self.open.is_some() && logs.iter().map(ChangeLog::bytes).sum::<u64>() >= self.hold_at_most {
                        return Ok(Event::Full);
                    }
                }
                ReplicationEvent::Commit { lsn, end_lsn, .. } => {
                    let Some(tx) = self.open.take() else { bail!("a commit at {lsn} with no transaction begun") };
                    if tx.skip {
                        continue;
                    }
                    let changes = tx.ordinal as u64;
                    return Ok(Event::Committed { commit_lsn: lsn.0, end_lsn: end_lsn.0, changes, bad: tx.bad });
                }
                ReplicationEvent::KeepAlive { wal_end, .. } if self.open.is_none() => {
                    return Ok(Event::Idle { wal_end: wal_end.0 });
                }
                ReplicationEvent::StoppedAt { .. } => return Ok(Event::Ended),
                _ => {}
            }
        }
    }

    fn apply(&mut self, message: Message<'_>, logs: &mut [ChangeLog]) -> anyhow::Result<()> {
        let (tables, described) = (&self.tables, &self.described);
        let at = |tx: &mut Transaction| {
            let position =
                Position { lsn: tx.commit_lsn, tx: Some(tx.xid), ordinal: tx.ordinal, commit_ts: Some(tx.commit_ts) };
            tx.ordinal += 1;
            position
        };
        if let Message::Relation(relation) = &message {
            if let Some(&i) = tables.get(&relation.id) {
                let added = added_columns(&described[i], relation)?;
                if !added.is_empty() {
                    self.growing = Some((i, added.to_vec()));
                }
            }
            return Ok(());
        }
        let Some(tx) = self.open.as_mut() else { bail!("a change outside a transaction") };
        if tx.skip {
            return Ok(());
        }
        let (relation, op, new, old) = match &message {
            Message::Insert { relation, new } => (*relation, Op::Insert, Some(new), None),
            Message::Update { relation, old, new } => (*relation, Op::Update, Some(new), old.as_ref()),
            Message::Delete { relation, old } => (*relation, Op::Delete, None, Some(old)),
            Message::Truncate { relations } => {
                for id in relations {
                    if let Some(&i) = tables.get(id) {
                        let position = at(tx);
                        logs[i].change(Op::Truncate, None, None, position).expect("a truncate has no values");
                    }
                }
                return Ok(());
            }
            Message::Relation(_) | Message::Other => return Ok(()),
        };
        let Some(&i) = tables.get(&relation) else { return Ok(()) };
        let position = at(tx);
        if let Err(bad) = logs[i].change(op, new.map(Vec::as_slice), old.map(Vec::as_slice), position) {
            tx.bad.push(bad);
        }
        Ok(())
    }
}

/// The columns a table gained at its end; refuses a table whose columns its
/// change log cannot follow (one dropped, renamed, retyped or moved).
fn added_columns<'a>(table: &SourceTable, relation: &'a Relation) -> Result<&'a [RelationColumn], SchemaChanged> {
    let changed = |change: String| SchemaChanged { table: table.qualified(), change };
    let new: Vec<&RelationColumn> =
        relation.columns.iter().filter(|c| !table.columns.iter().any(|t| t.name == c.name)).collect();
    for (i, column) in table.columns.iter().enumerate() {
        let Some(now) = relation.columns.iter().find(|c| c.name == column.name) else {
            return Err(changed(match new.as_slice() {
                [renamed] if relation.columns.len() == table.columns.len() => {
                    format!("column `{}` ({}) was renamed to `{}`", column.name, column.pg_type, renamed.name)
                }
                _ => format!("column `{}` ({}) was dropped", column.name, column.pg_type),
            }));
        };
        let retyped = now.type_oid != column.type_oid || (now.typmod != column.typmod && column.ty.typmod_matters());
        if retyped {
            return Err(changed(format!(
                "column `{}` was {} and is now another type (oid {}, modifier {})",
                column.name, column.pg_type, now.type_oid, now.typmod
            )));
        }
        if relation.columns.get(i).map(|c| &c.name) != Some(&column.name) {
            return Err(changed(format!("column `{}` was dropped and added again", column.name)));
        }
    }
    Ok(&relation.columns[table.columns.len()..])
}
