//! Local table files, read into frames: parquet, Arrow IPC (file or stream
//! format), Avro object container files and newline-delimited JSON, chosen by
//! extension and checked against the file's contents.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::{FileReader, StreamReader};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::plugin::frames::Frame;

const BATCH_ROWS: usize = 64 * 1024;
/// Rows read to infer an NDJSON file's schema when none is given.
const INFER_ROWS: usize = 10_000;

/// The formats `weir run-plugin --input` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Parquet,
    ArrowIpc,
    Avro,
    NdJson,
}

impl Format {
    pub fn of(path: &Path) -> anyhow::Result<Self> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        Ok(match ext.as_str() {
            "parquet" | "pq" => Self::Parquet,
            "arrow" | "arrows" | "ipc" | "feather" => Self::ArrowIpc,
            "avro" => Self::Avro,
            "jsonl" | "ndjson" => Self::NdJson,
            _ => bail!(
                "{}: unknown input format; use a .parquet, .arrow (Arrow IPC), .avro (an Avro object container file) or .jsonl/.ndjson (one JSON object per line) file",
                path.display()
            ),
        })
    }
}

/// Reads one table file. `schema` applies to NDJSON only (inferred when absent).
pub fn read(path: &Path, schema: Option<&SchemaRef>) -> anyhow::Result<Frame> {
    let format = Format::of(path)?;
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let frame = match format {
        Format::Parquet => read_parquet(file),
        Format::ArrowIpc => read_ipc(file),
        Format::Avro => read_avro(file),
        Format::NdJson => read_ndjson(file, schema),
    };
    frame.with_context(|| format!("{}: not a readable {} file", path.display(), format.name()))
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Self::Parquet => "parquet",
            Self::ArrowIpc => "Arrow IPC",
            Self::Avro => "Avro object container",
            Self::NdJson => "newline-delimited JSON",
        }
    }
}

fn read_parquet(file: File) -> anyhow::Result<Frame> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)?.with_batch_size(BATCH_ROWS);
    let schema = builder.schema().clone();
    let batches = builder.build()?.collect::<Result<Vec<_>, _>>()?;
    Ok(Frame { schema, batches })
}

fn read_ipc(mut file: File) -> anyhow::Result<Frame> {
    let mut magic = [0u8; 6];
    let is_file_format = file.read_exact(&mut magic).is_ok() && &magic == b"ARROW1";
    file.seek(SeekFrom::Start(0))?;
    if is_file_format {
        let reader = FileReader::try_new(BufReader::new(file), None)?;
        let schema = reader.schema();
        Ok(Frame { schema, batches: reader.collect::<Result<_, _>>()? })
    } else {
        let reader = StreamReader::try_new(BufReader::new(file), None)?;
        let schema = reader.schema();
        Ok(Frame { schema, batches: reader.collect::<Result<_, _>>()? })
    }
}

/// An Avro object container file: its writer schema is in its header.
fn read_avro(file: File) -> anyhow::Result<Frame> {
    let reader = arrow_avro::reader::ReaderBuilder::new().with_batch_size(BATCH_ROWS).build(BufReader::new(file))?;
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>()?;
    // arrow-avro puts the whole Avro schema in the metadata; the frame needs only the columns.
    let schema = Arc::new(schema.as_ref().clone().with_metadata(std::collections::HashMap::new()));
    let batches = batches
        .into_iter()
        .map(|b| arrow::array::RecordBatch::try_new(schema.clone(), b.columns().to_vec()))
        .collect::<Result<_, _>>()?;
    Ok(Frame { schema, batches })
}

fn read_ndjson(file: File, schema: Option<&SchemaRef>) -> anyhow::Result<Frame> {
    let mut reader = BufReader::new(file);
    let schema = match schema {
        Some(schema) => schema.clone(),
        None => {
            let (inferred, _) = arrow::json::reader::infer_json_schema(&mut reader, Some(INFER_ROWS))?;
            reader.seek(SeekFrom::Start(0))?;
            Arc::new(inferred)
        }
    };
    let json = arrow::json::ReaderBuilder::new(schema.clone()).with_batch_size(BATCH_ROWS).build(reader)?;
    Ok(Frame { schema, batches: json.collect::<Result<_, _>>()? })
}
