//! Avro object container files, written: what Iceberg's manifests and
//! manifest lists are. The values carry their own shape ([`Datum`]), so the
//! writer needs the schema only as the text its header names; the schemas
//! themselves (with Iceberg's field ids) are in `manifest.rs`.

/// One Avro value, as it is encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Str(String),
    Bytes(Vec<u8>),
    /// A record's fields, in its schema's order.
    Record(Vec<Datum>),
    Array(Vec<Datum>),
    /// A union's branch (by its index in the union) and its value.
    Union(u32, Box<Datum>),
}

impl Datum {
    /// An optional value: the union `["null", T]`.
    pub fn opt(value: Option<Datum>) -> Datum {
        match value {
            None => Datum::Union(0, Box::new(Datum::Null)),
            Some(v) => Datum::Union(1, Box::new(v)),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Datum::Null => {}
            Datum::Bool(b) => out.push(*b as u8),
            Datum::Int(i) => long(*i as i64, out),
            Datum::Long(l) => long(*l, out),
            Datum::Str(s) => bytes(s.as_bytes(), out),
            Datum::Bytes(b) => bytes(b, out),
            Datum::Record(fields) => fields.iter().for_each(|f| f.encode(out)),
            Datum::Array(items) => {
                if !items.is_empty() {
                    long(items.len() as i64, out);
                    items.iter().for_each(|i| i.encode(out));
                }
                long(0, out);
            }
            Datum::Union(branch, value) => {
                long(*branch as i64, out);
                value.encode(out);
            }
        }
    }
}

/// Avro's `long`: zig-zag, then 7 bits a byte, low first.
fn long(value: i64, out: &mut Vec<u8>) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn bytes(b: &[u8], out: &mut Vec<u8>) {
    long(b.len() as i64, out);
    out.extend_from_slice(b);
}

/// A container file of `records` under `schema` (JSON text), with
/// `metadata` in its header beside the schema; uncompressed, one block.
pub fn container(schema: &str, metadata: &[(&str, String)], records: &[Datum]) -> Vec<u8> {
    let mut out = b"Obj\x01".to_vec();
    let mut header = vec![("avro.schema", schema.to_string()), ("avro.codec", "null".to_string())];
    header.extend(metadata.iter().map(|(k, v)| (*k, v.clone())));
    long(header.len() as i64, &mut out);
    for (key, value) in &header {
        bytes(key.as_bytes(), &mut out);
        bytes(value.as_bytes(), &mut out);
    }
    long(0, &mut out);
    // The sync marker only has to be unlikely inside the data; a fixed one is as good as any.
    let sync: [u8; 16] = *b"weir-iceberg-avr";
    out.extend_from_slice(&sync);
    if !records.is_empty() {
        let mut block = Vec::new();
        records.iter().for_each(|r| r.encode(&mut block));
        long(records.len() as i64, &mut out);
        bytes(&block, &mut out);
        out.extend_from_slice(&sync);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longs_are_zigzag_varints_as_the_spec_shows() {
        // The Avro specification's examples.
        for (value, expected) in
            [(0i64, vec![0u8]), (-1, vec![1]), (1, vec![2]), (-64, vec![0x7f]), (64, vec![0x80, 1])]
        {
            let mut out = Vec::new();
            long(value, &mut out);
            assert_eq!(out, expected, "{value}");
        }
    }

    #[test]
    fn a_container_is_read_back_by_arrow_avro() {
        let schema = r#"{"type":"record","name":"r","fields":[
            {"name":"id","type":"long","field-id":1},
            {"name":"name","type":["null","string"],"field-id":2},
            {"name":"tags","type":{"type":"array","items":"int"},"field-id":3}]}"#;
        let records = vec![
            Datum::Record(vec![
                Datum::Long(-5),
                Datum::opt(Some(Datum::Str("a".into()))),
                Datum::Array(vec![Datum::Int(1), Datum::Int(300)]),
            ]),
            Datum::Record(vec![Datum::Long(1 << 40), Datum::opt(None), Datum::Array(vec![])]),
        ];
        let file = container(schema, &[("format-version", "2".into())], &records);
        let reader = arrow_avro::reader::ReaderBuilder::new().build(std::io::Cursor::new(file)).unwrap();
        let batches: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
        let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&[batch]).unwrap().to_string();
        assert!(text.contains("| -5            | a    | [1, 300] |"), "{text}");
        assert!(text.contains("| 1099511627776 |      | []       |"), "{text}");
    }
}
