//! The audit log: one JSON line per event in `<data dir>/audit.log` — admin
//! actions (tenants, tokens) and every refused token — appended and flushed
//! as it happens, and echoed to the server's log.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::catalog::now_ms;

pub struct Audit {
    file: Mutex<File>,
    path: std::path::PathBuf,
}

/// How far back from its end [`Audit::recent`] reads the log.
const RECENT_BYTES: u64 = 1 << 20;

impl Audit {
    pub fn open(data_dir: &Path) -> anyhow::Result<Self> {
        let path = data_dir.join("audit.log");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening the audit log {}", path.display()))?;
        Ok(Self { file: Mutex::new(file), path })
    }

    /// Appends `{"at_ms", "event", ...fields}`.
    pub fn record(&self, event: &str, fields: Value) {
        let mut line = json!({ "at_ms": now_ms(), "event": event });
        if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
            line.extend(fields);
        }
        tracing::info!(target: "weir::audit", "{line}");
        let mut text = line.to_string();
        text.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = file.write_all(text.as_bytes()) {
            tracing::error!(error = %e, event, "writing the audit log");
        }
    }

    /// This node's last `limit` events, newest first (from the log's last MiB). Blocking.
    pub fn recent(&self, limit: usize) -> anyhow::Result<Vec<Value>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = File::open(&self.path).with_context(|| format!("reading {}", self.path.display()))?;
        let start = file.metadata()?.len().saturating_sub(RECENT_BYTES);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        // A start inside a character spoils only the first line, which is skipped.
        let text = String::from_utf8_lossy(&bytes);
        // Past the first line when it began mid-line.
        let lines = text.lines().skip(usize::from(start > 0));
        let events: Vec<Value> = lines.filter_map(|l| serde_json::from_str(l).ok()).collect();
        Ok(events.into_iter().rev().take(limit).collect())
    }
}
