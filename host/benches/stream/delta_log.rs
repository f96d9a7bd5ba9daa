//! What the Delta log costs alone: a table's versions committed straight
//! through the catalog (as the worker commits them), the time each Delta
//! commit takes after the catalog's, and each checkpoint's, as the table grows;
//! and a commit's cost when other writers committed first (it reads their
//! commits before it writes its own).

use std::time::Instant;

use serde::Serialize;
use weir::catalog::Catalog;
use weir::tables::delta;

use crate::common::delta::{commit_version, staged};

#[derive(Debug, Clone, Serialize)]
pub struct DeltaCosts {
    /// The median Delta commit (no checkpoint due), in ms.
    pub commit_ms: f64,
    /// The median check before a batch commits (is the log up to date, can
    /// it take the version), in ms.
    pub ready_ms: f64,
    /// Each checkpoint, by the version it was written at, in ms.
    pub checkpoints_ms: Vec<(i64, f64)>,
    /// The median Delta commit with that many other writers' commits before
    /// it to read first, in ms.
    pub after_foreign_ms: Vec<(usize, f64)>,
    /// The catalog's commit of a version (its offsets, execution and version
    /// row) without Iceberg metadata and with it: median and mean, in ms.
    pub catalog_commit_ms: (f64, f64),
    pub iceberg_commit_ms: (f64, f64),
}

/// Rounds of each catch-up measurement (the median is kept).
const CATCH_UP_ROUNDS: usize = 15;

pub fn measure(versions: i64) -> DeltaCosts {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    let (mut commits, mut checkpoints, mut checks) = (Vec::new(), Vec::new(), Vec::new());
    let columns = serde_json::json!({ "type": "struct", "fields": [
        { "name": "id", "type": "long", "nullable": true, "metadata": {} },
    ] });
    for v in 0..versions {
        let t = Instant::now();
        delta::ready(&catalog, "events", "t", &columns).unwrap();
        checks.push(t.elapsed().as_secs_f64() * 1e3);
        let version = commit_version(&catalog, v * 100..v * 100 + 100, None, false).unwrap();
        let t = Instant::now();
        let synced = delta::sync(&catalog, "events", "t").unwrap();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if synced.checkpoints > 0 {
            checkpoints.push((version, ms));
        } else {
            commits.push(ms);
        }
    }
    let (catalog_commit_ms, iceberg_commit_ms) = catalog_commits(versions);
    DeltaCosts {
        commit_ms: median(commits),
        ready_ms: median(checks),
        checkpoints_ms: checkpoints,
        after_foreign_ms: [0, 1, 100].into_iter().map(|n| (n, after_foreign(n))).collect(),
        catalog_commit_ms,
        iceberg_commit_ms,
    }
}

/// The catalog's commit of `versions` versions to a Delta table and to an
/// Iceberg one (its manifest, manifest list and metadata file made before
/// and in the transaction), a version to each in turn: median and mean ms.
fn catalog_commits(versions: i64) -> ((f64, f64), (f64, f64)) {
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let catalogs = dirs.each_ref().map(|d| Catalog::open(d.path()).unwrap());
    let mut times = [Vec::new(), Vec::new()];
    for v in 0..versions {
        for (iceberg, catalog) in [false, true].into_iter().zip(&catalogs) {
            let version = staged(catalog, v * 100..v * 100 + 100, None, false);
            let t = Instant::now();
            version.commit(catalog, iceberg).unwrap();
            times[iceberg as usize].push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    times
        .map(|t| {
            let mean = t.iter().sum::<f64>() / t.len() as f64;
            (median(t), mean)
        })
        .into()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The median commit, in ms, with `foreign` commits of another writer (a
/// streaming writer's transaction ids, as small as commits come) to read first.
fn after_foreign(foreign: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    let log = dir.path().join(delta::table_dir("events", "t")).join("_delta_log");
    let mut times = Vec::new();
    for round in 0..CATCH_UP_ROUNDS as i64 {
        let ids = round * 100..round * 100 + 100;
        if round > 0 {
            let latest = delta::latest(catalog.store(), &delta::table_dir("events", "t")).unwrap().unwrap();
            for v in latest + 1..=latest + foreign as i64 {
                let commit = format!(
                    "{{\"commitInfo\":{{\"operation\":\"STREAMING UPDATE\",\"engineInfo\":\"another\"}}}}\n{{\"txn\":{{\"appId\":\"another\",\"version\":{v}}}}}\n"
                );
                std::fs::write(log.join(format!("{v:020}.json")), commit).unwrap();
            }
        }
        commit_version(&catalog, ids, None, false).unwrap();
        let t = Instant::now();
        delta::sync(&catalog, "events", "t").unwrap();
        if round > 0 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    median(times)
}
