//! Writing files so that a crash never leaves a half-written one under the
//! real name: write a temporary file of this writer's own, then rename.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;

/// Writes `bytes` to `path` atomically; `durable` also fsyncs before the rename.
/// Two threads or processes may write the same path at once: each has its own temporary name.
pub fn write_atomically(path: &Path, bytes: &[u8], durable: bool) -> anyhow::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension(format!("tmp.{}.{}", std::process::id(), WRITES.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    if durable {
        std::fs::File::open(&tmp).and_then(|f| f.sync_all()).with_context(|| format!("syncing {}", tmp.display()))?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))?;
    Ok(())
}
