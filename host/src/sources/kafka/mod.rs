//! The Kafka source: a consumer in a consumer group, its rebalances routed to
//! the workers by topic (`consumer`), shared by a node's workers of one
//! connection (`shared`), the worker's own message queue its partitions are
//! forwarded to (`queue`), the
//! topic dead letters may go to (`dead_letters`), the three behind the
//! worker's interface (`source`); and the connection check run before a
//! publisher is registered (`check`). The librdkafka under it carries fixes
//! of weir's: vendor/rdkafka-sys/WEIR.md.

pub mod check;
pub mod consumer;
pub mod dead_letters;
mod queue;
mod shared;
mod source;

pub use check::{BrokerCheck, CheckError, Watermarks, check};
pub use consumer::{Assignment, CONSUMER_DEFAULTS, Key};
pub use queue::MessageQueue;
pub use shared::Pool;
pub use source::{decoder, open};
