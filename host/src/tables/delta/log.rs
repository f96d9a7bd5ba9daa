//! Reading a Delta log, whoever wrote it: its files, each commit's actions,
//! and the state they add up to. One reader serves weir's writer (which needs
//! only the log's [`Head`]: protocol, metadata, transaction ids) and weir's
//! own queries (which need the live files too). A checkpoint, weir's or
//! another writer's, is read as the actions its rows hold.

use std::collections::{BTreeMap, HashSet};

use anyhow::{Context as _, bail};
use arrow::array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

use crate::store::Store;

pub(super) fn log_dir(table_dir: &str) -> String {
    format!("{table_dir}/_delta_log")
}

pub(super) fn commit_file(table_dir: &str, version: i64) -> String {
    format!("{}/{version:020}.json", log_dir(table_dir))
}

pub(super) fn checkpoint_file(table_dir: &str, version: i64) -> String {
    format!("{}/{version:020}.checkpoint.parquet", log_dir(table_dir))
}

pub(super) struct LogFiles {
    pub commits: Vec<i64>,
    pub checkpoints: Vec<i64>,
}

pub(super) fn log_files(store: &Store, dir: &str) -> anyhow::Result<LogFiles> {
    let mut files = LogFiles { commits: Vec::new(), checkpoints: Vec::new() };
    for entry in store.list(&log_dir(dir))? {
        let name = entry.name;
        if let Some(v) = name.strip_suffix(".json").and_then(|n| n.parse().ok()) {
            files.commits.push(v);
        } else if let Some(v) = name.strip_suffix(".checkpoint.parquet").and_then(|n| n.parse().ok()) {
            files.checkpoints.push(v);
        }
    }
    files.commits.sort_unstable();
    files.checkpoints.sort_unstable();
    Ok(files)
}

/// One commit of the log, as its writer wrote it.
#[derive(Debug, Clone)]
pub struct Commit {
    pub version: i64,
    pub actions: Vec<Value>,
}

impl Commit {
    pub(super) fn parse(key: &str, version: i64, bytes: &[u8]) -> anyhow::Result<Self> {
        let actions = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.trim_ascii().is_empty())
            .map(|line| serde_json::from_slice(line).with_context(|| format!("{key}: a line is not JSON")))
            .collect::<anyhow::Result<_>>()?;
        Ok(Self { version, actions })
    }

    fn info(&self) -> Option<&Value> {
        self.actions.iter().find_map(|a| a.get("commitInfo"))
    }

    /// The weir version this commit holds, if weir wrote it.
    pub fn weir_version(&self) -> Option<i64> {
        self.info()?.get("weirVersion")?.as_i64()
    }

    /// Who wrote it and what it did, in a user's words: "delta-rs.0.28 (OPTIMIZE)".
    pub fn writer(&self) -> String {
        let Some(info) = self.info() else { return "a writer that left no commitInfo".into() };
        let engine = ["engineInfo", "clientVersion"].iter().find_map(|k| info.get(*k).and_then(Value::as_str));
        let engine = engine.unwrap_or("an unnamed writer");
        match info.get("operation").and_then(Value::as_str) {
            Some(op) => format!("{engine} ({op})"),
            None => engine.to_string(),
        }
    }
}

/// The commit at `version`, if the log has it.
pub fn read_commit(store: &Store, dir: &str, version: i64) -> anyhow::Result<Option<Commit>> {
    let key = commit_file(dir, version);
    store.get(&key)?.map(|bytes| Commit::parse(&store.location(&key), version, &bytes)).transpose()
}

/// Which commit last set a piece of the table's state, and who wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetBy {
    pub version: i64,
    pub writer: String,
}

/// What a writer needs to know of a table: how far its log goes, its
/// protocol and metadata (and who last changed them), and each application's
/// transaction version.
#[derive(Debug, Clone)]
pub struct Head {
    /// The newest version read (-1: the log has none).
    pub version: i64,
    pub protocol: Option<Value>,
    pub protocol_by: Option<SetBy>,
    pub metadata: Option<Value>,
    pub metadata_by: Option<SetBy>,
    /// appId → its transaction version (a partition's next offset), for checkpoints.
    pub txns: BTreeMap<String, i64>,
    /// weir's versions in the newest commits read, with the Delta version
    /// each is in (at most [`PLACED_KEPT`]): the log may hold a version the
    /// catalog has not noted (a crash came between the two).
    pub placed: BTreeMap<i64, i64>,
}

