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

/// Whether [`create_new_atomically`] wrote the file or found one there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    Written,
    AlreadyThere,
}

/// Writes `bytes` to `path` only if nothing is there (put-if-absent), whole
/// or not at all: a temporary file is synced, then hard-linked under the real
/// name, which fails if that name exists. Two writers racing for one name: one
/// writes it, the other finds it. The name itself is not synced: a caller
/// whose file can be written again after a crash does not wait for it.
pub fn create_new_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<Created> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), WRITES.fetch_add(1, Ordering::Relaxed)));
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut file, bytes)?;
        file.sync_all()?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(Created::Written),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(Created::AlreadyThere),
            Err(e) => Err(e),
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    written.with_context(|| format!("writing {}", path.display()))
}
