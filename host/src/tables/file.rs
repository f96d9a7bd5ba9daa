//! Table files: how weir writes parquet, for a table (its data files,
//! checkpoints, compactions) or for a failed attempt's staged batch, and the
//! key a table's data file gets in the store.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context as _;
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowRowGroupWriterFactory;
use parquet::arrow::arrow_writer::{ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn, compute_leaves};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use sha2::{Digest, Sha256};

use crate::catalog::PartitionRange;

/// A table's directory: its key in the store (relative to the data directory, by default).
pub fn table_dir(collection: &str, table: &str) -> String {
    format!("tables/{collection}/{table}")
}

/// `tables/<collection>/<table>/part-<digest of the offset ranges>-<random>.parquet`,
/// its key in the store: named for what it holds, and unique to this attempt,
/// so that two workers racing for a partition never write one file.
pub fn table_file(collection: &str, table: &str, topic: &str, ranges: &[PartitionRange]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(topic.as_bytes());
    for r in ranges {
        hasher.update(format!("/{}:{}-{}", r.partition, r.first, r.last).as_bytes());
    }
    let digest = hex::encode(&hasher.finalize()[..10]);
    let mut unique = [0u8; 6];
    getrandom::fill(&mut unique).expect("the system's random source works");
    let name = format!("part-{digest}-{}.parquet", hex::encode(unique));
    format!("{}/{name}", table_dir(collection, table))
}

/// The largest dictionary page a table's column keeps before it falls back to
/// plain encoding (parquet's default is 1 MiB). A column of mostly distinct
/// values (ids, timestamps) then stops paying for interning every value into
/// a dictionary that cannot pay off; one of few values (country, device, url)
/// keeps it. `cargo bench -p weir --bench table_write`, the stream benchmark's
/// click events: writing 0.88 → 0.50 CPU µs a message, the file 3.38 → 1.65 MB,
/// a DuckDB scan of every column 49 → 54 ms (within its run-to-run spread).
pub const TABLE_DICTIONARY_PAGE_BYTES: usize = 64 << 10;

/// A table's file finished with fewer rows than this is compressed with
/// Snappy, not zstd: parquet makes a zstd compressor (and decompressor) for
/// every column chunk, a fixed cost that outweighs the bytes it saves on few
/// rows. The stream benchmark's click events, one file of N rows in memory
/// (`table_write` bench): 1 row, zstd 588 µs and 4.5 KB against Snappy 64 µs
/// and 4.3 KB; 128 rows, 668 µs / 6.2 KB against 116 µs / 7.9 KB; 512 rows,
/// 876 µs / 11.3 KB against 276 µs / 18.8 KB. A quiet stream's batches are
/// such files, and `weir table vacuum` compacts them into larger ones.
pub const SMALL_FILE_ROWS: usize = 1024;

/// How a parquet file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A table's file, kept: zstd-compressed (Snappy under [`SMALL_FILE_ROWS`]),
    /// and dictionary-encoded where a column's distinct values fit a
    /// [`TABLE_DICTIONARY_PAGE_BYTES`] dictionary.
    Table,
    /// A staged file, deleted once its batch commits: written plainly and
    /// without statistics, because encoding, compressing and min/max of every
    /// string cost more CPU than its bytes on disk; and not synced to disk.
    Staged,
}

impl Kind {
    /// The writer's properties for a file of `rows` rows, if known.
    fn properties(self, rows: Option<usize>) -> WriterProperties {
        let compression = match rows {
            Some(rows) if rows < SMALL_FILE_ROWS => Compression::SNAPPY,
            _ => Compression::ZSTD(ZstdLevel::default()),
        };
        match self {
            Kind::Table => WriterProperties::builder()
                .set_compression(compression)
                .set_dictionary_page_size_limit(TABLE_DICTIONARY_PAGE_BYTES),
            Kind::Staged => WriterProperties::builder()
                .set_compression(Compression::UNCOMPRESSED)
                .set_dictionary_enabled(false)
                .set_statistics_enabled(EnabledStatistics::None),
        }
        .build()
    }
}

/// `batches` as the bytes of one parquet file (a small one: a Delta checkpoint).
pub fn parquet_bytes(schema: &SchemaRef, batches: &[RecordBatch], kind: Kind) -> anyhow::Result<Vec<u8>> {
    let rows = batches.iter().map(RecordBatch::num_rows).sum();
    let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(kind.properties(Some(rows))))?;
    for batch in batches {
        writer.write(batch)?;
    }
    Ok(writer.into_inner()?)
}

/// Writes `batches` as one parquet file, via a temporary name and a rename, so
/// a crash never leaves a half-written file under the real name.
pub fn write_parquet(path: &Path, schema: &SchemaRef, batches: &[RecordBatch], kind: Kind) -> anyhow::Result<()> {
    let mut file = ParquetFile::create(path, schema, kind)?;
    file.write(batches)?;
    file.finish().map(drop)
}

