//! What a message's key and headers cost to decode, beside its value: the
//! benchmark's click events (JSON values) decoded as the worker decodes them,
//! in runs of 256 KiB, with keys as bytes and no `_headers` (what every row
//! carried before keys and headers were read), with three headers a message
//! in `_headers`, and with an Avro key read into a struct.
//! `cargo bench -p weir --bench keys_headers`

use std::time::Duration;

use weir::formats::{DataFormat, Decoder, Format, Key, KeyFormat, Part, RawMessage, encode_json_values};

#[path = "stream/dataset.rs"]
#[allow(dead_code)]
mod dataset;

#[path = "support/figures.rs"]
#[allow(dead_code)]
mod figures;

const CLICKS_SCHEMA: &str = include_str!("../../guest-examples/data/clicks.json");
const KEY_AVRO: &str =
    r#"{"type":"record","name":"Key","fields":[{"name":"user","type":"string"},{"name":"shard","type":"long"}]}"#;
const MESSAGES: usize = 262_144;

fn main() {
    let values: Vec<String> = (0..MESSAGES).map(|i| dataset::message(i).1).collect();
    let key_format = Format::parse(DataFormat::Avro, KEY_AVRO, None).unwrap();
    let keys: Vec<String> =
        (0..MESSAGES).map(|i| format!(r#"{{"user": "user-{}", "shard": {}}}"#, i % 5000, i % 16)).collect();
    let avro_keys = encode_json_values(&key_format, &keys, None).unwrap();
    let headers = |i: usize| {
        vec![
            ("trace-id".to_string(), Some(format!("{i:032x}").into_bytes())),
            ("source".to_string(), Some(b"web".to_vec())),
            ("retry".to_string(), None),
        ]
    };
    let messages = |key: &dyn Fn(usize) -> Vec<u8>, with_headers: bool| -> Vec<Vec<RawMessage>> {
        let all: Vec<RawMessage> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let h = if with_headers { headers(i) } else { vec![] };
                RawMessage::new(0, i as i64, Some(0), Some(&key(i)), Some(v.as_bytes()), h)
            })
            .collect();
        let per_run = (256 << 10) / all[0].size();
        all.chunks(per_run).map(<[_]>::to_vec).collect()
    };
    let value = || Part::new(Format::parse(DataFormat::Json, CLICKS_SCHEMA, None).unwrap(), None);
    let string_key = |i: usize| dataset::message(i).0.into_bytes();
    let avro_key = |i: usize| avro_keys[i].clone();
    let cases: [(&str, Decoder, Vec<Vec<RawMessage>>); 4] = [
        ("bytes key, no _headers (before)", Decoder::new(value(), Key::Bytes, false), messages(&string_key, false)),
        ("bytes key, _headers of none", Decoder::new(value(), Key::Bytes, true), messages(&string_key, false)),
        ("bytes key, 3 headers in _headers", Decoder::new(value(), Key::Bytes, true), messages(&string_key, true)),
        (
            "Avro key as a struct, no _headers",
            Decoder::new(value(), KeyFormat::Decoded(key_format.clone()).key(None), false),
            messages(&avro_key, false),
        ),
    ];
    println!("{MESSAGES} click events, decoded in runs of 256 KiB; CPU µs a message, median of 5");
    let mut before = None;
    for (name, decoder, runs) in cases {
        let samples: Vec<Duration> = (0..5)
            .map(|_| {
                let runs = runs.clone();
                let t = weir::cpu_time::thread();
                for run in runs {
                    let decoded = decoder.decode(run);
                    assert!(decoded.dead.is_empty(), "{:?}", decoded.dead.first().map(|d| &d.error));
                }
                weir::cpu_time::thread() - t
            })
            .collect();
        let us = figures::median(samples).as_secs_f64() * 1e6 / MESSAGES as f64;
        let base = *before.get_or_insert(us);
        println!("{name:<36} {us:>6.3} µs  ({:+.3} µs, {:+.0} %)", us - base, (us / base - 1.0) * 100.0);
    }
}
