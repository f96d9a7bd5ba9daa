//! Re-running dead letters kept in the catalog once their cause is fixed (the
//! declared schema widened, the producer's bytes understood, the plugin
//! corrected). The chosen letters are decoded with the publisher's current
//! declaration; those that now decode go through its current plugin, one
//! frame per partition as a batch would; and what the plugin writes becomes
//! one new table version, committed in the catalog transaction that also
//! removes those letters. So a letter reaches the table at most once: a second
//! re-run of it, at the same time or later, finds it gone and commits nothing.
//! Letters that still do not decode stay kept, and the answer says why.
//!
//! The publisher's worker goes on beside it: a re-run advances no offsets, and
//! the catalog numbers the two's versions one after the other.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;

use crate::catalog::{Catalog, CatalogError, Execution, PartitionRange, StoredDeadLetter, Timings, now_ms};
use crate::formats::RawMessage;
use crate::plugin::frames::Unframed;
use crate::plugin::{Declared, Runtime};
use crate::publisher::StreamPublisher;
use crate::stream::stage::{self, TableSink, TableSinks};
use crate::tables;
use crate::tables::file;
use crate::tables::partition::PartitionSpec;

/// How long a re-run waits for the schema registry to give the writer
/// schemas its letters name.
const REGISTRY_WAIT: Duration = Duration::from_secs(60);

/// What a re-run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Rerun {
    /// The letters chosen.
    pub chosen: usize,
    /// Those that decoded and went through the plugin (and are no longer kept).
    pub rerun: usize,
    /// Those that still do not decode, and why: they stay kept.
    pub still_dead: Vec<StillDead>,
    /// The rows the plugin wrote, and the version that holds them (none when
    /// it wrote nothing, or nothing was re-run).
    pub rows_out: u64,
    pub execution: Option<i64>,
    pub version: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct StillDead {
    pub partition: i32,
    pub offset: i64,
    pub error: String,
}