/// How many weir versions a [`Head`] remembers the place of: as many as the
/// commits after a checkpoint, which is where reading a log starts.
const PLACED_KEPT: usize = super::CHECKPOINT_INTERVAL as usize;

impl Default for Head {
    fn default() -> Self {
        Self {
            version: -1,
            protocol: None,
            protocol_by: None,
            metadata: None,
            metadata_by: None,
            txns: BTreeMap::new(),
            placed: BTreeMap::new(),
        }
    }
}

impl Head {
    /// The table's columns, as the log's metadata has them.
    pub fn schema(&self) -> Option<Value> {
        let text = self.metadata.as_ref()?.get("schemaString")?.as_str()?;
        serde_json::from_str(text).ok()
    }

    fn apply(&mut self, version: i64, action: &Value, writer: &dyn Fn() -> String) {
        if let Some(protocol) = action.get("protocol") {
            self.protocol = Some(protocol.clone());
            self.protocol_by = Some(SetBy { version, writer: writer() });
        } else if let Some(metadata) = action.get("metaData") {
            self.metadata = Some(metadata.clone());
            self.metadata_by = Some(SetBy { version, writer: writer() });
        } else if let Some(txn) = action.get("txn") {
            if let (Some(app), Some(v)) = (txn["appId"].as_str(), txn["version"].as_i64()) {
                self.txns.insert(app.to_string(), v);
            }
        }
    }

    /// Moves the head past `commit` (the next one in the log).
    pub fn follow(&mut self, commit: &Commit) {
        let writer = || commit.writer();
        for action in &commit.actions {
            self.apply(commit.version, action, &writer);
        }
        if let Some(v) = commit.weir_version() {
            self.placed.insert(v, commit.version);
            if self.placed.len() > PLACED_KEPT {
                self.placed.pop_first();
            }
        }
        self.version = commit.version;
    }
}

/// A file a version reads, with the `add` action that added it.
#[derive(Debug, Clone)]
pub struct LiveFile {
    /// Relative to the table's directory.
    pub path: String,
    pub rows: u64,
    /// The Delta version that added it.
    pub added_in: i64,
    pub add: Value,
}

/// A table as of one Delta version: its head and the files it reads.
#[derive(Debug, Clone, Default)]
pub struct LogState {
    pub head: Head,
    /// Oldest first.
    pub files: Vec<LiveFile>,
    /// Files that the commits read after the checkpoint removed.
    pub removed: HashSet<String>,
}

impl LogState {
    pub fn version(&self) -> i64 {
        self.head.version
    }

    fn apply(&mut self, commit: &Commit) {
        for action in &commit.actions {
            if let Some(add) = action.get("add") {
                let path = path_of(add);
                self.files.retain(|f| f.path != path);
                self.removed.remove(&path);
                let rows = rows_of(add["stats"].as_str());
                self.files.push(LiveFile { path, rows, added_in: commit.version, add: add.clone() });
            } else if let Some(remove) = action.get("remove") {
                let path = path_of(remove);
                self.files.retain(|f| f.path != path);
                self.removed.insert(path);
            }
        }
        self.head.follow(commit);
    }
}

/// A path as the log writes it: relative, URL-encoded (Delta's rule; weir's
/// own names need no encoding, others' may).
fn path_of(action: &Value) -> String {
    decode_path(action["path"].as_str().unwrap_or_default())
}

/// A path (relative to the table) as the log writes it: a URI's path, each
/// byte outside its unreserved characters (and `/`, `=`) as `%XX`.
pub fn encode_path(path: &str) -> String {
    percent_encode(path, b"/=")
}

