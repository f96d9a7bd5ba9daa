//! Compiled components on disk, keyed by (sha256 of the component, the
//! engine's compatibility hash), so a restart or a second `run-plugin` skips
//! compilation. Only artifacts this cache wrote are ever deserialized.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a loaded plugin's machine code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    /// Compiled from the component bytes in this process.
    Compiled,
    /// Read from the artifact cache.
    Cached,
}

/// `sha256:<hex>` of a component's bytes: its content address.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Feeds a `Hash` value into sha256, so the engine's compatibility hash is
/// stable across processes (std's `DefaultHasher` is not).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    fn finish(&self) -> u64 {
        unreachable!("only the sha256 digest is read")
    }
}

/// The artifact cache directory.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
    engine_hash: String,
}

impl ArtifactCache {
    pub fn new(engine: &Engine, dir: impl Into<PathBuf>) -> Self {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_hash = hex::encode(&hasher.0.finalize()[..12]);
        Self { dir: dir.into(), engine_hash }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir.join(format!("{hex}-{}.cwasm", self.engine_hash))
    }

    /// The compiled component for `bytes`, from the cache when present and
    /// readable; otherwise compiled and stored. `compile` reports its own errors.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        digest: &str,
        compile: impl FnOnce() -> Result<Component, super::LoadError>,
    ) -> Result<(Component, Origin), super::LoadError> {
        let path = self.path(digest);
        // Read into memory rather than mmap the file: a file truncated under a
        // mapping would kill the process with SIGBUS, a read only fails.
        if let Ok(bytes) = std::fs::read(&path) {
            // SAFETY: the file is in our own cache directory, written by `store`
            // below from `Component::serialize` of an engine with the same
            // compatibility hash (part of the file name). wasmtime re-checks
            // the header and refuses artifacts of another engine config.
            match unsafe { Component::deserialize(engine, &bytes) } {
                Ok(component) => return Ok((component, Origin::Cached)),
                // Torn or stale artifact: fall through and rewrite it.
                Err(_) => {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
        let component = compile()?;
        self.store(&path, &component).map_err(super::LoadError::Cache)?;
        Ok((component, Origin::Compiled))
    }

    fn store(&self, path: &Path, component: &Component) -> anyhow::Result<()> {
        let bytes = component.serialize().map_err(anyhow::Error::from)?;
        crate::files::write_atomically(path, &bytes, false)
    }
}