/// Why a re-run committed nothing.
#[derive(Debug, thiserror::Error)]
pub enum RerunError {
    /// The plugin refused or failed on the letters: nothing was committed and
    /// every letter stays kept.
    #[error("the plugin did not take the re-run letters, so nothing was committed and they stay kept: {0}")]
    Plugin(String),
    /// Another re-run committed one of them first.
    #[error(transparent)]
    Gone(CatalogError),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// Re-runs `letters` (kept by `publisher`, whose catalog id is `id`).
pub async fn rerun(
    catalog: &Arc<Catalog>,
    runtime: &Arc<Runtime>,
    publisher: &StreamPublisher,
    id: &str,
    letters: Vec<StoredDeadLetter>,
) -> Result<Rerun, RerunError> {
    let started_at_ms = now_ms();
    let topic = publisher.source_name().to_string();
    let mut report = Rerun { chosen: letters.len(), ..Rerun::default() };
    // One run per partition, in offset order, as the worker decodes them.
    let mut runs: BTreeMap<i32, Vec<RawMessage>> = BTreeMap::new();
    for letter in letters {
        if letter.topic != topic {
            report.still_dead.push(StillDead {
                partition: letter.partition,
                offset: letter.offset,
                error: format!("read from topic `{}`, and the publisher now reads `{topic}`", letter.topic),
            });
            continue;
        }
        let message = RawMessage::new(
            letter.partition,
            letter.offset,
            letter.timestamp,
            letter.key.as_deref(),
            letter.value.as_deref(),
            letter.headers,
        );
        runs.entry(letter.partition).or_default().push(message);
    }

    let decoder = crate::sources::decoder(publisher, None)?;
    let decoding = Instant::now();
    let (mut frames, mut rerun, mut ranges) = (Vec::new(), Vec::new(), Vec::new());
    for (partition, mut messages) in runs {
        messages.sort_by_key(|m| m.offset);
        let offsets: Vec<i64> = messages.iter().map(|m| m.offset).collect();
        let decoded = tokio::time::timeout(REGISTRY_WAIT, decoder.spawn(messages))
            .await
            .context("the schema registry did not give the letters' writer schemas within a minute: try again")?;
        let failed: Vec<i64> = decoded.dead.iter().map(|d| d.message.offset).collect();
        for dead in decoded.dead {
            let (partition, offset) = (dead.message.partition, dead.message.offset);
            report.still_dead.push(StillDead { partition, offset, error: dead.error });
        }
        let good: Vec<i64> = offsets.into_iter().filter(|o| !failed.contains(o)).collect();
        if let (Some(&first), Some(&last)) = (good.first(), good.last()) {
            ranges.push(PartitionRange { partition, first, last, expected: None });
            rerun.extend(good.iter().map(|&o| (partition, o)));
            frames.push(Unframed { schema: decoded.batch.schema(), batches: vec![decoded.batch] });
        }
    }
    let decode_ms = decoding.elapsed().as_secs_f64() * 1e3;
    report.rerun = rerun.len();
    if rerun.is_empty() {
        return Ok(report);
    }

    // The plugin, as a batch of these rows would meet it.
    let table = publisher.output_table();
    let key = file::table_file(&publisher.collection, &table, &topic, &ranges);
    let sink = TableSinks::new(vec![(
        table.clone(),
        TableSink::new(catalog.store().scratch(&key), key, publisher.partitioning.clone()),
    )]);
    let declared = Declared::new(vec![topic.clone()], vec![table.clone()]);
    let publishing = Instant::now();
    let run = runtime
        .publish_blocking(publisher.plugin.clone(), vec![frames], publisher.limits.clone(), Some(declared), sink)
        .await;
    let sink = run.outcome.map_err(|e| RerunError::Plugin(e.to_string()))?;
    let publish_ms = publishing.elapsed().as_secs_f64() * 1e3;

    let rows_out = sink.rows();
    let timings = Timings { decode: decode_ms, publish: publish_ms, ..Timings::default() };
    let execution = Execution {
        id: 0,
        publisher: id.to_string(),
        status: "committed".into(),
        rollover_reason: "rerun".into(),
        rows_in: rerun.len() as u64,
        rows_out,
        dead_letters: 0,
        offsets: ranges,
        table_version: None,
        started_at_ms,
        timings_ms: timings,
        plugin_log: serde_json::to_value(&run.log).unwrap_or_default(),
        error: None,
    };
    let (task_catalog, collection, id) = (catalog.clone(), publisher.collection.clone(), id.to_string());
    let spec = publisher.partitioning.spec.clone();
    let iceberg = publisher.table_format == tables::TableFormat::Iceberg;
    let committed = tokio::task::spawn_blocking(move || {
        commit(&task_catalog, &collection, &id, &topic, sink, &execution, &rerun, &spec, iceberg)
    })
    .await
    .expect("committing does not panic")?;
    (report.execution, report.version, report.rows_out) = (Some(committed.0), committed.1, rows_out);
    if report.version.is_some() {
        let (catalog, collection) = (catalog.clone(), publisher.collection.clone());
        let synced = tokio::task::spawn_blocking(move || tables::delta::sync(&catalog, &collection, &table))
            .await
            .expect("writing the Delta log does not panic");
        if let Err(e) = synced {
            tracing::error!(publisher = %publisher.id(), error = %format!("{e:#}"), "writing the table's Delta log after a re-run (the version is committed; the log is written again at the next commit and at start)");
        }
    }
    Ok(report)
}

/// The version and the letters' removal, in one catalog transaction; the
/// table's file stored first, and removed again if the commit fails.
#[allow(clippy::too_many_arguments)]
fn commit(
    catalog: &Catalog,
    collection: &str,
    id: &str,
    topic: &str,
    sink: TableSinks,
    execution: &Execution,
    rerun: &[(i32, i64)],
    spec: &PartitionSpec,
    iceberg: bool,
) -> Result<(i64, Option<i64>), RerunError> {
    let commit = stage::Commit {
        collection,
        publisher: id,
        topic,
        ranges: &[],
        execution,
        dead_letters: &[],
        rerun,
        txns: vec![],
        partition_by: spec.texts(),
        iceberg,
    };
    let committed = sink.commit(catalog, commit).map_err(RerunError::Other)?;
    committed.map_err(|e| match e {
        e @ CatalogError::RerunGone { .. } => RerunError::Gone(e),
        e => RerunError::Other(e.into()),
    })
}