/// `text` with each byte but a URL's unreserved characters (and `keep`) as `%XX`.
pub fn percent_encode(text: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
            b if keep.contains(&b) => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A path as the log writes it, decoded.
pub fn decode_path(path: &str) -> String {
    if !path.contains('%') {
        return path.to_string();
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn rows_of(stats: Option<&str>) -> u64 {
    stats.and_then(|s| serde_json::from_str::<Value>(s).ok()).and_then(|s| s["numRecords"].as_u64()).unwrap_or(0)
}

/// Why a version cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the table has no Delta log yet")]
    NoLog,
    #[error("the log has no version {version}: its latest is {latest}")]
    NoVersion { version: i64, latest: i64 },
    #[error(transparent)]
    Read(#[from] anyhow::Error),
}

/// The table at `dir` as of `version` (default: its latest): the newest
/// checkpoint at or before it, then each commit after, in order.
pub fn replay(store: &Store, dir: &str, version: Option<i64>) -> Result<LogState, ReplayError> {
    let files = log_files(store, dir)?;
    let latest = *files.commits.last().ok_or(ReplayError::NoLog)?;
    let version = version.unwrap_or(latest);
    if files.commits.binary_search(&version).is_err() {
        return Err(ReplayError::NoVersion { version, latest });
    }
    let mut state = LogState::default();
    if let Some(&cp) = files.checkpoints.iter().rev().find(|c| **c <= version) {
        state.apply(&read_checkpoint(store, &checkpoint_file(dir, cp), cp)?);
        // A checkpoint's tombstones are not removals since it.
        state.removed.clear();
    }
    for v in state.version() + 1..=version {
        let commit = read_commit(store, dir, v)?
            .with_context(|| format!("{} is missing", store.location(&commit_file(dir, v))))?;
        state.apply(&commit);
    }
    Ok(state)
}

/// A checkpoint's rows as the actions they hold (each row one action: the
/// column of its kind set, the others null), so that it reads like a commit
/// at its version.
fn read_checkpoint(store: &Store, key: &str, version: i64) -> anyhow::Result<Commit> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(store.blob(key)?)?.build()?;
    let mut json = arrow::json::ArrayWriter::new(Vec::new());
    for batch in reader {
        let batch: RecordBatch = batch?;
        // Only the kinds of action that make the state; another writer's
        // checkpoint may carry more columns (parsed stats, sidecars, …).
        let keep: Vec<usize> = ["protocol", "metaData", "txn", "add"]
            .iter()
            .filter_map(|name| batch.schema().index_of(name).ok())
            .collect();
        json.write(&batch.project(&keep)?)?;
    }
    json.finish()?;
    let json = json.into_inner();
    let rows: Vec<Value> = if json.is_empty() { Vec::new() } else { serde_json::from_slice(&json)? };
    let mut actions = Vec::with_capacity(rows.len());
    for row in rows {
        let Value::Object(row) = row else { bail!("{key}: a row is not an object") };
        // Null columns are left out: what is left is the row's one action.
        actions.extend(row.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| serde_json::json!({ k: v })));
    }
    Ok(Commit { version, actions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_url_decoded_as_delta_writes_them() {
        assert_eq!(decode_path("part-0001%20a%3Ab.parquet"), "part-0001 a:b.parquet");
        assert_eq!(decode_path("plain.parquet"), "plain.parquet");
        assert_eq!(decode_path("odd%2"), "odd%2");
        let hive = "country=a%2Fb%20%C3%B1/part-1.parquet";
        assert_eq!(encode_path(hive), "country=a%252Fb%2520%25C3%25B1/part-1.parquet");
        assert_eq!(decode_path(&encode_path(hive)), hive);
    }

    #[test]
    fn the_head_follows_protocol_metadata_and_txns_naming_who_set_them() {
        let text = concat!(
            r#"{"commitInfo":{"operation":"ADD FEATURE","clientVersion":"delta-rs.0.28"}}"#,
            "\n",
            r#"{"protocol":{"minReaderVersion":3,"minWriterVersion":7}}"#,
            "\n",
            r#"{"txn":{"appId":"p/t/0","version":42}}"#,
            "\n"
        );
        let commit = Commit::parse("k", 7, text.as_bytes()).unwrap();
        let mut head = Head::default();
        head.follow(&commit);
        assert_eq!(head.version, 7);
        assert_eq!(head.protocol_by, Some(SetBy { version: 7, writer: "delta-rs.0.28 (ADD FEATURE)".into() }));
        assert_eq!(head.txns["p/t/0"], 42);
        assert_eq!(commit.weir_version(), None);
    }
}
