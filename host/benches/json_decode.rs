//! Decoding JSON messages into Arrow, measured: weir's decoder (simd-json's
//! tape walked into the columns) against arrow-json's tape decoder, on the
//! benchmark's click events and on a wide and a nested schema.
//! `cargo bench -p weir --bench json_decode`
//!
//! arrow-json is measured two ways: fed one message at a time and checked
//! after each, as weir fed it before (a message that is not one complete
//! object must be told apart from the rest), and fed the whole run at once
//! as newline-delimited JSON, which no per-message check can do but which
//! bounds what arrow-json could reach. Every way decodes runs of the size the
//! worker hands off (256 KiB), and must make the same columns.

use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::json::reader::{Decoder, ReaderBuilder};
use weir::formats::json::JsonDecoder;
use weir::formats::{Body, DataFormat, Format};

#[path = "stream/dataset.rs"]
#[allow(dead_code)]
mod dataset;

#[path = "support/figures.rs"]
#[allow(dead_code)]
mod figures;

const CLICKS_SCHEMA: &str = include_str!("../../guest-examples/data/clicks.json");
const MESSAGES: usize = 262_144;

fn main() {
    println!("{MESSAGES} messages a schema, decoded in runs of 256 KiB; CPU µs a message, median of 5");
    println!(
        "{:<34} {:>6} {:>9} {:>14} {:>14} {:>12}",
        "schema", "bytes", "weir", "arrow-json, 1", "arrow-json, all", "weir gains"
    );
    for (name, schema, values) in [
        ("clicks (8 fields)", CLICKS_SCHEMA.to_string(), (0..MESSAGES).map(|i| dataset::message(i).1).collect()),
        ("wide (64 fields: ints, floats, text)", wide_schema(), (0..MESSAGES).map(wide_message).collect()),
        ("nested (objects, arrays of objects)", NESTED_SCHEMA.to_string(), (0..MESSAGES).map(nested_message).collect()),
        ("times (8 date-times, 4 offsets)", times_schema(), (0..MESSAGES).map(times_message).collect()),
    ] {
        compare(name, &schema, values);
    }
}

fn compare(name: &str, schema_text: &str, values: Vec<String>) {
    let format = Format::parse(DataFormat::Json, schema_text, None).unwrap();
    let schema = format.columns().clone();
    let bytes = values.iter().map(String::len).sum::<usize>() / values.len();
    let runs = runs_of(&values);
    let json = JsonDecoder::new(schema.clone());
    let weir_rows = |runs: &[Vec<&String>]| -> Vec<RecordBatch> {
        runs.iter()
            .map(|run| {
                let bodies: Vec<Body<'_>> = run.iter().map(|v| Body::plain(v.as_bytes())).collect();
                let mut rows = json.decode(&bodies);
                assert!(rows.failed.is_empty(), "{:?}", rows.failed[0]);
                rows.batches.remove(0)
            })
            .collect()
    };
    let one_at_a_time = |runs: &[Vec<&String>]| -> Vec<RecordBatch> {
        runs.iter()
            .map(|run| {
                let mut decoder = decoder(&schema, run.len());
                for v in run {
                    // As weir's per-message check did: the value, then a newline, then a look at the decoder.
                    let before = decoder.len();
                    assert_eq!(decoder.decode(v.as_bytes()).unwrap(), v.len());
                    decoder.decode(b"\n").unwrap();
                    assert!(!decoder.has_partial_record() && decoder.len() == before + 1);
                }
                decoder.flush().unwrap().unwrap()
            })
            .collect()
    };
    let all_at_once = |runs: &[Vec<&String>]| -> Vec<RecordBatch> {
        runs.iter()
            .map(|run| {
                let mut decoder = decoder(&schema, run.len());
                let text: Vec<u8> = run.iter().flat_map(|v| v.as_bytes().iter().chain(b"\n")).copied().collect();
                decoder.decode(&text).unwrap();
                decoder.flush().unwrap().unwrap()
            })
            .collect()
    };
    let (a, b, c) = (weir_rows(&runs), one_at_a_time(&runs), all_at_once(&runs));
    assert_eq!(a, b, "{name}: weir and arrow-json make the same columns");
    assert_eq!(b, c);
    let per_message = |f: &dyn Fn(&[Vec<&String>]) -> Vec<RecordBatch>| {
        let cpu: Vec<Duration> = (0..5)
            .map(|_| {
                let t = weir::cpu_time::thread();
                std::hint::black_box(f(&runs));
                weir::cpu_time::thread() - t
            })
            .collect();
        figures::median(cpu).as_secs_f64() * 1e6 / values.len() as f64
    };
    let (w, one, all) = (per_message(&weir_rows), per_message(&one_at_a_time), per_message(&all_at_once));
    println!("{name:<34} {bytes:>6} {w:>9.3} {one:>14.3} {all:>14.3} {:>11.1}×", one / w);
}

