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
}

impl Audit {
    pub fn open(data_dir: &Path) -> anyhow::Result<Self> {
        let path = data_dir.join("audit.log");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening the audit log {}", path.display()))?;
        Ok(Self { file: Mutex::new(file) })
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
}
