//! Where tables (their data files and Delta logs) and uploaded modules live,
//! by key: `tables/<collection>/<table>/…`, `modules/<sha256>.wasm`. By
//! default the data directory; with `weir serve --store s3://bucket/prefix`,
//! an object store every node of a cluster shares (`object_store`, S3's API:
//! AWS, or any S3-compatible store through `AWS_ENDPOINT_URL`).
//!
//! Calls block (their callers run on the blocking pool). A write that must
//! never replace what is there ([`Store::create`]: a Delta commit) is
//! put-if-absent on both: a hard link locally, S3's `If-None-Match: *` in a
//! bucket, so two nodes, or a zombie and its successor, never overwrite each
//! other's commit.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
use bytes::Bytes;
use futures::StreamExt as _;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::{Path as ObjectPath, PathPart};
use object_store::{ClientConfigKey, ObjectStore, ObjectStoreExt as _, PutMode, PutPayload, RetryConfig};

use crate::files::{Created, create_new_atomically, write_atomically};

/// Where tables and modules live.
pub enum Store {
    /// Under a local directory (the data directory).
    Local { root: PathBuf },
    /// In a bucket, under a prefix.
    Object(Arc<Bucket>),
}

/// An object store, the runtime its HTTP client runs on, and where a file is
/// written locally before it goes up.
pub struct Bucket {
    url: String,
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    scratch: PathBuf,
    runtime: tokio::runtime::Runtime,
}

/// One object of a listing.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its name within the listed directory.
    pub name: String,
    pub size: u64,
    pub modified: SystemTime,
}

/// A file to read in ranges, as parquet does (its footer, then the column
/// chunks it wants): on disk, or in a bucket, each range a ranged GET, so
/// reading a file's schema fetches its footer, not the file.
pub enum Blob {
    File(File, u64),
    Object { bucket: Arc<Bucket>, key: String, len: u64 },
}

/// The store could not be reached, or did not answer in time (an outage, a
/// network cut): what was asked may well succeed later, unchanged. A batch
/// waits this out, however long, rather than counting it as a failed attempt.
#[derive(Debug, thiserror::Error)]
#[error("the object store {url} is unavailable: {source}")]
pub struct Unavailable {
    url: String,
    #[source]
    source: object_store::Error,
}

