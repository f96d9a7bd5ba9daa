//! Staging and table files: parquet on local disk, named from the source
//! offsets so a replay of the same batch writes the same names.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use sha2::{Digest, Sha256};

use crate::catalog::PartitionRange;

/// `staging/<collection>/<publisher>/<topic>/<partition>-<first>-<last>.parquet`, relative to the data directory.
pub fn staged_file(collection: &str, publisher: &str, topic: &str, range: &PartitionRange) -> PathBuf {
    Path::new("staging")
        .join(collection)
        .join(publisher)
        .join(topic)
        .join(format!("{}-{}-{}.parquet", range.partition, range.first, range.last))
}

/// `tables/<collection>/<table>/part-<digest of the offset ranges>.parquet`, relative to the data directory.
pub fn table_file(collection: &str, table: &str, topic: &str, ranges: &[PartitionRange]) -> PathBuf {
    let mut hasher = Sha256::new();
    hasher.update(topic.as_bytes());
    for r in ranges {
        hasher.update(format!("/{}:{}-{}", r.partition, r.first, r.last).as_bytes());
    }
    let digest = hex::encode(&hasher.finalize()[..10]);
    Path::new("tables").join(collection).join(table).join(format!("part-{digest}.parquet"))
}

/// How a parquet file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A table's file, kept: dictionary-encoded and zstd-compressed.
    Table,
    /// A staged file, deleted once its batch commits: written plainly and
    /// without statistics, because encoding, compressing and min/max of every
    /// string cost more CPU than its bytes on disk; and not synced to disk.
    Staged,
}

/// Writes `batches` as one parquet file, via a temporary name and a rename, so
/// a crash never leaves a half-written file under the real name.
pub fn write_parquet(path: &Path, schema: &SchemaRef, batches: &[RecordBatch], kind: Kind) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("parquet.tmp");
    let props = match kind {
        Kind::Table => WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default())),
        Kind::Staged => WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::None),
    }
    .build();
    let file = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props))?;
    for batch in batches {
        writer.write(batch)?;
    }
    let file = writer.into_inner()?;
    // A table's file must be on disk before the catalog names it. A staged file
    // need not be: nothing reads it back, and after a crash the batch is read
    // from Kafka again and staged anew under the same name.
    if kind == Kind::Table {
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))?;
    Ok(())
}
