//! What happens to one closed batch, in order: its last runs decoded, its
//! dead letters handed to the source or kept, the plugin run on the rest in
//! the sandbox (its output written to the table's file as it comes), and the
//! table version committed with the batch's offsets in one catalog
//! transaction, then the table's Delta log and the source acknowledged. A
//! failed attempt stages the batch on disk for its retries, with backoff.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use tokio::sync::{mpsc, oneshot, watch};

use super::buffer::{ClosedBatch, ClosedPartition};
use super::stage;
use super::{Node, PublishStage, WorkerEvent, WorkerExit, WorkerOptions, stopped};
use crate::catalog::{CatalogError, Execution, PartitionRange, Timings, Txn, now_ms};
use crate::formats::{DeadLetter, Decoder};
use crate::plugin::frames;
use crate::plugin::{Declared, OutputSink, PluginLog, RunError};
use crate::publisher::StreamPublisher;
use crate::publisher::source::RolloverReason;
use crate::sources::Acknowledge;
use crate::tables;
use crate::tables::file;

/// One partition of a closed batch, decoded: its rows in offset order, in the
/// runs they were decoded in. Staging writes them, and the plugin's frame is
/// made from them only when the plugin reads it.
struct PartitionRows {
    partition: i32,
    rows: Vec<RecordBatch>,
}

/// The partitions of a closed batch that hold rows, in partition order.
type Partitions = Vec<PartitionRows>;

/// What one attempt at a batch works from.
struct Input {
    /// Each partition's rows, in partition order: the decoded batch itself, or
    /// for a retry after it was staged, read back from the staged files.
    batches: Vec<Vec<RecordBatch>>,
    rows_in: u64,
    /// Milliseconds decoding the batch took, before the plugin's frames are made.
    decoding: f64,
}

/// The processing side, shared with the task that processes the batch in flight.
pub(super) struct Batches {
    pub(super) publisher: StreamPublisher,
    /// The publisher's `collection/name`.
    pub(super) id: String,
    pub(super) node: Node,
    pub(super) options: WorkerOptions,
    /// The source's half that keeps dead letters and hears of commits.
    pub(super) acks: Arc<dyn Acknowledge>,
    pub(super) decoder: Decoder,
    pub(super) events: Option<mpsc::UnboundedSender<WorkerEvent>>,
    pub(super) shutdown: watch::Receiver<bool>,
}

/// How processing a closed batch ended.
pub(super) enum Outcome {
    Committed {
        execution: Execution,
        staged: Vec<PathBuf>,
    },
    /// Drop the batch and read its partitions again from the catalog's offsets:
    /// another worker committed some of them first, or a retry could not read
    /// the batch back from its staged files.
    Reread {
        ranges: Vec<PartitionRange>,
        reason: String,
    },
    /// Shutdown came during a retry's backoff: nothing committed, re-read on restart.
    Abandoned,
    Failed(WorkerExit),
}

impl Batches {
    pub(super) fn emit(&self, event: WorkerEvent) {
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }

    /// Decodes, publishes and commits one closed batch, retrying with backoff.
    /// It commits only once `prior` (the batch before it, still in flight) is done.
    pub(super) async fn process(
        self: Arc<Self>,
        batch: ClosedBatch,
        mut prior: Option<oneshot::Receiver<()>>,
    ) -> Outcome {
        let started_at_ms = now_ms();
        let ClosedBatch { reason, ranges, partitions, messages, bytes } = batch;
        self.emit(WorkerEvent::Closed { reason, messages: messages as usize, bytes });
        tracing::info!(publisher = %self.id, reason = reason.as_str(), messages, bytes, "batch closed");

        let mut timings = Timings::default();
        let (partitions, dead, decoding) = finish_decoding(&self.decoder, partitions).await;
        timings.decode = ms(decoding);
        crate::crash::point("after-decode");
        let rows_in = partitions.iter().flat_map(|p| &p.rows).map(|b| b.num_rows() as u64).sum();
        // Where a failed attempt stages the batch: one parquet file per partition with rows, named from its offsets.
        let p = &self.publisher;
        let staged: Vec<PathBuf> = ranges
            .iter()
            .filter(|r| partitions.iter().any(|p| p.partition == r.partition))
            .map(|r| stage::staged_file(&p.collection, &p.name, p.source_name(), r))
            .collect();

        // Attempts work from the decoded batch in memory. Only when one fails is the
        // batch staged to disk, so that the backoff before the next attempt holds no
        // memory; the retries read it back. (The source still has it if that fails too.)
        let mut in_memory = Some(partitions.into_iter().map(|p| p.rows).collect::<Vec<_>>());
        // `attempt` counts toward `max_attempts`; `tries`, every try, sets the backoff.
        let (mut attempt, mut tries) = (0, 0);
        loop {
            attempt += 1;
            tries += 1;
            let batches = match &in_memory {
                Some(batches) => batches.clone(),
                None => {
                    let (dir, paths) = (self.node.catalog.data_dir().to_path_buf(), staged.clone());
                    let read = tokio::task::spawn_blocking(move || reread_staged(&dir, &paths));
                    match read.await.expect("reading staged files does not panic") {
                        Ok(batches) => batches,
                        // Its files went: the source still has the batch.
                        Err(e) => {
                            let reason = format!("a retry could not read the staged batch back: {e:#}");
                            return Outcome::Reread { ranges, reason };
                        }
                    }
                }
            };
            let input = Input { batches, rows_in, decoding: ms(decoding) };
            match self.attempt(reason, &ranges, input, &dead, started_at_ms, &mut timings, &mut prior).await {
                Ok(Attempt::Committed(execution)) => return Outcome::Committed { execution, staged },
                Ok(Attempt::Reread(reason)) => return Outcome::Reread { ranges, reason },
                Err(failure) => {
                    let error = format!("{:#}", failure.error);
                    tracing::warn!(publisher = %self.id, attempt, error = %error, "batch attempt failed");
                    // An unreachable store, or a table's log too far behind, is waited out,
                    // however long: the batch is not at fault.
                    let unavailable = failure
                        .error
                        .chain()
                        .any(|e| e.is::<crate::store::Unavailable>() || e.is::<tables::delta::LogBehind>());
                    // What a retry cannot change fails at once: a table changed so that weir
                    // cannot write into it, output the plugin will return again, columns the table refuses.
                    let definite = failure.error.chain().any(|e| {
                        e.is::<tables::delta::Blocked>()
                            || e.downcast_ref::<RunError>().is_some_and(RunError::is_definite)
                            || matches!(e.downcast_ref::<CatalogError>(), Some(CatalogError::Schema(_)))
                    });
                    let last = definite || (!unavailable && attempt >= self.options.max_attempts);
                    if !last && let Some(batches) = in_memory.take() {
                        match self.stage(&staged, batches).await {
                            Ok(took) => timings.stage = ms(took),
                            // The retries work from memory instead.
                            Err((e, batches)) => {
                                tracing::warn!(publisher = %self.id, error = %format!("{e:#}"), "staging the batch for its retry failed; it stays in memory");
                                in_memory = Some(batches);
                            }
                        }
                    }
                    let backoff = self.options.backoff(tries);
                    // An attempt that will be tried again is `retrying`; the last one `failed`.
                    let execution = self.execution(
                        if last { "failed" } else { "retrying" },
                        reason,
                        &ranges,
                        rows_in,
                        dead.len(),
                        0,
                        started_at_ms,
                        timings,
                        &failure.log,
                        Some(error.clone()),
                    );
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
                        tracing::error!(publisher = %self.id, attempts = attempt, error = %error, "publisher failed; its offsets stay where they were");
                        return Outcome::Failed(WorkerExit::Failed(error));
                    }
                    if unavailable {
                        attempt -= 1; // it does not count
                    }
                    let mut shutdown = self.shutdown.clone();
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        // Shutting down mid-retry: nothing was committed, the batch is re-read on restart.
                        _ = stopped(&mut shutdown) => return Outcome::Abandoned,
                    }
                }
            }
        }
    }

    /// Writes a failed attempt's batch to its staged files (one per partition, on
    /// the blocking pool); on failure, gives the batch back.
    async fn stage(
        &self,
        paths: &[PathBuf],
        batches: Vec<Vec<RecordBatch>>,
    ) -> Result<Duration, (anyhow::Error, Vec<Vec<RecordBatch>>)> {
        let (dir, paths, schema) =
            (self.node.catalog.data_dir().to_path_buf(), paths.to_vec(), self.decoder.output_schema().clone());
        tokio::task::spawn_blocking(move || {
            let t = Instant::now();
            let written: anyhow::Result<()> = paths
                .iter()
                .zip(&batches)
                .try_for_each(|(path, rows)| file::write_parquet(&dir.join(path), &schema, rows, file::Kind::Staged));
            match written {
                Ok(()) => Ok(t.elapsed()),
                Err(e) => Err((e, batches)),
            }
        })
        .await
        .expect("staging does not panic")
    }

    #[allow(clippy::too_many_arguments)]
    async fn attempt(
        &self,
        reason: RolloverReason,
        ranges: &[PartitionRange],
        input: Input,
        dead: &[DeadLetter],
        started_at_ms: i64,
        timings: &mut Timings,
        prior: &mut Option<oneshot::Receiver<()>>,
    ) -> Result<Attempt, Failure> {
        let p = &self.publisher;
        let schema = self.decoder.output_schema().clone();
        let native = self.options.publish == PublishStage::NativeIdentity;
        let Input { batches, rows_in, decoding } = input;
        (timings.plugin_cpu, timings.write) = (0.0, 0.0); // this attempt's call only
        // Making the plugin's frames, inside its call, counts as decoding, not publishing.
        let mut framing = 0.0;

        // Dead letters, then the plugin. The plugin's output is written to the
        // table's file as the plugin makes it.
        let t = Instant::now();
        let table = p.output_table();
        let key = file::table_file(&p.collection, &table, p.source_name(), ranges);
        let sink = stage::TableSinks::new(vec![(
            table.clone(),
            stage::TableSink::new(self.node.catalog.store().scratch(&key), key, p.partitioning.clone()),
        )]);
        let published = async {
            // Dead letters the source keeps go out, acknowledged, before any offset past them
            // is committed; the catalog keeps the rest with the batch.
            let stored_dead = self.acks.dead_letters(dead).await.map_err(Failure::host)?;
            // Publish: array mode, slot 0 = this batch's frames. Skipped when every message was a dead letter.
            crate::crash::soon("during-publish", Duration::from_micros(200));
            if batches.is_empty() {
                return Ok((None, PluginLog::default(), stored_dead));
            }
            if native {
                let batches = batches.into_iter().flatten().collect();
                let (table, frame) = (table.clone(), frames::Frame { schema: schema.clone(), batches });
                let written = tokio::task::spawn_blocking(move || {
                    let (mut sink, t) = (sink, Instant::now());
                    sink.write(&table, frame).map(|()| (sink, t.elapsed()))
                });
                let (sink, took) = written.await.expect("writing a table does not panic").map_err(Failure::host)?;
                timings.write = ms(took);
                return Ok((Some(sink), PluginLog::default(), stored_dead));
            }
            let frames =
                batches.into_iter().map(|batches| frames::Unframed { schema: schema.clone(), batches }).collect();
            let declared = Declared::new(vec![p.source_name().to_string()], vec![table.clone()]);
            let run = self
                .node
                .runtime
                .publish_blocking(p.plugin.clone(), vec![frames], p.limits.clone(), Some(declared), sink)
                .await;
            (timings.plugin_cpu, timings.write, framing) =
                (ms(run.timing.cpu), ms(run.timing.output), ms(run.timing.input));
            match run.outcome {
                Ok(sink) => Ok((Some(sink), run.log, stored_dead)),
                Err(e) => Err(Failure { error: e.into(), log: run.log }),
            }
        }
        .await;
        (timings.publish, timings.decode) = (ms(t.elapsed()) - framing, decoding + framing);
        let (output, log, stored_dead) = published?;
        crate::crash::point("after-publish");

        // The batch before commits first (or gives up, and then this one's offsets will not match).
        if let Some(prior) = prior.take() {
            let _ = prior.await;
        }
        // Commit: the table version and the offsets, in one catalog transaction (on the blocking pool: it syncs to disk).
        let t = Instant::now();
        let rows_out = output.as_ref().map_or(0, stage::TableSinks::rows);
        let mut execution = self.execution(
            "committed",
            reason,
            ranges,
            rows_in,
            dead.len(),
            rows_out,
            started_at_ms,
            *timings,
            &log,
            None,
        );
        let committed = {
            let catalog = self.node.catalog.clone();
            let (collection, publisher, topic) = (p.collection.clone(), self.id.clone(), p.source_name().to_string());
            let (ranges, execution) = (ranges.to_vec(), execution.clone());
            let partition_by = p.partitioning.spec.clone();
            let iceberg = p.table_format == tables::TableFormat::Iceberg;
            tokio::task::spawn_blocking(move || -> anyhow::Result<Result<(i64, Option<i64>), CatalogError>> {
                // No output (every message a dead letter): the offsets and the dead letters still commit.
                let output = output.unwrap_or_else(|| stage::TableSinks::new(Vec::new()));
                let txns = ranges
                    .iter()
                    .map(|r| Txn { app_id: Txn::app_id(&publisher, &topic, r.partition), version: r.last + 1 })
                    .collect();
                let commit = stage::Commit {
                    collection: &collection,
                    publisher: &publisher,
                    topic: &topic,
                    ranges: &ranges,
                    execution: &execution,
                    dead_letters: &stored_dead,
                    rerun: &[],
                    txns,
                    partition_by: partition_by.texts(),
                    iceberg,
                };
                output.commit(&catalog, commit)
            })
            .await
            .expect("committing does not panic")
        };
        match committed {
            Ok(Ok((id, version))) => (execution.id, execution.table_version) = (id, version),
            Ok(Err(e @ (CatalogError::ConflictingOffsets { .. } | CatalogError::OverlapsCommitted { .. }))) => {
                return Ok(Attempt::Reread(e.to_string()));
            }
            Ok(Err(e)) => return Err(Failure { error: e.into(), log }),
            Err(e) => return Err(Failure { error: e, log }),
        }
        timings.commit = ms(t.elapsed());
        crate::crash::point("after-catalog-commit");

        // The table's Delta log follows the catalog (and is repaired from it on start).
        if execution.table_version.is_some() {
            let t = Instant::now();
            let (catalog, collection, table) = (self.node.catalog.clone(), p.collection.clone(), p.output_table());
            let synced = tokio::task::spawn_blocking(move || tables::delta::sync(&catalog, &collection, &table))
                .await
                .expect("writing the Delta log does not panic");
            if let Err(e) = synced {
                tracing::error!(publisher = %self.id, error = %format!("{e:#}"), "writing the table's Delta log (the version is committed; the log is written again at the next commit and at start)");
            }
            timings.log = ms(t.elapsed());
        }
        execution.timings_ms = *timings;
        if let Err(e) = self.node.catalog.set_timings(execution.id, timings) {
            tracing::warn!(publisher = %self.id, error = %e, "recording the commit's timing");
        }

        // The source hears of it last: its own record of progress follows the catalog, for tools that read it.
        self.acks.committed(ranges);
        Ok(Attempt::Committed(execution))
    }

    #[allow(clippy::too_many_arguments)]
    fn execution(
        &self,
        status: &str,
        reason: RolloverReason,
        ranges: &[PartitionRange],
        rows_in: u64,
        dead: usize,
        rows_out: u64,
        started_at_ms: i64,
        timings: Timings,
        log: &PluginLog,
        error: Option<String>,
    ) -> Execution {
        Execution {
            id: 0,
            publisher: self.id.clone(),
            status: status.into(),
            rollover_reason: reason.as_str().into(),
            rows_in,
            rows_out,
            dead_letters: dead as u64,
            offsets: ranges.to_vec(),
            table_version: None,
            started_at_ms,
            timings_ms: timings,
            plugin_log: serde_json::to_value(log).unwrap_or_default(),
            error,
        }
    }
}

