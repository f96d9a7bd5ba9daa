//! A guard around one function of librdkafka 2.12.1 that crashes the process.
//!
//! When a fetch answer says a partition's leader moved (KIP-951's tagged
//! `CurrentLeader` fields), librdkafka queues a metadata update naming the
//! topic by id only. A broker that answers so for a topic it has just deleted,
//! with a zero topic id (Tansu does), leaves that update with neither an id
//! nor a name, and `rd_kafka_metadata_update_op` then looks the name up: a
//! NULL `strcmp` on librdkafka's main thread, and the whole node is gone,
//! every tenant's publishers with it, because one tenant deleted a topic.
//!
//! The build links librdkafka's call to it through
//! `__wrap_rd_kafka_metadata_update_op` below (`--wrap`, see build.rs), which
//! leaves out the topics that cannot be found either way (librdkafka skips,
//! with a warning, those it looks up and does not find) and hands the rest to
//! librdkafka's own function. What it reads of librdkafka's internal metadata
//! struct is pinned to the librdkafka that rdkafka-sys bundles (Cargo.toml
//! pins it with `=`); tests/shared_consumers.rs deletes a topic under a
//! running node and fails if this stops holding.

use std::ffi::{c_char, c_int, c_void};

use rdkafka_sys::bindings::{rd_kafka_metadata_t, rd_kafka_metadata_topic, rd_kafka_t};

/// `rd_kafka_Uuid_t`.
#[repr(C)]
struct Uuid {
    most_significant_bits: i64,
    least_significant_bits: i64,
    base64str: [c_char; 23],
}

/// `rd_kafka_metadata_topic_internal_t`.
#[repr(C)]
struct TopicInternal {
    partitions: *mut c_void,
    topic_id: Uuid,
    topic_authorized_operations: i32,
    is_internal: c_int,
}

/// The head of `rd_kafka_metadata_internal_t`, as far as its topics.
#[repr(C)]
pub struct MetadataInternal {
    metadata: rd_kafka_metadata_t,
    brokers_sorted: *mut c_void,
    brokers: *mut c_void,
    topics: *mut TopicInternal,
}

unsafe extern "C" {
    fn __real_rd_kafka_metadata_update_op(rk: *mut rd_kafka_t, mdi: *mut MetadataInternal) -> c_int;
}

/// librdkafka's `rd_kafka_metadata_update_op`, minus the topics named by
/// neither a topic id nor a name.
///
/// # Safety
/// Called by librdkafka only, with the update it queued (which it owns, and
/// frees as one allocation whatever its topic count says).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __wrap_rd_kafka_metadata_update_op(rk: *mut rd_kafka_t, mdi: *mut MetadataInternal) -> c_int {
    // SAFETY: `mdi` is librdkafka's update, its two topic arrays `topic_cnt` long.
    unsafe {
        let metadata = &mut (*mdi).metadata;
        let (topics, internal) = (metadata.topics, (*mdi).topics);
        let count = usize::try_from(metadata.topic_cnt).unwrap_or(0);
        let mut kept = 0;
        for i in 0..count {
            let (topic, inner): (*mut rd_kafka_metadata_topic, *mut TopicInternal) = (topics.add(i), internal.add(i));
            let id = &(*inner).topic_id;
            if (*topic).topic.is_null() && id.most_significant_bits == 0 && id.least_significant_bits == 0 {
                continue;
            }
            if kept != i {
                std::ptr::copy_nonoverlapping(topic, topics.add(kept), 1);
                std::ptr::copy_nonoverlapping(inner, internal.add(kept), 1);
            }
            kept += 1;
        }
        if kept < count {
            tracing::debug!(
                left_out = count - kept,
                "a broker said a partition's leader moved without naming its topic (deleted?): that update is left out"
            );
            metadata.topic_cnt = kept as c_int;
        }
        __real_rd_kafka_metadata_update_op(rk, mdi)
    }
}