/// Rows a file holds back before it writes them as a row group (unless it is
/// finished first): output that arrives in small pieces is not cut into row
/// groups of a few rows, and a large piece (a partition of a big batch) is
/// written as it comes, not held beside the next.
const MIN_GROUP_ROWS: usize = 16 * 1024;

/// A parquet file written as its rows arrive, under a temporary name until
/// [`ParquetFile::finish`] renames it. Dropped unfinished, it deletes itself.
pub struct ParquetFile {
    path: PathBuf,
    tmp: PathBuf,
    kind: Kind,
    schema: SchemaRef,
    /// Taken only while a row group is written, and when finished.
    writer: Option<Writer>,
    finished: bool,
    written_groups: usize,
    group_rows: usize,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
}

impl ParquetFile {
    pub fn create(path: &Path, schema: &SchemaRef, kind: Kind) -> anyhow::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let tmp = path.with_extension("parquet.tmp");
        let file = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let group_rows = kind.properties(None).max_row_group_row_count().unwrap_or(usize::MAX).max(1);
        Ok(Self {
            path: path.to_path_buf(),
            tmp,
            kind,
            schema: schema.clone(),
            writer: Some(Writer::Unstarted(file)),
            finished: false,
            written_groups: 0,
            group_rows,
            pending: Vec::new(),
            pending_rows: 0,
        })
    }

    /// Appends `batches` (of the file's schema).
    pub fn write(&mut self, batches: &[RecordBatch]) -> anyhow::Result<()> {
        self.pending.extend(batches.iter().filter(|b| b.num_rows() > 0).cloned());
        self.pending_rows += batches.iter().map(RecordBatch::num_rows).sum::<usize>();
        if self.pending_rows >= MIN_GROUP_ROWS {
            self.flush(false)?;
        }
        Ok(())
    }

    /// Writes what is pending, in row groups of at most the writer's size;
    /// `last`: nothing more comes.
    fn flush(&mut self, last: bool) -> anyhow::Result<()> {
        let writer = self.writer.take().expect("an unfinished file has its writer");
        // The rows of the whole file are known if the first flush is the last.
        let rows = last.then_some(self.pending_rows);
        let (writer, row_groups) =
            self.writer.insert(writer.started(&self.schema, self.kind.properties(rows))?).started_parts();
        for group in row_groups_of(&std::mem::take(&mut self.pending), self.group_rows) {
            let rows: usize = group.iter().map(RecordBatch::num_rows).sum();
            let threads =
                if rows < PARALLEL_ROWS { 1 } else { std::thread::available_parallelism().map_or(1, |n| n.get()) };
            // Each column's leaves, with the writer that encodes them.
            let mut columns: Vec<(ArrowColumnWriter, Vec<ArrowLeafColumn>)> =
                row_groups.create_column_writers(self.written_groups)?.into_iter().map(|w| (w, Vec::new())).collect();
            for batch in group {
                let leaves = self
                    .schema
                    .fields()
                    .iter()
                    .zip(batch.columns())
                    .map(|(field, column)| compute_leaves(field, column));
                let mut slots = columns.iter_mut();
                for leaf in leaves.collect::<Result<Vec<_>, _>>()?.into_iter().flatten() {
                    slots.next().expect("one writer per leaf").1.push(leaf);
                }
            }
            let mut row_group = writer.next_row_group()?;
            for chunk in encode_in_parallel(columns, threads)? {
                chunk.append_to_row_group(&mut row_group)?;
            }
            row_group.close()?;
            self.written_groups += 1;
        }
        self.pending_rows = 0;
        Ok(())
    }

    /// Writes the rest, closes the file and puts it under its real name;
    /// returns its footer.
    pub fn finish(mut self) -> anyhow::Result<ParquetMetaData> {
        self.flush(true)?;
        let Some(Writer::Started(mut writer, _)) = self.writer.take() else { unreachable!("flushed, so started") };
        let footer = writer.finish()?;
        // A table's file must be on disk before the catalog names it. A staged file
        // need not be: nothing reads it back, and after a crash the batch is read
        // from Kafka again and staged anew under the same name.
        if self.kind == Kind::Table {
            writer.inner().sync_all()?;
        }
        drop(writer);
        std::fs::rename(&self.tmp, &self.path).with_context(|| format!("renaming into {}", self.path.display()))?;
        self.finished = true;
        Ok(footer)
    }
}