enum Attempt {
    Committed(Execution),
    Reread(String),
}

struct Failure {
    error: anyhow::Error,
    log: PluginLog,
}

impl Failure {
    fn host(error: anyhow::Error) -> Self {
        Self { error, log: PluginLog::default() }
    }
}

/// Waits for each partition's runs to decode and decodes the messages after
/// them. Returns each partition's rows, the dead letters of all partitions
/// together, and the time decoding took.
async fn finish_decoding(decoder: &Decoder, closed: Vec<ClosedPartition>) -> (Partitions, Vec<DeadLetter>, Duration) {
    // The last runs decode side by side; every run is then awaited in offset order.
    let closed: Vec<(i32, Vec<_>)> = closed
        .into_iter()
        .map(|ClosedPartition { partition, mut decoding, rest }| {
            if !rest.is_empty() {
                decoding.push(decoder.spawn(rest));
            }
            (partition, decoding)
        })
        .collect();
    let (mut partitions, mut dead, mut took) = (Vec::new(), Vec::new(), Duration::ZERO);
    for (partition, decoding) in closed {
        let mut rows = Vec::with_capacity(decoding.len());
        for run in decoding {
            let mut run = run.await;
            took += run.took;
            dead.append(&mut run.dead);
            if run.batch.num_rows() > 0 {
                rows.push(run.batch);
            }
        }
        if !rows.is_empty() {
            partitions.push(PartitionRows { partition, rows });
        }
    }
    (partitions, dead, took)
}

/// A retried batch, read back from its staged files (paths relative to `dir`):
/// each partition's rows.
fn reread_staged(dir: &Path, paths: &[PathBuf]) -> anyhow::Result<Vec<Vec<RecordBatch>>> {
    paths.iter().map(|path| Ok(crate::input::read(&dir.join(path), None)?.batches)).collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
