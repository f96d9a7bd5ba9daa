//! A publisher whose source is PostgreSQL's change log, run: its slot found
//! or made (`start`), the tables' snapshot put through the plugin and
//! committed as one version of each output table at the slot's consistent
//! point (`snapshot`), then the stream read a transaction at a time into each
//! table's change log until the rollover closes the batch (`stream`), which
//! goes through the plugin, one input slot a source table, and commits a
//! version of each output table with the batch's end position in one catalog
//! transaction (`process`). The slot hears of a position only after the
//! catalog has it.
//!
//! The position is kept like a Kafka partition's offset, under the slot's
//! name, partition 0: the end LSN of the last committed transaction. While a
//! snapshot is taken it is 0, so that a crash in the middle of one starts it
//! again on a new slot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use arrow::array::{RecordBatch, new_null_array};
use arrow::datatypes::SchemaRef;
use tokio::sync::{mpsc, watch};

use super::changes::{BadValue, ChangeLog};
use super::server::{self, PostgresConnection};
use super::stream::{ChangeStream, Event};
use super::{Plan, format_lsn};
use crate::catalog::{CatalogError, Execution, PartitionRange, Timings, Txn, now_ms};
use crate::formats::{DeadLetter, RawMessage};
use crate::plugin::frames::Unframed;
use crate::plugin::{Declared, Limits, Plugin, PluginLog};
use crate::publisher::change_log::{PostgresCdcSource, Snapshot, StartFrom};
use crate::publisher::source::RolloverReason;
use crate::stream::stage::{self, TableSink, TableSinks};
use crate::stream::{Node, WorkerEvent, WorkerExit, WorkerOptions};
use crate::tables;
use crate::tables::file;

/// A change-log publisher, resolved and ready to run.
#[derive(Clone)]
pub struct ChangeLogPublisher {
    pub collection: String,
    pub name: String,
    pub connection: PostgresConnection,
    pub source: PostgresCdcSource,
    /// One a source table, in order.
    pub output_tables: Vec<String>,
    pub flush_interval_mins: u64,
    pub plugin: Plugin,
    pub limits: Limits,
}

impl ChangeLogPublisher {
    /// `collection/name`, the publisher's identity in the catalog.
    pub fn id(&self) -> String {
        format!("{}/{}", self.collection, self.name)
    }

    /// What its position is kept under in the catalog: its slot.
    pub fn position_key(&self) -> String {
        format!("postgres:{}", self.source.slot)
    }
}

/// Rows a plugin call takes at most (the snapshot's, or a transaction's too
/// large for one call): a batch larger than this still commits as one version.
const CALL_BYTES: usize = 64 << 20;

/// How often an idle slot's position is recorded and acknowledged.
const IDLE_ACK_EVERY: Duration = Duration::from_secs(10);

/// The part of an open batch that went through the plugin already: the
/// output tables written so far, and what the plugin logged.
struct Partial {
    sinks: TableSinks,
    log: PluginLog,
}

/// A batch of changes, closed.
struct Closed {
    reason: RolloverReason,
    /// Each source table's rows, in slot order.
    slots: Vec<Vec<RecordBatch>>,
    partial: Option<Partial>,
    changes: u64,
    bytes: u64,
    bad: Vec<BadValue>,
    /// Where it starts (the position committed before it) and ends (the end
    /// LSN of its last transaction).
    from: Option<i64>,
    start: u64,
    end: u64,
}

