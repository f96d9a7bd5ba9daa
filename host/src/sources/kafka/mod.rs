//! The Kafka source: a consumer in the publisher's group (`consumer`), the
//! worker's own message queue its partitions are forwarded to (`queue`), the
//! topic dead letters may go to (`dead_letters`), and the connection check
//! run before a publisher is registered (`check`).

pub mod check;
pub mod consumer;
pub mod dead_letters;
mod queue;

pub use check::{BrokerCheck, CheckError, Watermarks, check};
pub use consumer::{Assignment, CONSUMER_DEFAULTS, WorkerConsumer, subscribe, to_raw};
pub use queue::MessageQueue;