fn decoder(schema: &SchemaRef, rows: usize) -> Decoder {
    ReaderBuilder::new(schema.clone()).with_batch_size(rows + 1).build_decoder().unwrap()
}

/// The values in runs of about [`weir::stream::buffer::DECODE_RUN_BYTES`], as the worker hands them off.
fn runs_of(values: &[String]) -> Vec<Vec<&String>> {
    let mut runs = vec![Vec::new()];
    let mut bytes = 0;
    for v in values {
        runs.last_mut().unwrap().push(v);
        bytes += v.len() as u64;
        if bytes >= weir::stream::buffer::DECODE_RUN_BYTES {
            runs.push(Vec::new());
            bytes = 0;
        }
    }
    runs.retain(|r| !r.is_empty());
    runs
}

/// 8 date-time properties: events carry several timestamps (created, sent, seen…).
fn times_schema() -> String {
    let properties: Vec<String> =
        (0..8).map(|i| format!(r#""t{i}":{{"type":"string","format":"date-time"}}"#)).collect();
    format!(r#"{{"type":"object","properties":{{{}}}}}"#, properties.join(","))
}

fn times_message(n: usize) -> String {
    let offsets = ["Z", "+00:00", "-08:00", "+05:30"];
    let values: Vec<String> = (0..8)
        .map(|i| {
            let (minute, second, ms) = ((n / 60_000 + i) % 60, (n / 1000) % 60, (n * 7 + i) % 1000);
            format!(r#""t{i}":"2026-11-29T10:{minute:02}:{second:02}.{ms:03}{}""#, offsets[i % 4])
        })
        .collect();
    format!("{{{}}}", values.join(","))
}

/// 64 properties: integers, numbers and short strings, 16 of each kind twice over.
fn wide_schema() -> String {
    let properties: Vec<String> = (0..64)
        .map(|i| {
            let ty = ["integer", "number", "string", "integer"][i % 4];
            format!(r#""f{i}":{{"type":"{ty}"}}"#)
        })
        .collect();
    format!(r#"{{"type":"object","properties":{{{}}}}}"#, properties.join(","))
}

fn wide_message(n: usize) -> String {
    let values: Vec<String> = (0..64)
        .map(|i| match i % 4 {
            0 | 3 => format!(r#""f{i}":{}"#, (n * 31 + i) % 100_000),
            1 => format!(r#""f{i}":{}.{}"#, n % 1000, i),
            _ => format!(r#""f{i}":"v{}""#, (n + i) % 977),
        })
        .collect();
    format!("{{{}}}", values.join(","))
}

const NESTED_SCHEMA: &str = r#"{"type":"object","required":["order_id","placed_at"],"properties":{
    "order_id":{"type":"string"},
    "placed_at":{"type":"string","format":"date-time"},
    "customer":{"type":"object","properties":{"id":{"type":"integer"},"tier":{"type":"string"},
        "address":{"type":"object","properties":{"city":{"type":"string"},"country":{"type":"string"}}}}},
    "lines":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"},"price":{"type":"number"}}}},
    "tags":{"type":"array","items":{"type":"string"}}
}}"#;

fn nested_message(n: usize) -> String {
    let lines: Vec<serde_json::Value> = (0..1 + n % 4)
        .map(|l| serde_json::json!({"sku": format!("sku-{}", (n + l) % 5000), "qty": 1 + l, "price": (3 + l) as f64 + (n % 100) as f64 / 100.0}))
        .collect();
    let tier = ["gold", "silver", "free"][n % 3];
    serde_json::json!({
        "order_id": format!("ord-{n:09}"),
        "placed_at": format!("2026-11-29T{:02}:{:02}:{:02}Z", (n / 3600) % 24, (n / 60) % 60, n % 60),
        "customer": {"id": n % 50_000, "tier": tier, "address": {"city": "Lyon", "country": "FR"}},
        "lines": lines,
        "tags": if n % 2 == 0 { serde_json::json!(["gift", "express"]) } else { serde_json::json!([]) },
    })
    .to_string()
}