/// Runs a change-log publisher until `shutdown` turns true (the open batch is
/// then committed within the deadline, or left to be read again) or it fails.
pub async fn run(
    publisher: ChangeLogPublisher,
    node: Node,
    options: WorkerOptions,
    events: Option<mpsc::UnboundedSender<WorkerEvent>>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<WorkerExit> {
    crate::stream::sync_tables(&node, &publisher.id(), &publisher.collection, &publisher.output_tables).await?;
    let mut worker =
        Worker { id: publisher.id(), key: publisher.position_key(), publisher, node, options, events, shutdown };
    worker.run().await
}

struct Worker {
    publisher: ChangeLogPublisher,
    id: String,
    /// The position's key in the catalog.
    key: String,
    node: Node,
    options: WorkerOptions,
    events: Option<mpsc::UnboundedSender<WorkerEvent>>,
    shutdown: watch::Receiver<bool>,
}

impl Worker {
    fn emit(&self, event: WorkerEvent) {
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }

    fn position(&self) -> anyhow::Result<Option<i64>> {
        Ok(self.node.catalog.offsets(&self.id, &self.key)?.get(&0).copied())
    }

    async fn run(&mut self) -> anyhow::Result<WorkerExit> {
        let (snapshot, resume) = self.start().await?;
        if snapshot && self.position()?.is_none() {
            // Marks the snapshot begun: a crash before it commits starts it again.
            self.node.catalog.set_position(&self.id, &self.key, 0, None, 0)?;
        }
        let source = &self.publisher.source;
        let plan = Plan {
            tables: source.tables.clone(),
            publication: source.publication.clone(),
            slot: source.slot.clone(),
            snapshot,
            chunk: 64 * 1024,
        };
        let (chunks, mut received) = mpsc::channel(2);
        let connection = self.publisher.connection.clone();
        let opening = tokio::spawn(async move { super::open(&connection, &plan, resume, chunks).await });
        let (mut sinks, mut rows, mut snapshot_log) = (None, 0u64, PluginLog::default());
        let mut shutdown_seen = self.shutdown.clone();
        if snapshot {
            let mut held: Vec<Vec<RecordBatch>> = vec![Vec::new(); self.publisher.output_tables.len()];
            let mut bytes = 0;
            let started = Instant::now();
            loop {
                let chunk = tokio::select! {
                    chunk = received.recv() => chunk,
                    _ = shutdown_seen.wait_for(|stop| *stop) => {
                        opening.abort();
                        tracing::info!(publisher = %self.id, "stopped during the snapshot: it starts again on a new slot");
                        return Ok(WorkerExit::Shutdown);
                    }
                };
                let last = chunk.is_none();
                crate::crash::point("during-snapshot");
                if let Some((slot, batch)) = chunk {
                    (bytes, rows) = (bytes + batch.get_array_memory_size(), rows + batch.num_rows() as u64);
                    held[slot].push(batch);
                }
                if (last && held.iter().any(|h| !h.is_empty())) || bytes >= CALL_BYTES {
                    let slots = std::mem::replace(&mut held, vec![Vec::new(); self.publisher.output_tables.len()]);
                    let output = sinks.take().unwrap_or_else(|| self.sinks(0, 0));
                    let run = self.publish(slots, output).await;
                    snapshot_log.lines.extend(run.log.lines);
                    sinks = Some(run.outcome.map_err(|e| anyhow::anyhow!("the plugin failed on the snapshot: {e}"))?);
                    bytes = 0;
                }
                if last {
                    break;
                }
            }
            tracing::info!(publisher = %self.id, rows, took = ?started.elapsed(), "snapshot read");
        }
        let opened = opening.await.expect("opening does not panic")?;
        let mut position = self.position()?;
        if let Some(at) = opened.created_at.filter(|_| snapshot) {
            let output = sinks.unwrap_or_else(|| self.sinks(0, 0));
            let mut bad = opened.bad;
            // A snapshot row's place is its place among the snapshot's bad rows (each table's count from 0).
            bad.iter_mut().enumerate().for_each(|(i, b)| b.ordinal = i as i64);
            let closed = Closed {
                reason: RolloverReason::Snapshot,
                slots: Vec::new(),
                partial: None,
                changes: rows + bad.len() as u64,
                bytes: 0,
                bad,
                from: position,
                start: 0,
                end: at,
            };
            let execution = self.commit(&closed, output, snapshot_log, now_ms(), Timings::default()).await?;
            opened.stream.acknowledge(at);
            self.emit(WorkerEvent::Committed(execution));
            position = Some(at as i64);
        }
        let from = position.map_or(opened.created_at.unwrap_or(resume), |p| p as u64);
        self.stream(opened.stream, opened.tables, from, position).await
    }

    /// Where to start: whether a snapshot is taken (the slot then made anew)
    /// and the position to resume from (0: the slot's own). Fails closed on a
    /// slot that lost what the catalog's position needs.
    async fn start(&self) -> anyhow::Result<(bool, u64)> {
        let (source, connection) = (&self.publisher.source, &self.publisher.connection);
        let client = connection.connect().await?;
        let slot = server::slot(&client, &source.slot).await?;
        let name = &source.slot;
        match (self.position()?, slot) {
            // A snapshot begun and never committed: it starts again, on a new slot.
            (Some(0), slot) => {
                if let Some(slot) = slot {
                    if slot.active {
                        bail!("the replication slot {name} is in use by another session: stop it, then start again");
                    }
                    tracing::warn!(publisher = %self.id, slot = %name, "a snapshot did not finish: dropping its slot and taking it again");
                    server::drop_slot(&client, name).await?;
                }
                Ok((true, 0))
            }
            (Some(next), None) => bail!(
                "the replication slot {name} is gone (dropped, or never on this server): the changes after {} \
                 that this publisher has not read are lost to it, so it stops. To start over with a new \
                 snapshot, run it under another name",
                format_lsn(next as u64)
            ),
            (Some(next), Some(slot)) => {
                slot.usable(name, &connection.database)?;
                if let Some(confirmed) = slot.confirmed_flush_lsn.filter(|c| *c > next as u64) {
                    bail!(
                        "the replication slot {name} was acknowledged up to {}, past this publisher's committed \
                         position {}: another reader of the slot moved it, and the changes between are lost to \
                         this publisher, so it stops. Give each publisher a slot of its own",
                        format_lsn(confirmed),
                        format_lsn(next as u64)
                    );
                }
                Ok((false, next as u64))
            }
            (None, Some(slot)) if source.snapshot == Snapshot::Initial => {
                if slot.active {
                    bail!("the replication slot {name} is in use by another session: stop it, or name another slot");
                }
                tracing::warn!(publisher = %self.id, slot = %name, "snapshot = \"initial\" on a slot that exists: dropping it, to take the snapshot on a new one");
                server::drop_slot(&client, name).await?;
                Ok((true, 0))
            }
            (None, Some(slot)) => {
                slot.usable(name, &connection.database)?;
                Ok((false, start_lsn(source.start_from)))
            }
            (None, None) => Ok((source.snapshot != Snapshot::None, start_lsn(source.start_from))),
        }
    }

    /// Reads the stream into a batch until the rollover closes it, and
    /// processes each batch; acknowledges an idle slot.
    async fn stream(
        &mut self,
        mut stream: ChangeStream,
        tables: Vec<Arc<super::SourceTable>>,
        mut start: u64,
        mut position: Option<i64>,
    ) -> anyhow::Result<WorkerExit> {
        let mut shutdown = self.shutdown.clone();
        let rollover = self.publisher.source.rollover(self.publisher.flush_interval_mins);
        // What the logs hold at most: past it, even in the middle of a transaction,
        // their rows go through the plugin (`partial`) and the reading goes on.
        stream.hold_at_most(rollover.size_bytes.unwrap_or(u64::MAX).min(CALL_BYTES as u64));
        let mut logs: Vec<ChangeLog> = tables.iter().map(|t| ChangeLog::new(t.clone())).collect();
        // Rows finished under a table's earlier columns, before it gained some.
        let mut earlier: Vec<Vec<RecordBatch>> = vec![Vec::new(); tables.len()];
        let (mut changes, mut bad, mut end) = (0u64, Vec::new(), start);
        let mut partial: Option<Partial> = None;
        let mut opened_at: Option<tokio::time::Instant> = None;
        // A reason to close that waits for the transaction being read to end.
        let mut due: Option<RolloverReason> = None;
        // Once shutdown is asked for: by when the open batch must be committed.
        let mut stop_by: Option<tokio::time::Instant> = None;
        let mut last_idle_ack = Instant::now();
        tracing::info!(publisher = %self.id, from = %format_lsn(start), ?rollover, "change log streaming");
        loop {
            let deadline = opened_at.map(|at| at + rollover.time).filter(|_| due.is_none());
            let event = tokio::select! {
                biased;
                _ = shutdown.wait_for(|stop| *stop), if stop_by.is_none() => {
                    stop_by = Some(tokio::time::Instant::now() + self.options.shutdown_deadline);
                    due = Some(RolloverReason::Shutdown);
                    None
                }
                _ = tokio::time::sleep_until(stop_by.unwrap_or_else(tokio::time::Instant::now)), if stop_by.is_some() => {
                    self.emit(WorkerEvent::Dropped {
                        reason: "shutdown deadline passed in the middle of a transaction; the batch is read again on restart".into(),
                    });
                    return Ok(WorkerExit::Shutdown);
                }
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                    due = Some(RolloverReason::Time);
                    None
                }
                event = stream.next(&mut logs) => Some(event?),
            };
            let mut reason = None;
            match event {
                None => {}
                Some(Event::Committed { end_lsn, changes: n, bad: mut b, .. }) => {
                    if n > 0 || !b.is_empty() {
                        (changes, end) = (changes + n, end_lsn);
                        bad.append(&mut b);
                        opened_at.get_or_insert_with(tokio::time::Instant::now);
                    } else if changes == 0 && bad.is_empty() && partial.is_none() {
                        // A transaction of other tables: nothing pending, so it may be passed.
                        end = end_lsn;
                    }
                    let bytes: u64 = logs.iter().map(ChangeLog::bytes).sum();
                    if rollover.messages.is_some_and(|m| changes >= m) {
                        reason = Some(RolloverReason::Messages);
                    } else if rollover.size_bytes.is_some_and(|s| bytes >= s) || partial.is_some() {
                        reason = Some(RolloverReason::Size);
                    }
                }
                Some(Event::Full) => {
                    // A transaction larger than the logs may hold: what they have goes through the plugin now.
                    let slots = take_rows(&mut logs, &mut earlier)?;
                    let (sinks, mut log) = match partial.take() {
                        Some(Partial { sinks, log }) => (sinks, log),
                        None => (self.sinks(start, start), PluginLog::default()),
                    };
                    let run = self.publish(slots, sinks).await;
                    log.lines.extend(run.log.lines);
                    match run.outcome {
                        Ok(sinks) => partial = Some(Partial { sinks, log }),
                        Err(e) => {
                            return Ok(WorkerExit::Failed(format!(
                                "the plugin failed on part of a batch larger than the logs hold ({e}): nothing of it was committed, and a restart reads it again"
                            )));
                        }
                    }
                }
                Some(Event::Idle { wal_end }) => {
                    let pending = changes > 0 || !bad.is_empty() || partial.is_some();
                    if !pending && wal_end > start && last_idle_ack.elapsed() >= IDLE_ACK_EVERY {
                        // Nothing pending: everything before `wal_end` was read, so the slot may pass it.
                        self.node.catalog.set_position(&self.id, &self.key, 0, position, wal_end as i64)?;
                        stream.acknowledge(wal_end);
                        (position, start, end, last_idle_ack) =
                            (Some(wal_end as i64), wal_end, wal_end, Instant::now());
                    }
                }
                Some(Event::Evolved { slot, before }) => earlier[slot].extend(before),
                Some(Event::Ended) => {
                    bail!("the server ended the replication stream of slot {}", self.publisher.source.slot)
                }
            }
            // A batch closes between transactions only.
            if stream.in_transaction() {
                continue;
            }
            let Some(reason) = reason.or(due.take()) else { continue };
            if changes > 0 || !bad.is_empty() {
                let bytes = logs.iter().map(ChangeLog::bytes).sum();
                let slots = take_rows(&mut logs, &mut earlier)?;
                let closed = Closed {
                    reason,
                    slots,
                    partial: partial.take(),
                    changes,
                    bytes,
                    bad: std::mem::take(&mut bad),
                    from: position,
                    start,
                    end,
                };
                let processed = match stop_by {
                    Some(stop_by) => match tokio::time::timeout_at(stop_by, self.process(closed)).await {
                        Ok(processed) => processed,
                        Err(_) => {
                            self.emit(WorkerEvent::Dropped {
                                reason: "shutdown deadline passed; the batch is read again on restart".into(),
                            });
                            return Ok(WorkerExit::Shutdown);
                        }
                    },
                    None => self.process(closed).await,
                };
                match processed {
                    Ok(()) => {
                        stream.acknowledge(end);
                        (position, start, changes, opened_at) = (Some(end as i64), end, 0, None);
                    }
                    Err(exit) => return Ok(exit),
                }
            }
            if stop_by.is_some() {
                tracing::info!(publisher = %self.id, "change-log publisher stopped");
                return Ok(WorkerExit::Shutdown);
            }
        }
    }

    /// Publishes and commits a closed batch, retrying with backoff; `Err`:
    /// the publisher stops (failed for good, or shutdown during a backoff).
    async fn process(&self, mut closed: Closed) -> Result<(), WorkerExit> {
        let started_at_ms = now_ms();
        self.emit(WorkerEvent::Closed {
            reason: closed.reason,
            messages: closed.changes as usize,
            bytes: closed.bytes,
        });
        // Part of it went through the plugin already: its rows are not held, so one attempt only.
        if let Some(Partial { sinks, mut log }) = closed.partial.take() {
            let t = Instant::now();
            let run = self.publish(std::mem::take(&mut closed.slots), sinks).await;
            log.lines.extend(run.log.lines);
            let timings = Timings { publish: ms(t.elapsed()), plugin_cpu: ms(run.timing.cpu), ..Timings::default() };
            let committed = match run.outcome {
                Ok(sinks) => self.commit(&closed, sinks, log, started_at_ms, timings).await,
                Err(e) => Err(anyhow::Error::new(e)),
            };
            return match committed {
                Ok(execution) => {
                    self.emit(WorkerEvent::Committed(execution));
                    Ok(())
                }
                Err(e) => Err(WorkerExit::Failed(format!(
                    "{e:#}: a batch larger than the logs hold is not tried again from memory; a restart reads it again"
                ))),
            };
        }
        let (mut attempt, mut shutdown) = (0, self.shutdown.clone());
        loop {
            attempt += 1;
            let t = Instant::now();
            let run = self.publish(closed.slots.clone(), self.sinks(closed.start, closed.end)).await;
            let timings = Timings { publish: ms(t.elapsed()), plugin_cpu: ms(run.timing.cpu), ..Timings::default() };
            let committed = match run.outcome {
                Ok(sinks) => self.commit(&closed, sinks, run.log.clone(), started_at_ms, timings).await,
                Err(e) => Err(anyhow::Error::new(e)),
            };
            let error = match committed {
                Ok(execution) => {
                    self.emit(WorkerEvent::Committed(execution));
                    return Ok(());
                }
                Err(e) => format!("{e:#}"),
            };
            let last = attempt >= self.options.max_attempts;
            let backoff = self.options.backoff(attempt);
            tracing::warn!(publisher = %self.id, attempt, %error, "batch attempt failed");
            let mut execution = self.execution(&closed, if last { "failed" } else { "retrying" }, started_at_ms);
            execution.error = Some(error.clone());
            if let Err(e) = self.node.catalog.record(&execution) {
                tracing::error!(publisher = %self.id, error = %e, "recording the failed execution");
            }
            self.emit(WorkerEvent::AttemptFailed {
                attempt,
                of: self.options.max_attempts,
                error: error.clone(),
                retry_in: (!last).then_some(backoff),
            });
            if last {
                return Err(WorkerExit::Failed(error));
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = shutdown.wait_for(|stop| *stop) => return Err(WorkerExit::Shutdown),
            }
        }
    }

    /// Where a batch starts and ends, as the catalog keeps it.
    fn range(&self, closed: &Closed) -> PartitionRange {
        PartitionRange {
            partition: 0,
            first: closed.from.unwrap_or(0).max(closed.start as i64),
            last: closed.end as i64 - 1,
            expected: closed.from,
        }
    }

    /// The record of an attempt at a batch.
    fn execution(&self, closed: &Closed, status: &str, started_at_ms: i64) -> Execution {
        Execution {
            id: 0,
            publisher: self.id.clone(),
            status: status.into(),
            rollover_reason: closed.reason.as_str().into(),
            rows_in: closed.changes,
            rows_out: 0,
            dead_letters: closed.bad.len() as u64,
            offsets: vec![self.range(closed)],
            table_version: None,
            started_at_ms,
            timings_ms: Timings::default(),
            plugin_log: serde_json::Value::Null,
            error: None,
        }
    }

    /// A sink for each output table, its files named from the batch's positions.
    fn sinks(&self, start: u64, end: u64) -> TableSinks {
        let range = [PartitionRange { partition: 0, first: start as i64, last: end as i64, expected: None }];
        let p = &self.publisher;
        TableSinks::new(
            p.output_tables
                .iter()
                .map(|table| {
                    let key = file::table_file(&p.collection, table, &self.key, &range);
                    let sink = TableSink::new(self.node.catalog.store().scratch(&key), key, Default::default());
                    (table.clone(), sink)
                })
                .collect(),
        )
    }

    /// Runs the plugin: one input slot a source table, in order.
    async fn publish(&self, slots: Vec<Vec<RecordBatch>>, sinks: TableSinks) -> crate::plugin::Run<TableSinks> {
        let p = &self.publisher;
        let slots = slots
            .into_iter()
            .map(|batches| match batches.first() {
                Some(first) => vec![Unframed { schema: first.schema(), batches }],
                None => Vec::new(),
            })
            .collect();
        let declared = Declared::new(p.source.tables.clone(), p.output_tables.clone());
        self.node.runtime.publish_blocking(p.plugin.clone(), slots, p.limits.clone(), Some(declared), sinks).await
    }

    /// Commits the plugin's output as a version of each table it wrote, with
    /// the batch's end position and its bad rows as dead letters, in one
    /// catalog transaction; then the tables' Delta logs.
    async fn commit(
        &self,
        closed: &Closed,
        sinks: TableSinks,
        log: PluginLog,
        started_at_ms: i64,
        mut timings: Timings,
    ) -> anyhow::Result<Execution> {
        let t = Instant::now();
        let range = self.range(closed);
        let dead: Vec<DeadLetter> = closed.bad.iter().map(dead_letter).collect();
        let mut execution = Execution {
            rows_out: sinks.rows(),
            timings_ms: timings,
            plugin_log: serde_json::to_value(&log).unwrap_or_default(),
            ..self.execution(closed, "committed", started_at_ms)
        };
        let (catalog, collection, id, key) =
            (self.node.catalog.clone(), self.publisher.collection.clone(), self.id.clone(), self.key.clone());
        let task_execution = execution.clone();
        crate::crash::point("before-catalog-commit");
        let committed = tokio::task::spawn_blocking(move || {
            let txns = vec![Txn { app_id: Txn::app_id(&id, &key, 0), version: range.last + 1 }];
            let commit = stage::Commit {
                collection: &collection,
                publisher: &id,
                topic: &key,
                ranges: std::slice::from_ref(&range),
                execution: &task_execution,
                dead_letters: &dead,
                rerun: &[],
                txns,
                partition_by: Vec::new(),
                iceberg: false,
            };
            sinks.commit(&catalog, commit)
        })
        .await
        .expect("committing does not panic")?;
        match committed {
            Ok((id, version)) => (execution.id, execution.table_version) = (id, version),
            Err(e @ (CatalogError::ConflictingOffsets { .. } | CatalogError::OverlapsCommitted { .. })) => {
                bail!("{e}: another worker reads this slot; this one stops")
            }
            Err(e) => return Err(e.into()),
        }
        crate::crash::point("after-catalog-commit");
        timings.commit = ms(t.elapsed());
        for table in &self.publisher.output_tables {
            let (catalog, collection, table) =
                (self.node.catalog.clone(), self.publisher.collection.clone(), table.clone());
            let synced = tokio::task::spawn_blocking(move || tables::delta::sync(&catalog, &collection, &table))
                .await
                .expect("writing the Delta log does not panic");
            if let Err(e) = synced {
                tracing::error!(publisher = %self.id, error = %format!("{e:#}"), "writing a table's Delta log (the version is committed; the log is written again at the next commit and at start)");
            }
        }
        execution.timings_ms = timings;
        let _ = self.node.catalog.set_timings(execution.id, &timings);
        tracing::info!(publisher = %self.id, changes = closed.changes, rows_out = execution.rows_out, to = %format_lsn(closed.end), "batch committed");
        Ok(execution)
    }
}

