//! The stream worker: one per stream publisher. Its run loop reads like the
//! pipeline: consume → buffer (which decodes each partition in runs as it
//! fills) → rollover → finish decoding → dead letters → publish (WASM)
//! → commit table version + offsets → group offsets. A failed attempt stages
//! the batch on disk for its retries.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use arrow::array::RecordBatch;
use futures::{FutureExt as _, StreamExt as _};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaResult;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tokio::sync::{mpsc, oneshot, watch};

use crate::catalog::{BatchCommit, Catalog, CatalogError, Execution, NewVersion, PartitionRange, Timings, Txn, now_ms};
use crate::formats::registry::RegistryClient;
use crate::formats::writers::{RegistryEvent, WriterSchemas};
use crate::formats::{DeadLetter, Decoder, RawMessage};
use crate::plugin::frames;
use crate::plugin::{Declared, OutputSink, PluginLog, RunError, Runtime};
use crate::publisher::StreamPublisher;
use crate::publisher::source::{Rollover, RolloverReason};
use crate::sources::kafka::dead_letters::DeadLetterTopic;
use crate::sources::kafka::{self, Assignment, MessageQueue, WorkerConsumer};
use crate::stream::buffer::{Buffer, ClosedBatch, ClosedPartition, MemoryBudget};
use crate::stream::stage;
use crate::tables;
use crate::tables::file;

/// What a worker shares with the other workers of its node.
#[derive(Clone)]
pub struct Node {
    pub catalog: Arc<Catalog>,
    pub runtime: Arc<Runtime>,
    pub budget: Arc<MemoryBudget>,
}

/// How a worker retries and shuts down.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Attempts at one batch before the publisher is marked failed.
    pub max_attempts: u32,
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// How long a graceful shutdown may spend committing the open batch.
    pub shutdown_deadline: Duration,
    /// What the publish stage runs.
    pub publish: PublishStage,
}

/// What the publish stage runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PublishStage {
    /// The publisher's plugin, in the sandbox.
    #[default]
    Plugin,
    /// No plugin: the decoded batch is the output table. For benchmarks, to
    /// isolate the sandbox's cost; nothing a user registers runs this way.
    NativeIdentity,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            first_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            shutdown_deadline: Duration::from_secs(30),
            publish: PublishStage::Plugin,
        }
    }
}

/// What a worker reports as it goes (progress for `weir demo`, hooks for tests).
#[derive(Debug, Clone)]
pub enum WorkerEvent {
    Assigned(BTreeMap<i32, Option<i64>>),
    Revoked(Vec<i32>),
    /// A batch closed and is being processed.
    Closed {
        reason: RolloverReason,
        messages: usize,
        bytes: u64,
    },
    Committed(Execution),
    /// An attempt failed: attempt `attempt` of `of`, with the plugin's or the
    /// host's error; the batch is tried again in `retry_in` (`None`: it was
    /// the last attempt, and the publisher fails).
    AttemptFailed {
        attempt: u32,
        of: u32,
        error: String,
        retry_in: Option<Duration>,
    },
    /// The batch was dropped unprocessed; its partitions are re-read.
    Dropped {
        reason: String,
    },
    /// Registry mode: the schema registry is waited for, answers again, or served a writer schema.
    Registry(RegistryEvent),
    /// The brokers refused this worker's client (credentials, mechanism, TLS):
    /// nothing is read until they take it. Cleared by the next assignment.
    BrokerRefused {
        reason: String,
    },
}

/// Why a worker stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerExit {
    Shutdown,
    /// Too many failed attempts at one batch; nothing of it was committed.
    Failed(String),
}

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

static WORKER_IDS: AtomicU64 = AtomicU64::new(1);

/// Closed batches a worker processes at once. While one commits (the plugin's
/// output written, the catalog synced to disk, the Delta log), the next one
/// finishes decoding and runs its plugin; the consumer stops only when a third
/// closes. With one, the consumer waited for the batch before at nearly every
/// close: 30–110 ms each time, a tenth of the run, on the benchmark's data.
const MAX_IN_FLIGHT: usize = 2;

/// A closed batch being processed.
struct InFlight {
    task: tokio::task::JoinHandle<Outcome>,
    /// Resolves when it is done (committed or not), for the batch after it to
    /// commit; taken by that batch.
    turn: Option<oneshot::Receiver<()>>,
}

