//! In-process peers for the demo, `weir serve --embedded-broker` and the
//! tests: a Kafka-protocol broker (`broker`) and a Confluent-compatible schema
//! registry (`registry`).

pub mod broker;
pub mod registry;