/// How long one request to the store may take, and how long its retries may
/// go on, before the call fails: a batch whose files cannot be stored fails
/// its attempt and is retried by the worker, with the worker's backoff,
/// rather than holding its thread for object_store's default three minutes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const RETRY_FOR: Duration = Duration::from_secs(15);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Store {
    pub fn local(root: &Path) -> Self {
        Self::Local { root: root.to_path_buf() }
    }

    /// The store named by `url`: `s3://bucket[/prefix]`, configured by the
    /// usual AWS environment variables (`AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` for an
    /// S3-compatible store, `AWS_ALLOW_HTTP=true` for one without TLS).
    /// Files are written under `data_dir` before they go up.
    pub fn open(url: &str, data_dir: &Path) -> anyhow::Result<Self> {
        let Some(rest) = url.strip_prefix("s3://") else {
            bail!("--store {url}: weir stores tables in S3 or an S3-compatible store: give s3://BUCKET/PREFIX");
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            bail!("--store {url}: name the bucket: s3://BUCKET/PREFIX");
        }
        // object_store's HTTP client uses rustls with the process's provider: ring, as everywhere in weir.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let retry = RetryConfig { max_retries: 3, retry_timeout: RETRY_FOR, ..RetryConfig::default() };
        // Set as keys: `with_client_options` would drop those the environment gave (AWS_ALLOW_HTTP).
        let client =
            |key, value: Duration| (AmazonS3ConfigKey::Client(key), humantime::format_duration(value).to_string());
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket).with_retry(retry);
        for (key, value) in [
            client(ClientConfigKey::Timeout, REQUEST_TIMEOUT),
            client(ClientConfigKey::ConnectTimeout, CONNECT_TIMEOUT),
        ] {
            builder = builder.with_config(key, value);
        }
        if std::env::var_os("AWS_REGION").is_none() && std::env::var_os("AWS_DEFAULT_REGION").is_none() {
            builder = builder.with_region("us-east-1");
        }
        let store = builder.build().with_context(|| format!("--store {url}"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("weir-store")
            .enable_all()
            .build()
            .context("starting the object store's client")?;
        let prefix =
            ObjectPath::parse(prefix.trim_matches('/')).with_context(|| format!("--store {url}: the prefix"))?;
        // A node stopped mid-upload left its local copies: their batches were not
        // committed and are read again from Kafka, so none is needed.
        let scratch = data_dir.join("outgoing");
        if let Err(e) = std::fs::remove_dir_all(&scratch)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %scratch.display(), error = %e, "clearing files a stopped node did not store");
        }
        let bucket = Bucket {
            url: url.trim_end_matches('/').into(),
            store: Arc::new(store),
            prefix,
            scratch,
            runtime,
        };
        // Said now, not at the first batch: a store that cannot be reached or refuses us.
        bucket.run("", |store, path| async move { store.list_with_delimiter(Some(&path)).await }).map_err(|e| {
            anyhow::anyhow!(
                "--store {url}: the store did not answer a listing ({e}). Check the bucket exists, the credentials \
                 (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), AWS_REGION, and for an S3-compatible store \
                 AWS_ENDPOINT_URL (with AWS_ALLOW_HTTP=true if it speaks plain HTTP)"
            )
        })?;
        Ok(Self::Object(Arc::new(bucket)))
    }

    /// A store for `weir serve --store URL`, or the data directory without one.
    pub fn open_at(url: Option<&str>, data_dir: &Path) -> anyhow::Result<Self> {
        match url {
            Some(url) => Self::open(url, data_dir),
            None => Ok(Self::local(data_dir)),
        }
    }

    /// Where `key` is, as a reader opens it: an absolute path, or `s3://bucket/prefix/key`.
    pub fn location(&self, key: &str) -> String {
        match self {
            // Absolute without asking the filesystem: also a lock's name, on every commit.
            Self::Local { root } => {
                let path = root.join(key);
                std::path::absolute(&path).unwrap_or(path).display().to_string()
            }
            Self::Object(b) => format!("{}/{key}", b.url),
        }
    }

    /// Where a file that will be stored under `key` is written first: for the
    /// data directory its place (storing it is then nothing more), for a
    /// bucket a local file that [`Store::upload`] sends and removes.
    pub fn scratch(&self, key: &str) -> PathBuf {
        match self {
            Self::Local { root } => root.join(key),
            Self::Object(b) => b.scratch.join(key),
        }
    }

    /// Stores the file written at [`Store::scratch`]`(key)`; returns its size.
    /// The local copy of a file sent to a bucket is removed, sent or not.
    pub fn upload(&self, key: &str) -> anyhow::Result<u64> {
        let local = self.scratch(key);
        let size = std::fs::metadata(&local).with_context(|| format!("{}", local.display()))?.len();
        if let Self::Object(b) = self {
            let uploaded = b.upload(key, &local);
            // Stored or not, the local copy is done with: a failed attempt writes its batch anew.
            let _ = std::fs::remove_file(&local);
            uploaded.map_err(|e| b.failed(e)).with_context(|| format!("storing {}", self.location(key)))?;
        }
        Ok(size)
    }

    /// Writes `key`, replacing what is there; durable when this returns.
    pub fn put(&self, key: &str, bytes: Bytes) -> anyhow::Result<()> {
        match self {
            Self::Local { root } => write_atomically(&root.join(key), &bytes, true),
            Self::Object(b) => b
                .run(key, |store, path| async move { store.put(&path, bytes.into()).await.map(drop) })
                .map_err(|e| b.failed(e)),
        }
        .with_context(|| format!("writing {}", self.location(key)))
    }

    /// Writes each of `files`, all at once: their syncs (or requests) overlap.
    pub fn put_all(&self, files: Vec<(String, Bytes)>) -> anyhow::Result<()> {
        let at_once = files.len();
        crate::parallel::map(files, at_once, |(key, bytes)| self.put(&key, bytes)).map(drop)
    }

    /// Writes `key` only if nothing is there (put-if-absent).
    pub fn create(&self, key: &str, bytes: Bytes) -> anyhow::Result<Created> {
        match self {
            Self::Local { root } => create_new_atomically(&root.join(key), &bytes),
            Self::Object(b) => {
                let create = |store: Arc<dyn ObjectStore>, path| async move {
                    store.put_opts(&path, PutPayload::from(bytes), PutMode::Create.into()).await
                };
                match b.run(key, create) {
                    Ok(_) => Ok(Created::Written),
                    Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                        Ok(Created::AlreadyThere)
                    }
                    Err(e) => Err(b.failed(e)).with_context(|| format!("writing {}", self.location(key))),
                }
            }
        }
    }

    /// The whole of `key`; `None` when it is not there.
    pub fn get(&self, key: &str) -> anyhow::Result<Option<Bytes>> {
        match self {
            Self::Local { root } => match std::fs::read(root.join(key)) {
                Ok(bytes) => Ok(Some(bytes.into())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e.into()),
            },
            Self::Object(b) => match b.run(key, |store, path| async move { store.get(&path).await?.bytes().await }) {
                Ok(bytes) => Ok(Some(bytes)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(b.failed(e)),
            },
        }
        .with_context(|| format!("reading {}", self.location(key)))
    }

    /// `key` to read in ranges (a parquet file); an error when it is not there.
    pub fn blob(&self, key: &str) -> anyhow::Result<Blob> {
        match self {
            Self::Local { root } => {
                let path = root.join(key);
                let file = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
                let len = file.metadata()?.len();
                Ok(Blob::File(file, len))
            }
            Self::Object(bucket) => {
                let len = self.size(key)?.with_context(|| format!("{} is not there", self.location(key)))?;
                Ok(Blob::Object { bucket: bucket.clone(), key: key.to_string(), len })
            }
        }
    }

    /// The size of `key`; `None` when it is not there.
    pub fn size(&self, key: &str) -> anyhow::Result<Option<u64>> {
        match self {
            Self::Local { root } => match std::fs::metadata(root.join(key)) {
                Ok(meta) => Ok(Some(meta.len())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e.into()),
            },
            Self::Object(b) => match b.run(key, |store, path| async move { store.head(&path).await }) {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(b.failed(e)),
            },
        }
        .with_context(|| format!("looking up {}", self.location(key)))
    }

    pub fn exists(&self, key: &str) -> anyhow::Result<bool> {
        Ok(self.size(key)?.is_some())
    }

    /// The objects directly under `dir` (not in its subdirectories); none when it is not there.
    pub fn list(&self, dir: &str) -> anyhow::Result<Vec<Entry>> {
        match self {
            Self::Local { root } => {
                let entries = match std::fs::read_dir(root.join(dir)) {
                    Ok(entries) => entries,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(e).with_context(|| format!("listing {}", self.location(dir))),
                };
                let mut found = Vec::new();
                for entry in entries {
                    let entry = entry?;
                    let meta = entry.metadata()?;
                    if meta.is_file() {
                        let name = entry.file_name().to_string_lossy().into_owned();
                        found.push(Entry { name, size: meta.len(), modified: meta.modified()? });
                    }
                }
                Ok(found)
            }
            Self::Object(b) => {
                let listed = b
                    .run(dir, |store, path| async move { store.list_with_delimiter(Some(&path)).await })
                    .map_err(|e| b.failed(e))
                    .with_context(|| format!("listing {}", self.location(dir)))?;
                Ok(listed
                    .objects
                    .into_iter()
                    .map(|o| Entry {
                        name: o.location.filename().unwrap_or_default().to_string(),
                        size: o.size,
                        modified: o.last_modified.into(),
                    })
                    .collect())
            }
        }
    }

    /// Every file under `dir`, in its subdirectories too (a partitioned
    /// table's), each named by its path relative to `dir`.
    pub fn list_tree(&self, dir: &str) -> anyhow::Result<Vec<Entry>> {
        match self {
            Self::Local { root } => {
                let mut found = Vec::new();
                let mut dirs = vec![String::new()];
                while let Some(sub) = dirs.pop() {
                    let here = if sub.is_empty() { dir.to_string() } else { format!("{dir}/{sub}") };
                    let entries = match std::fs::read_dir(root.join(&here)) {
                        Ok(entries) => entries,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(e).with_context(|| format!("listing {}", self.location(&here))),
                    };
                    for entry in entries {
                        let entry = entry?;
                        let meta = entry.metadata()?;
                        let name = entry.file_name().to_string_lossy().into_owned();
                        let name = if sub.is_empty() { name } else { format!("{sub}/{name}") };
                        if meta.is_dir() {
                            dirs.push(name);
                        } else if meta.is_file() {
                            found.push(Entry { name, size: meta.len(), modified: meta.modified()? });
                        }
                    }
                }
                Ok(found)
            }
            Self::Object(b) => {
                let listed = b
                    .run(dir, |store, path| async move {
                        use futures::TryStreamExt as _;
                        let objects: Vec<_> = store.list(Some(&path)).try_collect().await?;
                        Ok((path, objects))
                    })
                    .map_err(|e| b.failed(e))
                    .with_context(|| format!("listing {}", self.location(dir)))?;
                let (prefix, objects) = listed;
                Ok(objects
                    .into_iter()
                    .filter_map(|o| {
                        let parts: Vec<String> =
                            o.location.prefix_match(&prefix)?.map(|p| p.as_ref().to_string()).collect();
                        Some(Entry { name: parts.join("/"), size: o.size, modified: o.last_modified.into() })
                    })
                    .collect())
            }
        }
    }

    /// Deletes `key`; `false` when it was not there.
    pub fn delete(&self, key: &str) -> anyhow::Result<bool> {
        match self {
            Self::Local { root } => match std::fs::remove_file(root.join(key)) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e.into()),
            },
            // S3 does not say whether there was anything to delete.
            Self::Object(b) => match b.run(key, |store, path| async move { store.delete(&path).await }) {
                Ok(()) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(b.failed(e)),
            },
        }
        .with_context(|| format!("deleting {}", self.location(key)))
    }

    /// Deletes everything under `dir`.
    pub fn delete_all(&self, dir: &str) -> anyhow::Result<()> {
        match self {
            Self::Local { root } => match std::fs::remove_dir_all(root.join(dir)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
                _ => Ok(()),
            },
            Self::Object(b) => b
                .run(dir, |store, path| async move {
                    let objects = store.list(Some(&path)).map(|meta| meta.map(|m| m.location)).boxed();
                    let mut deleted = store.delete_stream(objects);
                    while let Some(done) = deleted.next().await {
                        done?;
                    }
                    Ok(())
                })
                .map_err(|e| b.failed(e)),
        }
        .with_context(|| format!("deleting {}", self.location(dir)))
    }
}

