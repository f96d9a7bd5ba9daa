//! What the Delta log costs alone: a table's versions committed straight
//! through the catalog (as the worker commits them), the time each Delta
//! commit takes after the catalog's, and each checkpoint's, as the table grows.

use std::time::Instant;

use serde::Serialize;
use weir::catalog::Catalog;
use weir::tables::delta;

use crate::common::delta::commit_version;

#[derive(Debug, Clone, Serialize)]
pub struct DeltaCosts {
    /// The median Delta commit (no checkpoint due), in ms.
    pub commit_ms: f64,
    /// Each checkpoint, by the version it was written at, in ms.
    pub checkpoints_ms: Vec<(i64, f64)>,
}

pub fn measure(versions: i64) -> DeltaCosts {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    let (mut commits, mut checkpoints) = (Vec::new(), Vec::new());
    for v in 0..versions {
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
    commits.sort_by(f64::total_cmp);
    DeltaCosts { commit_ms: commits[commits.len() / 2], checkpoints_ms: checkpoints }
}