/// A batch left in flight when the worker stops is stopped, not left to commit later.
impl Drop for InFlight {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Messages taken from librdkafka's queue in one go before the loop looks at
/// shutdown, assignments and the clock again.
const DRAIN_AT_ONCE: usize = 1024;

/// The consuming side: the loop, the open batch's offsets, assignments.
struct Worker {
    /// Where assigned partitions' messages arrive.
    queue: MessageQueue,
    batches: Arc<Batches>,
    worker_id: u64,
    /// Per assigned partition: where the next batch starts (None: nothing stored yet). A
    /// closed batch moves it past itself at once, so the next batch can fill while the
    /// closed one is processed; the catalog's compare-and-set keeps that honest.
    next: BTreeMap<i32, Option<i64>>,
}

/// The processing side, shared with the task that processes the batch in flight.
struct Batches {
    publisher: StreamPublisher,
    id: String,
    node: Node,
    options: WorkerOptions,
    consumer: Arc<WorkerConsumer>,
    decoder: Decoder,
    dead_letter_topic: Option<DeadLetterTopic>,
    events: Option<mpsc::UnboundedSender<WorkerEvent>>,
    shutdown: watch::Receiver<bool>,
}

impl std::ops::Deref for Worker {
    type Target = Batches;
    fn deref(&self) -> &Batches {
        &self.batches
    }
}

/// How processing a closed batch ended.
enum Outcome {
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

/// Runs a publisher until `shutdown` turns true (then the open batch is
/// committed within the deadline, or dropped) or it fails for good.
pub async fn run(
    publisher: StreamPublisher,
    node: Node,
    options: WorkerOptions,
    events: Option<mpsc::UnboundedSender<WorkerEvent>>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<WorkerExit> {
    let id = publisher.id();
    // Its table's Delta log first has every version the catalog has. A table another
    // writer changed so that weir cannot write into it stops the publisher here; the log
    // failing for another reason (a store outage) is waited out by the batches.
    let (catalog, collection, table) = (node.catalog.clone(), publisher.collection.clone(), publisher.output_table());
    let synced = tokio::task::spawn_blocking(move || tables::delta::sync(&catalog, &collection, &table))
        .await
        .expect("writing the Delta log does not panic");
    if let Err(e) = synced {
        if e.downcast_ref::<tables::delta::Blocked>().is_some() {
            return Err(e);
        }
        tracing::warn!(publisher = %id, error = %format!("{e:#}"), "bringing the Delta log of the table up to the catalog (tried again before each batch)");
    }
    let (consumer, queue, assignments) = kafka::subscribe(
        &publisher.connection,
        &publisher.group_id(),
        publisher.source.config.auto_offset_reset,
        node.catalog.clone(),
        &id,
        &publisher.source.topic,
    )
    .with_context(|| format!("creating the Kafka consumer for {id}"))?;
    let dead_letter_topic = match &publisher.source.dead_letter_topic {
        Some(topic) => Some(DeadLetterTopic::new(&publisher.connection, topic)?),
        None => None,
    };
    let writers = match &publisher.connection.schema_registry {
        Some(registry) => {
            let client = RegistryClient::new(registry).with_context(|| format!("the schema registry of {id}"))?;
            let observer = events.clone().map(|events| -> crate::formats::writers::Observer {
                Arc::new(move |event| {
                    let _ = events.send(WorkerEvent::Registry(event));
                })
            });
            Some(WriterSchemas::new(client, publisher.source.format.clone(), &publisher.source.topic, observer))
        }
        None => None,
    };
    let decoder = Decoder::new(publisher.source.format.clone(), writers);
    let batches = Batches { publisher, id, node, options, consumer, decoder, dead_letter_topic, events, shutdown };
    let mut worker = Worker {
        queue,
        batches: Arc::new(batches),
        worker_id: WORKER_IDS.fetch_add(1, Ordering::Relaxed),
        next: BTreeMap::new(),
    };
    let exit = worker.run_loop(assignments).await;
    worker.node.budget.release(worker.worker_id);
    exit
}

impl Batches {
    fn emit(&self, event: WorkerEvent) {
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }
}

impl Worker {
    async fn run_loop(&mut self, mut assignments: mpsc::UnboundedReceiver<Assignment>) -> anyhow::Result<WorkerExit> {
        let rollover = self.publisher.rollover();
        let mut buffer = Buffer::default();
        let topic = self.publisher.source.topic.clone();
        tracing::info!(publisher = %self.id, %topic, ?rollover, "stream worker started");
        // Closed batches being processed, oldest first, while the next one fills.
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
        // One message stream for the worker's life (each `recv()` would register a waker anew).
        let consumer = self.consumer.clone();
        let mut messages = consumer.stream();
        loop {
            let deadline = buffer.deadline(&rollover);
            let mut shutdown = self.shutdown.clone();
            let closed = tokio::select! {
                biased;
                _ = stopped(&mut shutdown) => {
                    let deadline = self.options.shutdown_deadline;
                    // Batches still in flight at the deadline are stopped, not left to commit later.
                    let in_flight_abort: Vec<_> = in_flight.iter().map(|f| f.task.abort_handle()).collect();
                    let finish = async {
                        while let Some(mut oldest) = in_flight.pop_front() {
                            if let Some(exit) = self.settle((&mut oldest.task).await.expect("processing does not panic"), &mut buffer) {
                                return Some(exit);
                            }
                        }
                        if buffer.is_empty() {
                            return None;
                        }
                        let batch = buffer.close(RolloverReason::Shutdown);
                        let outcome = self.batches.clone().process(batch, None).await;
                        self.settle(outcome, &mut buffer)
                    };
                    match tokio::time::timeout(deadline, finish).await {
                        Ok(Some(WorkerExit::Failed(e))) => return Ok(WorkerExit::Failed(e)),
                        Ok(_) => {}
                        Err(_) => {
                            for abort in in_flight_abort {
                                abort.abort();
                            }
                            self.emit(WorkerEvent::Dropped { reason: "shutdown deadline passed; the batch is re-read on restart".into() });
                        }
                    }
                    tracing::info!(publisher = %self.id, "stream worker stopped");
                    return Ok(WorkerExit::Shutdown);
                }
                outcome = async { (&mut in_flight.front_mut().expect("guarded").task).await }, if !in_flight.is_empty() => {
                    in_flight.pop_front();
                    if let Some(exit) = self.settle(outcome.expect("processing does not panic"), &mut buffer) {
                        return Ok(exit);
                    }
                    None
                }
                Some(change) = assignments.recv() => {
                    match &change {
                        Assignment::Assigned(offsets) => {
                            self.next.extend(offsets.iter().map(|(p, o)| (*p, *o)));
                            self.emit(WorkerEvent::Assigned(offsets.clone()));
                        }
                        Assignment::Refused(reason) => {
                            self.emit(WorkerEvent::BrokerRefused { reason: reason.clone() });
                        }
                        Assignment::Revoked(partitions) => {
                            // Not committed, so not lost: whoever gets them re-reads from the catalog.
                            buffer.drop_partitions(partitions);
                            self.queue.forget(partitions);
                            for p in partitions {
                                self.next.remove(p);
                            }
                            self.emit(WorkerEvent::Revoked(partitions.clone()));
                        }
                    }
                    None
                }
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                    buffer.due(&rollover, tokio::time::Instant::now()).map(|reason| buffer.close(reason))
                }
                () = self.queue.ready() => {
                    let (closed, dry) = self.read(|w| w.queue.next(), &mut buffer, &rollover)?;
                    if !dry {
                        self.queue.look_again();
                    }
                    closed
                }
                // Messages fetched before their partition was forwarded to the queue.
                Some(received) = messages.next() => {
                    let mut received = Some(received);
                    let next = |_: &mut Self| {
                        received.take().or_else(|| messages.next().now_or_never().flatten()).map(|r| r.and_then(|m| kafka::to_raw(&m)))
                    };
                    self.read(next, &mut buffer, &rollover)?.0
                }
            };
            if let Some(batch) = closed {
                self.node.budget.update(self.worker_id, 0);
                // Two closed batches at most: the oldest is settled before a third starts.
                if in_flight.len() >= MAX_IN_FLIGHT
                    && let Some(mut oldest) = in_flight.pop_front()
                    && let Some(exit) =
                        self.settle((&mut oldest.task).await.expect("processing does not panic"), &mut buffer)
                {
                    return Ok(exit);
                }
                for r in &batch.ranges {
                    self.next.insert(r.partition, Some(r.last + 1));
                }
                // It commits only once the batch before it is done: commits go in offset order.
                let (done, turn) = oneshot::channel::<()>();
                let prior = in_flight.back_mut().and_then(|f| f.turn.take());
                let batches = self.batches.clone();
                // `done` goes when the task ends, however it ends (aborted too).
                let task = tokio::spawn(async move {
                    let _done = done;
                    batches.process(batch, prior).await
                });
                in_flight.push_back(InFlight { task, turn: Some(turn) });
            }
        }
    }

    /// Applies how a batch ended; `Some` when the worker must stop.
    fn settle(&mut self, outcome: Outcome, buffer: &mut Buffer) -> Option<WorkerExit> {
        match outcome {
            Outcome::Committed { execution, staged } => {
                self.committed(execution, staged);
                None
            }
            Outcome::Reread { ranges, reason } => {
                tracing::warn!(publisher = %self.id, %reason, "dropping the batch; re-reading its partitions");
                self.emit(WorkerEvent::Dropped { reason });
                // What was read past the batch on those partitions goes too: all of it is re-read.
                let partitions: Vec<i32> = ranges.iter().map(|r| r.partition).collect();
                buffer.drop_partitions(&partitions);
                self.reseek(&ranges);
                None
            }
            Outcome::Abandoned => Some(WorkerExit::Shutdown),
            Outcome::Failed(exit) => Some(exit),
        }
    }

    /// Buffers the messages `next` gives until it has no more, a batch closes,
    /// or [`DRAIN_AT_ONCE`] have been read; the loop then looks at shutdown,
    /// assignments and the clock again. Says whether `next` ran dry.
    fn read(
        &mut self,
        mut next: impl FnMut(&mut Self) -> Option<KafkaResult<RawMessage>>,
        buffer: &mut Buffer,
        rollover: &Rollover,
    ) -> anyhow::Result<(Option<ClosedBatch>, bool)> {
        // One clock reading and one look at the node's budget serve the whole run.
        let now = tokio::time::Instant::now();
        let budget = self.node.budget.share(self.worker_id, buffer.bytes());
        let mut dry = false;
        for _ in 0..DRAIN_AT_ONCE {
            let Some(message) = next(self) else {
                dry = true;
                break;
            };
            match message {
                Ok(raw) => {
                    self.accept(raw, buffer, now)?;
                    let reason = buffer
                        .due(rollover, now)
                        .or(budget.over(buffer.bytes()).then_some(RolloverReason::MemoryBudget));
                    if let Some(reason) = reason {
                        return Ok((Some(buffer.close(reason)), false));
                    }
                }
                // librdkafka reconnects by itself; say so and keep going.
                Err(e) => {
                    tracing::warn!(publisher = %self.id, topic = %self.publisher.source.topic, error = %e, "consumer error")
                }
            }
        }
        // The other workers see this buffer as it is now.
        self.node.budget.share(self.worker_id, buffer.bytes());
        Ok((None, dry))
    }

    /// Buffers a message unless the catalog says it is already committed.
    fn accept(&mut self, raw: RawMessage, buffer: &mut Buffer, now: tokio::time::Instant) -> anyhow::Result<()> {
        let expected = match self.next.get(&raw.partition) {
            Some(expected) => *expected,
            None => {
                let stored = self.node.catalog.offsets(&self.id, &self.publisher.source.topic)?;
                let expected = stored.get(&raw.partition).copied();
                self.next.insert(raw.partition, expected);
                expected
            }
        };
        if expected.is_some_and(|next| raw.offset < next) {
            tracing::debug!(publisher = %self.id, partition = raw.partition, offset = raw.offset, "skipping a message the catalog already has");
            return Ok(());
        }
        let partition = raw.partition;
        if let Some(run) = buffer.push(raw, expected, now) {
            buffer.decoding(partition, self.decoder.spawn(run));
        }
        Ok(())
    }
}

impl Batches {
    /// Decodes, publishes and commits one closed batch, retrying with backoff.
    /// It commits only once `prior` (the batch before it, still in flight) is done.
    async fn process(self: Arc<Self>, batch: ClosedBatch, mut prior: Option<oneshot::Receiver<()>>) -> Outcome {
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
            .map(|r| stage::staged_file(&p.collection, &p.name, &p.source.topic, r))
            .collect();

        // Attempts work from the decoded batch in memory. Only when one fails is the
        // batch staged to disk, so that the backoff before the next attempt holds no
        // memory; the retries read it back. (Kafka still has it if that fails too.)
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
                        // Its files went: Kafka still has the batch.
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
                    let backoff = self
                        .options
                        .first_backoff
                        .saturating_mul(1 << (tries - 1).min(16))
                        .min(self.options.max_backoff);
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
        let key = file::table_file(&p.collection, &table, &p.source.topic, ranges);
        let sink = stage::TableSink::new(self.node.catalog.store().scratch(&key), key);
        let published = async {
            // Dead letters go out, acknowledged, before any offset past them is committed.
            let stored_dead: Vec<DeadLetter> = match &self.dead_letter_topic {
                Some(topic) if !dead.is_empty() => {
                    topic.send(&p.source.topic, dead).await.map_err(|e| Failure::host(e.into()))?;
                    vec![]
                }
                Some(_) => vec![],
                None => dead.to_vec(),
            };
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
            let declared = Declared::new(vec![p.source.topic.clone()], vec![table.clone()]);
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
        let rows_out = output.as_ref().map_or(0, stage::TableSink::rows);
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
            let (collection, publisher, topic) = (p.collection.clone(), self.id.clone(), p.source.topic.clone());
            let (ranges, execution) = (ranges.to_vec(), execution.clone());
            tokio::task::spawn_blocking(move || -> anyhow::Result<Result<(i64, Option<i64>), CatalogError>> {
                let written = output.map(stage::TableSink::finish).transpose()?.flatten();
                if let Some(w) = &written {
                    // The table's log must be able to take the version (other engines write it too).
                    if let Err(e) = tables::delta::ready(&catalog, &collection, &table, &w.schema) {
                        let _ = std::fs::remove_file(catalog.store().scratch(&w.file.path));
                        return Err(e);
                    }
                    // Stored before the commit that names it: nothing is committed without its file.
                    catalog.store().upload(&w.file.path)?;
                }
                let key = written.as_ref().map(|w| w.file.path.clone());
                let txns = ranges
                    .iter()
                    .map(|r| Txn { app_id: format!("{publisher}/{topic}/{}", r.partition), version: r.last + 1 })
                    .collect();
                let version =
                    written.map(|w| NewVersion { table, files: vec![w.file], rows: rows_out, schema: w.schema, txns });
                let commit = BatchCommit {
                    collection: &collection,
                    publisher: &publisher,
                    topic: &topic,
                    version,
                    ranges: &ranges,
                    execution: &execution,
                    dead_letters: &stored_dead,
                    rerun: &[],
                };
                let committed = catalog.commit(&commit);
                if let (Err(_), Some(key)) = (&committed, key) {
                    // Its name is this attempt's alone: nothing else will ever use it.
                    let _ = catalog.store().delete(&key);
                }
                Ok(committed)
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

        // Kafka's group offsets follow, only so lag tools see progress.
        self.commit_group_offsets(ranges);
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

    fn commit_group_offsets(&self, ranges: &[PartitionRange]) {
        let mut tpl = TopicPartitionList::new();
        for r in ranges {
            let _ = tpl.add_partition_offset(&self.publisher.source.topic, r.partition, Offset::Offset(r.last + 1));
        }
        if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
            tracing::warn!(publisher = %self.id, error = %e, "committing group offsets (for lag tools) failed");
        }
    }
}

/// What settling a batch changes on the consuming side.
impl Worker {
    /// After a commit: the catalog's offsets moved past the batch.
    /// (`next` moved past the batch when it closed.)
    fn committed(&mut self, execution: Execution, staged: Vec<PathBuf>) {
        let data_dir = self.node.catalog.data_dir();
        for path in staged {
            let _ = std::fs::remove_file(data_dir.join(path));
        }
        tracing::info!(publisher = %self.id, rows_in = execution.rows_in, rows_out = execution.rows_out, dead_letters = execution.dead_letters, version = ?execution.table_version, "batch committed");
        self.emit(WorkerEvent::Committed(execution));
    }

    /// After a conflict: take the catalog's offsets again and read on from there.
    fn reseek(&mut self, ranges: &[PartitionRange]) {
        let stored = match self.node.catalog.offsets(&self.id, &self.publisher.source.topic) {
            Ok(stored) => stored,
            Err(e) => {
                tracing::error!(publisher = %self.id, error = %e, "reading offsets after a conflict");
                return;
            }
        };
        let partitions: Vec<i32> = ranges.iter().map(|r| r.partition).collect();
        self.queue.forget(&partitions);
        for r in ranges {
            let offset = stored.get(&r.partition).copied();
            self.next.insert(r.partition, offset);
            let position = offset.map_or(Offset::Beginning, Offset::Offset);
            if let Err(e) =
                self.consumer.seek(&self.publisher.source.topic, r.partition, position, Duration::from_secs(10))
            {
                tracing::warn!(publisher = %self.id, partition = r.partition, error = %e, "seeking after a conflict");
            }
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

/// Resolves once shutdown is asked for (or its sender is gone).
async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