impl Drop for ParquetFile {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// A file's parquet writer, made when its first row group is written: by
/// then it may be known to be the only one, and small (see [`SMALL_FILE_ROWS`]).
#[allow(clippy::large_enum_variant, reason = "one a file being written, in place")]
enum Writer {
    Unstarted(std::fs::File),
    Started(SerializedFileWriter<std::fs::File>, ArrowRowGroupWriterFactory),
}

impl Writer {
    fn started(self, schema: &SchemaRef, properties: WriterProperties) -> parquet::errors::Result<Self> {
        match self {
            Writer::Unstarted(file) => {
                let (writer, row_groups) =
                    ArrowWriter::try_new(file, schema.clone(), Some(properties))?.into_serialized_writer()?;
                Ok(Writer::Started(writer, row_groups))
            }
            started => Ok(started),
        }
    }

    fn started_parts(&mut self) -> (&mut SerializedFileWriter<std::fs::File>, &ArrowRowGroupWriterFactory) {
        match self {
            Writer::Started(writer, row_groups) => (writer, row_groups),
            Writer::Unstarted(_) => unreachable!("started first"),
        }
    }
}

/// `batches` cut into row groups of at most `rows` rows, without copying.
fn row_groups_of(batches: &[RecordBatch], rows: usize) -> Vec<Vec<RecordBatch>> {
    let (mut groups, mut room): (Vec<Vec<RecordBatch>>, usize) = (Vec::new(), 0);
    for batch in batches {
        let mut at = 0;
        while at < batch.num_rows() {
            if room == 0 {
                groups.push(Vec::new());
                room = rows;
            }
            let take = room.min(batch.num_rows() - at);
            groups.last_mut().expect("a group was opened").push(batch.slice(at, take));
            (at, room) = (at + take, room - take);
        }
    }
    groups
}

/// Rows from which a row group's columns are encoded on every core: below,
/// on the calling thread, as starting a thread costs more than its share of
/// the work. A one-row table file, two written at a time on 2 cores, took
/// 2.7–2.9 ms of the process's CPU with a thread started for each, 1.5–2.1
/// ms without (`table_write` bench, `--one-row`): a burst of one message to
/// each of many publishers writes a file of a few rows for every one.
const PARALLEL_ROWS: usize = 4096;

/// Encodes and compresses a row group's columns on up to `threads` threads,
/// and hands the chunks back in column order. On one thread, a large batch's
/// table write was the longest step between its rollover and its commit, and
/// the consumer waits for that commit before it closes the next batch.
fn encode_in_parallel(
    columns: Vec<(ArrowColumnWriter, Vec<ArrowLeafColumn>)>,
    threads: usize,
) -> parquet::errors::Result<Vec<ArrowColumnChunk>> {
    let threads = threads.clamp(1, columns.len().max(1));
    let queue = Mutex::new(columns.into_iter().enumerate());
    let encode = || -> parquet::errors::Result<Vec<(usize, ArrowColumnChunk)>> {
        let mut done = Vec::new();
        loop {
            let next = queue.lock().expect("no thread panics holding it").next();
            let Some((i, (mut writer, leaves))) = next else { return Ok(done) };
            for leaf in &leaves {
                writer.write(leaf)?;
            }
            done.push((i, writer.close()?));
        }
    };
    let mut chunks = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(encode)).collect();
        let mut all = encode()?;
        for helper in helpers {
            all.extend(helper.join().expect("encoding does not panic")?);
        }
        Ok::<_, parquet::errors::ParquetError>(all)
    })?;
    chunks.sort_by_key(|(i, _)| *i);
    Ok(chunks.into_iter().map(|(_, chunk)| chunk).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, ArrayRef, Int64Array, ListArray, StringArray, StructArray, TimestampMillisecondArray};
    use arrow::compute::concat_batches;
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;

    /// Rows with a nested column, whose two leaves each get their own writer.
    pub(crate) fn rows(from: i64, n: i64) -> RecordBatch {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(from..from + n));
        let names: ArrayRef =
            Arc::new(StringArray::from_iter((from..from + n).map(|i| (i % 3 != 0).then(|| format!("n{i}")))));
        let tags =
            ListArray::from_iter_primitive::<Int64Type, _, _>((from..from + n).map(|i| Some(vec![Some(i), None])));
        let page = StructArray::from(vec![
            (Arc::new(Field::new("url", DataType::Utf8, true)), names.clone()),
            (Arc::new(Field::new("tags", tags.data_type().clone(), true)), Arc::new(tags) as ArrayRef),
        ]);
        let at: ArrayRef =
            Arc::new(TimestampMillisecondArray::from_iter_values(from..from + n).with_timezone("+00:00"));
        RecordBatch::try_from_iter([("id", ids), ("name", names), ("page", Arc::new(page) as ArrayRef), ("at", at)])
            .unwrap()
    }

    #[test]
    fn a_file_reads_back_as_written_with_its_arrow_types() {
        let dir = tempfile::tempdir().unwrap();
        let batches = [rows(0, 700), rows(700, 300)];
        let schema = batches[0].schema();
        for kind in [Kind::Table, Kind::Staged] {
            let path = dir.path().join(format!("{kind:?}.parquet"));
            write_parquet(&path, &schema, &batches, kind).unwrap();
            let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
            assert_eq!(reader.schema(), &schema, "{kind:?}");
            let read: Vec<RecordBatch> = reader.build().unwrap().map(Result::unwrap).collect();
            assert_eq!(concat_batches(&schema, &read).unwrap(), concat_batches(&schema, &batches).unwrap(), "{kind:?}");
        }
        // No rows: a file with the schema and nothing in it.
        let path = dir.path().join("empty.parquet");
        write_parquet(&path, &schema, &[], Kind::Table).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
        assert_eq!((reader.schema(), reader.metadata().num_row_groups()), (&schema, 0));
    }

    #[test]
    fn a_file_written_in_pieces_groups_small_pieces_and_an_unfinished_one_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let schema = rows(0, 10).schema();
        let path = dir.path().join("t/part.parquet");
        let mut file = ParquetFile::create(&path, &schema, Kind::Table).unwrap();
        // Small pieces wait for each other; a piece that brings the rows past
        // the minimum writes them all as one row group.
        let pieces = [
            rows(0, 10),
            rows(0, 10).slice(0, 0),
            rows(10, MIN_GROUP_ROWS as i64),
            rows(MIN_GROUP_ROWS as i64 + 10, 5),
        ];
        for piece in &pieces {
            file.write(std::slice::from_ref(piece)).unwrap();
        }
        assert!(!path.exists(), "the real name appears only when finished");
        file.finish().unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap()).unwrap();
        let groups: Vec<i64> = reader.metadata().row_groups().iter().map(|g| g.num_rows()).collect();
        assert_eq!(groups, [MIN_GROUP_ROWS as i64 + 10, 5]);
        let read: Vec<RecordBatch> = reader.build().unwrap().map(Result::unwrap).collect();
        assert_eq!(concat_batches(&schema, &read).unwrap(), concat_batches(&schema, &pieces).unwrap());

        // Dropped before it is finished (the plugin failed): no file, under either name.
        let path = dir.path().join("t/failed.parquet");
        let mut file = ParquetFile::create(&path, &schema, Kind::Table).unwrap();
        file.write(&[rows(0, MIN_GROUP_ROWS as i64)]).unwrap();
        drop(file);
        let names: Vec<_> = std::fs::read_dir(dir.path().join("t")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["part.parquet"]);
    }

    #[test]
    fn a_small_table_file_is_compressed_with_snappy_a_larger_one_with_zstd() {
        let dir = tempfile::tempdir().unwrap();
        let codecs = |path: &Path| -> Vec<Compression> {
            let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
            reader.metadata().row_groups().iter().flat_map(|g| g.columns().iter().map(|c| c.compression())).collect()
        };
        let cases =
            [(SMALL_FILE_ROWS - 1, Compression::SNAPPY), (SMALL_FILE_ROWS, Compression::ZSTD(ZstdLevel::default()))];
        for (n, expected) in cases {
            let path = dir.path().join(format!("{n}.parquet"));
            // In pieces, as a batch's output arrives.
            let mut file = ParquetFile::create(&path, &rows(0, 1).schema(), Kind::Table).unwrap();
            file.write(&[rows(0, 1), rows(1, n as i64 - 1)]).unwrap();
            file.finish().unwrap();
            assert!(codecs(&path).iter().all(|c| *c == expected), "{n} rows: {:?}", codecs(&path));
        }
        // A file long enough to be written before it is finished is never small.
        let path = dir.path().join("long.parquet");
        let mut file = ParquetFile::create(&path, &rows(0, 1).schema(), Kind::Table).unwrap();
        file.write(&[rows(0, MIN_GROUP_ROWS as i64)]).unwrap();
        file.write(&[rows(0, 1)]).unwrap();
        file.finish().unwrap();
        assert!(codecs(&path).iter().all(|c| matches!(c, Compression::ZSTD(_))));
    }

    #[test]
    fn row_groups_cut_batches_in_order_without_losing_a_row() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let batch = |from: i64, n: i64| {
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(from..from + n))]).unwrap()
        };
        let groups = row_groups_of(&[batch(0, 5), batch(5, 7)], 4);
        let sizes: Vec<Vec<usize>> = groups.iter().map(|g| g.iter().map(RecordBatch::num_rows).collect()).collect();
        assert_eq!(sizes, [vec![4], vec![1, 3], vec![4]]);
        let flat = concat_batches(&schema, groups.iter().flatten()).unwrap();
        assert_eq!(flat, batch(0, 12));
        // No rows, no row group (ArrowWriter wrote none either).
        assert!(row_groups_of(&[], 4).is_empty());
        assert!(row_groups_of(&[batch(0, 0)], 4).is_empty());
    }
}
