//! The stream worker: one per stream publisher. Its loop reads the source
//! into the open batch (which decodes each partition in runs as it fills)
//! until the rollover closes it, and hands each closed batch to a task of its
//! own (`batch`) while the next one fills; it follows the source's
//! assignments, and settles each batch's outcome in order.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{mpsc, oneshot, watch};

use super::batch::{Batches, Outcome};
use super::buffer::{Buffer, ClosedBatch};
use super::{Node, WorkerEvent, WorkerExit, WorkerOptions, stopped};
use crate::catalog::{Execution, PartitionRange};
use crate::formats::RawMessage;
use crate::publisher::StreamPublisher;
use crate::publisher::source::{Rollover, RolloverReason};
use crate::sources::{self, Opened, Ready, Source, SourceEvent};

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

/// Messages taken from the source in one go before the loop looks at
/// shutdown, assignments and the clock again.
const DRAIN_AT_ONCE: usize = 1024;

/// The reading side: the loop, the open batch's offsets, assignments.
struct Worker {
    source: Box<dyn Source>,
    batches: Arc<Batches>,
    worker_id: u64,
    /// Per assigned partition: where the next batch starts (None: nothing stored yet). A
    /// closed batch moves it past itself at once, so the next batch can fill while the
    /// closed one is processed; the catalog's compare-and-set keeps that honest.
    next: BTreeMap<i32, Option<i64>>,
}

impl std::ops::Deref for Worker {
    type Target = Batches;
    fn deref(&self) -> &Batches {
        &self.batches
    }
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
    super::sync_tables(&node, &id, &publisher.collection, &[publisher.output_table()]).await?;
    let observer = events.clone().map(|events| -> crate::formats::writers::Observer {
        Arc::new(move |event| {
            let _ = events.send(WorkerEvent::Registry(event));
        })
    });
    let Opened { source, acks, decoder } = sources::open(&publisher, node.catalog.clone(), &node.sources, observer)?;
    let batches = Batches { publisher, id, node, options, acks, decoder, events, shutdown };
    let mut worker = Worker {
        source,
        batches: Arc::new(batches),
        worker_id: WORKER_IDS.fetch_add(1, Ordering::Relaxed),
        next: BTreeMap::new(),
    };
    let exit = worker.run_loop().await;
    worker.node.budget.release(worker.worker_id);
    exit
}

impl Worker {
    async fn run_loop(&mut self) -> anyhow::Result<WorkerExit> {
        let rollover = self.publisher.rollover();
        let mut buffer = Buffer::default();
        tracing::info!(publisher = %self.id, source = %self.publisher.source_name(), ?rollover, "stream worker started");
        // Closed batches being processed, oldest first, while the next one fills.
        let mut in_flight: VecDeque<InFlight> = VecDeque::new();
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
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                    buffer.due(&rollover, tokio::time::Instant::now()).map(|reason| buffer.close(reason))
                }
                ready = self.source.ready() => match ready {
                    Ready::Messages => self.read(&mut buffer, &rollover)?,
                    Ready::Event(event) => {
                        self.follow(event, &mut buffer);
                        None
                    }
                },
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

    /// Follows a change in what the source gives this worker.
    fn follow(&mut self, event: SourceEvent, buffer: &mut Buffer) {
        match event {
            SourceEvent::Assigned(offsets) => {
                self.next.extend(offsets.iter().map(|(p, o)| (*p, *o)));
                self.emit(WorkerEvent::Assigned(offsets));
            }
            SourceEvent::Refused(reason) => self.emit(WorkerEvent::SourceRefused { reason }),
            SourceEvent::Unreachable(reason) => self.emit(WorkerEvent::SourceUnreachable { reason }),
            SourceEvent::Reachable => self.emit(WorkerEvent::SourceReachable),
            SourceEvent::Revoked(partitions) => {
                // Not committed, so not lost: whoever gets them re-reads from the catalog.
                buffer.drop_partitions(&partitions);
                for p in &partitions {
                    self.next.remove(p);
                }
                self.emit(WorkerEvent::Revoked(partitions));
            }
        }
    }

    /// Buffers the messages the source has until it has no more, a batch
    /// closes, or [`DRAIN_AT_ONCE`] have been read; the loop then looks at
    /// shutdown, assignments and the clock again.
    fn read(&mut self, buffer: &mut Buffer, rollover: &Rollover) -> anyhow::Result<Option<ClosedBatch>> {
        // One clock reading and one look at the node's budget serve the whole run.
        let now = tokio::time::Instant::now();
        let budget = self.node.budget.share(self.worker_id, buffer.bytes());
        for _ in 0..DRAIN_AT_ONCE {
            let Some(message) = self.source.take() else { break };
            match message {
                Ok(raw) => {
                    self.accept(raw, buffer, now)?;
                    let reason = buffer
                        .due(rollover, now)
                        .or(budget.over(buffer.bytes()).then_some(RolloverReason::MemoryBudget));
                    if let Some(reason) = reason {
                        return Ok(Some(buffer.close(reason)));
                    }
                }
                // The source reconnects by itself; say so and keep going.
                Err(e) => tracing::warn!(publisher = %self.id, error = %format!("{e:#}"), "reading the source"),
            }
        }
        // The other workers see this buffer as it is now.
        self.node.budget.share(self.worker_id, buffer.bytes());
        Ok(None)
    }

    /// Buffers a message unless the catalog says it is already committed.
    fn accept(&mut self, raw: RawMessage, buffer: &mut Buffer, now: tokio::time::Instant) -> anyhow::Result<()> {
        let expected = match self.next.get(&raw.partition) {
            Some(expected) => *expected,
            None => {
                let stored = self.node.catalog.offsets(&self.id, self.publisher.source_name())?;
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

    /// After a dropped batch: take the catalog's offsets again and read on from there.
    fn reseek(&mut self, ranges: &[PartitionRange]) {
        let stored = match self.node.catalog.offsets(&self.id, self.publisher.source_name()) {
            Ok(stored) => stored,
            Err(e) => {
                tracing::error!(publisher = %self.id, error = %e, "reading offsets after a conflict");
                return;
            }
        };
        let positions: BTreeMap<i32, Option<i64>> =
            ranges.iter().map(|r| (r.partition, stored.get(&r.partition).copied())).collect();
        self.next.extend(positions.iter().map(|(p, o)| (*p, *o)));
        self.source.rewind(&positions);
    }
}