impl Bucket {
    /// An error from the bucket, as weir tells it: [`Unavailable`] unless the
    /// store answered, and said no.
    fn failed(&self, e: object_store::Error) -> anyhow::Error {
        use object_store::Error::*;
        match e {
            NotFound { .. }
            | AlreadyExists { .. }
            | Precondition { .. }
            | NotModified { .. }
            | InvalidPath { .. }
            | NotSupported { .. }
            | NotImplemented { .. }
            | PermissionDenied { .. }
            | Unauthenticated { .. }
            | UnknownConfigurationKey { .. } => e.into(),
            e => Unavailable { url: self.url.clone(), source: e }.into(),
        }
    }

    /// A key's object path, its segments as they are: a partition's
    /// directory holds `%XX` escapes, which the object's name must keep
    /// (as the Delta log names it, once its path is decoded).
    fn path(&self, key: &str) -> ObjectPath {
        let part = |p| PathPart::parse(p).unwrap_or_else(|_| PathPart::from(p));
        self.prefix.parts().chain(key.split('/').filter(|p| !p.is_empty()).map(part)).collect()
    }

    /// Runs `call(store, path of key)` on the store's runtime and waits for it,
    /// from any thread: the caller need not be inside a runtime, and may be
    /// inside another (this blocks it: callers are on the blocking pool).
    fn run<T, F>(&self, key: &str, call: impl FnOnce(Arc<dyn ObjectStore>, ObjectPath) -> F) -> object_store::Result<T>
    where
        T: Send + 'static,
        F: Future<Output = object_store::Result<T>> + Send + 'static,
    {
        let running = self.runtime.spawn(call(self.store.clone(), self.path(key)));
        futures::executor::block_on(running).unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }

    /// One PUT for a small file, a multipart upload for a large one.
    fn upload(&self, key: &str, local: &Path) -> object_store::Result<()> {
        const PART: usize = 16 << 20;
        let mut file = File::open(local).map_err(|e| io_error(local, e))?;
        let size = file.metadata().map_err(|e| io_error(local, e))?.len();
        if size <= PART as u64 {
            let mut bytes = Vec::with_capacity(size as usize);
            file.read_to_end(&mut bytes).map_err(|e| io_error(local, e))?;
            return self.run(key, |store, path| async move { store.put(&path, bytes.into()).await.map(drop) });
        }
        let local = local.to_path_buf();
        self.run(key, |store, path| async move {
            let mut upload = object_store::WriteMultipart::new_with_chunk_size(store.put_multipart(&path).await?, PART);
            let mut chunk = vec![0; PART];
            loop {
                let n = file.read(&mut chunk).map_err(|e| io_error(&local, e))?;
                if n == 0 {
                    break;
                }
                upload.wait_for_capacity(2).await?;
                upload.write(&chunk[..n]);
            }
            upload.finish().await.map(drop)
        })
    }
}

fn io_error(path: &Path, e: std::io::Error) -> object_store::Error {
    object_store::Error::Generic { store: "local", source: format!("{}: {e}", path.display()).into() }
}

impl Blob {
    /// Bytes `range` of an object.
    fn fetch(bucket: &Bucket, key: &str, range: std::ops::Range<u64>) -> parquet::errors::Result<Bytes> {
        let got = bucket.run(key, |store, path| async move { store.get_range(&path, range).await });
        got.map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
    }
}

impl parquet::file::reader::Length for Blob {
    fn len(&self) -> u64 {
        match self {
            Self::File(_, len) | Self::Object { len, .. } => *len,
        }
    }
}

impl parquet::file::reader::ChunkReader for Blob {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        match self {
            Self::File(file, _) => {
                let mut file = file.try_clone()?;
                file.seek(SeekFrom::Start(start))?;
                Ok(Box::new(std::io::BufReader::new(file)))
            }
            Self::Object { bucket, key, len } => {
                Ok(Box::new(std::io::Cursor::new(Self::fetch(bucket, key, start..*len)?)))
            }
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            Self::File(file, _) => file.get_bytes(start, length),
            Self::Object { bucket, key, .. } => Self::fetch(bucket, key, start..start + length as u64),
        }
    }
}