fn start_lsn(start: StartFrom) -> u64 {
    match start {
        StartFrom::Tail => 0,
        StartFrom::Lsn(lsn) => lsn,
    }
}

/// Takes each table's rows out of its log (and those it finished under its
/// earlier columns), in slot order.
fn take_rows(logs: &mut [ChangeLog], earlier: &mut [Vec<RecordBatch>]) -> anyhow::Result<Vec<Vec<RecordBatch>>> {
    logs.iter_mut()
        .zip(earlier)
        .map(|(log, earlier)| {
            let mut rows = std::mem::take(earlier);
            if log.rows() > 0 {
                rows.push(log.finish());
            }
            widen(rows)
        })
        .collect()
}

/// A table's rows, those read under its earlier columns given its latest
/// ones (the columns it gained null), so that its slot has one schema.
fn widen(rows: Vec<RecordBatch>) -> anyhow::Result<Vec<RecordBatch>> {
    let Some(schema): Option<SchemaRef> = rows.last().map(RecordBatch::schema) else { return Ok(rows) };
    rows.into_iter()
        .map(|batch| {
            if batch.schema() == schema {
                return Ok(batch);
            }
            let columns = schema
                .fields()
                .iter()
                .map(|f| match batch.column_by_name(f.name()) {
                    Some(column) => column.clone(),
                    None => new_null_array(f.data_type(), batch.num_rows()),
                })
                .collect();
            RecordBatch::try_new(schema.clone(), columns).context("widening rows to a table's new columns")
        })
        .collect()
}

/// A row its table cannot hold, as a dead letter: under its table, at its
/// commit position and its place in the transaction, the row as JSON.
fn dead_letter(bad: &BadValue) -> DeadLetter {
    let message = RawMessage::new(
        bad.ordinal.clamp(0, i32::MAX as i64) as i32,
        bad.lsn as i64,
        None,
        Some(bad.table.as_bytes()),
        Some(bad.row.as_bytes()),
        Vec::new(),
    );
    DeadLetter { message, error: bad.to_string() }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
