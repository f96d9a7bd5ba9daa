//! The worker's own message queue. Each assigned partition's fetch queue is
//! forwarded to it, and the worker takes messages from it many at a time
//! (`rd_kafka_consume_batch_queue`). The consumer queue keeps everything else
//! (rebalances, errors, commit results), which the rdkafka stream serves as before.
//!
//! Through the stream, every message is one event: one poll, four clock
//! readings, a lock, a reference count, each in turn. Profiled on the
//! benchmark's data, that was a tenth of weir's CPU, all of it on the one
//! task that reads the topic.
//!
//! A rebalance must not be served here: without a rebalance callback,
//! librdkafka answers one itself with an empty assignment. So only partition
//! fetch queues are forwarded, and a message that reaches the consumer queue
//! anyway (fetched before its partition was forwarded) is read from the stream.

use std::collections::VecDeque;
use std::ffi::{CStr, CString, c_void};
use std::sync::{Arc, Mutex};

use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka_sys as rdsys;
use tokio::sync::Notify;

use crate::formats::RawMessage;

/// Messages taken from librdkafka in one call.
const TAKE: usize = 256;

/// Where the consumer's rebalance callback forwards newly assigned
/// partitions: the worker's queue while it lives.
#[derive(Default)]
pub struct Forwarding(Mutex<Option<QueuePtr>>);

struct QueuePtr(*mut rdsys::rd_kafka_queue_t);

// librdkafka's queues are safe to use from any thread, and shared between threads.
unsafe impl Send for QueuePtr {}
unsafe impl Sync for QueuePtr {}

impl Forwarding {
    /// Sends `partitions` of `topic` to the worker's queue, if it is there.
    pub fn forward(&self, rk: *mut rdsys::rd_kafka_t, topic: &str, partitions: &[i32]) {
        let queue = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (Some(QueuePtr(queue)), Ok(topic)) = (&*queue, CString::new(topic)) else { return };
        for &partition in partitions {
            // SAFETY: `rk` is the live client whose callback this is; `queue` is alive while it
            // is set here (the worker's queue clears it before letting go of its reference).
            unsafe {
                let fetched = rdsys::rd_kafka_queue_get_partition(rk, topic.as_ptr(), partition);
                if fetched.is_null() {
                    continue; // its messages come through the consumer queue instead
                }
                rdsys::rd_kafka_queue_forward(fetched, *queue);
                rdsys::rd_kafka_queue_destroy(fetched);
            }
        }
    }

    /// Stops sending `partitions` of `topic` to the worker's queue: their
    /// messages reach the consumer queue again.
    pub fn unforward(&self, rk: *mut rdsys::rd_kafka_t, topic: &str, partitions: &[i32]) {
        let Ok(topic) = CString::new(topic) else { return };
        for &partition in partitions {
            // SAFETY: `rk` is a live client; a null destination ends the forwarding.
            unsafe {
                let fetched = rdsys::rd_kafka_queue_get_partition(rk, topic.as_ptr(), partition);
                if !fetched.is_null() {
                    rdsys::rd_kafka_queue_forward(fetched, std::ptr::null_mut());
                    rdsys::rd_kafka_queue_destroy(fetched);
                }
            }
        }
    }
}

/// The worker's queue and the messages taken from it but not yet read.
pub struct MessageQueue {
    queue: QueuePtr,
    /// The consumer is destroyed only after the queue: its destruction waits
    /// for the messages the queue holds.
    _consumer: Arc<dyn std::any::Any + Send + Sync>,
    forwarding: Arc<Forwarding>,
    /// Notified by librdkafka when the queue goes from empty to not.
    ready: Arc<Notify>,
    taken: VecDeque<KafkaResult<RawMessage>>,
}

unsafe extern "C" fn wake(_rk: *mut rdsys::rd_kafka_t, ready: *mut c_void) {
    // SAFETY: the pointer is the queue's `ready`, which outlives the callback (see Drop).
    unsafe { (*(ready as *const Notify)).notify_one() };
}

impl MessageQueue {
    /// A queue of `client`, which `consumer` keeps alive, to which
    /// `forwarding` (its rebalance callback's) sends assigned partitions from now on.
    pub fn new<C: rdkafka::client::ClientContext>(
        client: &rdkafka::client::Client<C>,
        consumer: Arc<dyn std::any::Any + Send + Sync>,
        forwarding: Arc<Forwarding>,
    ) -> Self {
        let ready = Arc::new(Notify::new());
        // SAFETY: `consumer` keeps the client alive; the callback's pointer stays valid until it is removed in Drop.
        let queue = unsafe {
            let queue = rdsys::rd_kafka_queue_new(client.native_ptr());
            rdsys::rd_kafka_queue_cb_event_enable(queue, Some(wake), Arc::as_ptr(&ready) as *mut c_void);
            queue
        };
        *forwarding.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(QueuePtr(queue));
        // Anything forwarded before the callback was set is read on the first look.
        ready.notify_one();
        Self { queue: QueuePtr(queue), _consumer: consumer, forwarding, ready, taken: VecDeque::new() }
    }

    /// Resolves when there may be messages to read.
    pub async fn ready(&self) {
        self.ready.notified().await;
    }

    /// Look again soon: reading stopped before the queue ran dry (librdkafka
    /// says so only when it fills from empty).
    pub fn look_again(&self) {
        self.ready.notify_one();
    }

    /// The next message, `None` once the queue is empty.
    pub fn next(&mut self) -> Option<KafkaResult<RawMessage>> {
        if self.taken.is_empty() {
            self.take();
        }
        self.taken.pop_front()
    }

    /// Drops what was taken of `partitions` and not read yet (revoked, or to be read again from elsewhere).
    pub fn forget(&mut self, partitions: &[i32]) {
        self.taken.retain(|m| !matches!(m, Ok(m) if partitions.contains(&m.partition)));
    }

    fn take(&mut self) {
        let mut messages = [std::ptr::null_mut::<rdsys::rd_kafka_message_t>(); TAKE];
        // SAFETY: the queue is alive; librdkafka fills at most TAKE pointers, each ours to destroy.
        let n = unsafe { rdsys::rd_kafka_consume_batch_queue(self.queue.0, 0, messages.as_mut_ptr(), TAKE) };
        for &message in &messages[..n.max(0) as usize] {
            // SAFETY: a message librdkafka handed over, destroyed once copied.
            unsafe {
                self.taken.push_back(copy(&*message));
                rdsys::rd_kafka_message_destroy(message);
            }
        }
    }
}

impl Drop for MessageQueue {
    fn drop(&mut self) {
        // Nothing is forwarded here any more, then no callback can come, then the reference goes.
        self.forwarding.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        // SAFETY: the queue is alive until this destroy; `ready` outlives the callback it removes.
        unsafe {
            rdsys::rd_kafka_queue_cb_event_enable(self.queue.0, None, std::ptr::null_mut());
            rdsys::rd_kafka_queue_destroy(self.queue.0);
        }
    }
}

/// Copies what weir keeps of a message out of librdkafka's buffer, or its error.
///
/// # Safety
/// `message` is a message librdkafka handed out and has not destroyed.
pub(super) unsafe fn copy(message: &rdsys::rd_kafka_message_t) -> KafkaResult<RawMessage> {
    if message.err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Err(KafkaError::MessageConsumption(RDKafkaErrorCode::from(message.err)));
    }
    let bytes = |ptr: *mut c_void, len: usize| {
        // SAFETY: librdkafka's pointer and length, valid while the message is.
        (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr as *const u8, len) })
    };
    let mut kind = rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
    // SAFETY: as the function's contract says.
    let at = unsafe { rdsys::rd_kafka_message_timestamp(message, &mut kind) };
    let timestamp = (kind != rdsys::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE).then_some(at);
    // SAFETY: as the function's contract says.
    let headers = unsafe { headers(message) };
    Ok(RawMessage::new(
        message.partition,
        message.offset,
        timestamp,
        bytes(message.key, message.key_len),
        bytes(message.payload, message.len),
        headers,
    ))
}

/// # Safety
/// As [`copy`].
unsafe fn headers(message: &rdsys::rd_kafka_message_t) -> Vec<(String, Option<Vec<u8>>)> {
    // SAFETY: as the function's contract says.
    if unsafe { without_headers(message) } {
        return Vec::new();
    }
    let mut headers = std::ptr::null_mut();
    // SAFETY: the message is live; the headers belong to it.
    if unsafe { rdsys::rd_kafka_message_headers(message, &mut headers) }
        != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
    {
        return Vec::new();
    }
    let mut all = Vec::new();
    for i in 0.. {
        let (mut name, mut value, mut size) = (std::ptr::null(), std::ptr::null(), 0);
        // SAFETY: as above; librdkafka says when `i` is past the last header.
        let found = unsafe { rdsys::rd_kafka_header_get_all(headers, i, &mut name, &mut value, &mut size) };
        if found != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            break;
        }
        // SAFETY: a NUL-terminated name and a value of `size` bytes (or none), valid with the message.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let value =
            (!value.is_null()).then(|| unsafe { std::slice::from_raw_parts(value as *const u8, size) }.to_vec());
        all.push((name, value));
    }
    all
}

/// A fetched message as librdkafka holds it, up to its headers as fetched:
/// `rd_kafka_msg_t` in librdkafka 2.12.1's `rdkafka_msg.h`, whose first field
/// is the public message. Read only when the linked librdkafka is that one
/// ([`HELD_LAYOUT`]; weir links the one rdkafka-sys builds, so it always is
/// until rdkafka-sys is upgraded, and a test says so then).
#[repr(C)]
struct Held {
    public: rdsys::rd_kafka_message_t,
    link: [*mut c_void; 2],
    flags: std::ffi::c_int,
    timestamp_type: std::ffi::c_int,
    timestamp: i64,
    /// Headers parsed already, if any.
    parsed: *mut c_void,
    status: std::ffi::c_int,
    broker_id: i32,
    /// The record's headers as fetched (`rkm_u.consumer.binhdrs`): their count, then each.
    fetched_len: i32,
    fetched: *const c_void,
}

/// The librdkafka version whose message layout [`Held`] mirrors.
const HELD_LAYOUT: std::ffi::c_int = 0x020c01ff;

fn held_layout_known() -> bool {
    static KNOWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: a plain getter.
    *KNOWN.get_or_init(|| unsafe { rdsys::rd_kafka_version() } == HELD_LAYOUT)
}

/// True when the message surely has no headers: a record's headers begin with
/// their count, so one byte or none holds none. Asking librdkafka
/// (`rd_kafka_message_headers`) allocates, reads and frees a buffer to find
/// that out, for every message: 3.7 % of weir's CPU on the benchmark's data.
///
/// # Safety
/// As [`copy`].
unsafe fn without_headers(message: &rdsys::rd_kafka_message_t) -> bool {
    if !held_layout_known() {
        return false;
    }
    // SAFETY: a fetched message is the first field of librdkafka's `rd_kafka_msg_t`, which `Held` mirrors.
    let held = unsafe { &*(message as *const rdsys::rd_kafka_message_t).cast::<Held>() };
    held.parsed.is_null() && held.fetched_len <= 1
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer as _};
    use rdkafka::message::{Header, Message as _, OwnedHeaders};
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer as _};
    use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

    use crate::catalog::Catalog;
    use crate::embedded::broker::EmbeddedBroker;
    use crate::publisher::source::{KafkaConnection, StartFrom};

    /// Partition 0's messages carry headers (see [`headers_of`]), partition 1's none.
    fn produce(bootstrap: &str, per_partition: std::ops::Range<usize>) {
        let producer: BaseProducer = ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
        for i in per_partition {
            for partition in [0, 1] {
                let value = format!("{partition}-{i}");
                let record = BaseRecord::to("t").partition(partition).key("k").payload(&value);
                let record = match partition {
                    0 => record.headers(
                        OwnedHeaders::new()
                            .insert(Header { key: "n", value: Some(&i.to_string()) })
                            .insert(Header { key: "none", value: None::<&str> }),
                    ),
                    _ => record,
                };
                producer.send(record).unwrap();
            }
        }
        producer.flush(Duration::from_secs(10)).unwrap();
    }

    fn headers_of(partition: i32, offset: i64) -> Vec<(String, Option<Vec<u8>>)> {
        match partition {
            0 => vec![("n".into(), Some(offset.to_string().into_bytes())), ("none".into(), None)],
            _ => vec![],
        }
    }

    #[test]
    fn the_linked_librdkafka_holds_messages_as_mirrored() {
        // An upgraded rdkafka-sys: check `Held` against its rdkafka_msg.h, then update HELD_LAYOUT.
        assert!(super::held_layout_known(), "librdkafka {:#x} is linked", unsafe { rdkafka_sys::rd_kafka_version() });
    }

    #[test]
    fn a_message_without_headers_is_told_apart_without_asking_librdkafka() {
        let broker = EmbeddedBroker::start(1).unwrap();
        broker.create_topic("t", 2).unwrap();
        produce(broker.bootstrap_servers(), 0..5);
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap_servers())
            .set("group.id", "g")
            .create()
            .unwrap();
        let mut assignment = TopicPartitionList::new();
        for partition in [0, 1] {
            assignment.add_partition_offset("t", partition, Offset::Beginning).unwrap();
        }
        consumer.assign(&assignment).unwrap();
        let mut without: BTreeMap<(i32, i64), bool> = BTreeMap::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while without.len() < 10 {
            assert!(std::time::Instant::now() < deadline, "10 messages within 20 s; got {without:?}");
            if let Some(message) = consumer.poll(Duration::from_millis(100)) {
                let message = message.unwrap();
                // SAFETY: a message the consumer handed out, alive while borrowed.
                let told = unsafe { super::without_headers(&*message.ptr()) };
                without.insert((message.partition(), message.offset()), told);
            }
        }
        // Partition 0's carry headers, partition 1's none.
        assert!(without.iter().all(|((partition, _), told)| *told == (*partition == 1)), "{without:?}");
    }

    /// Reads until `n` messages came, by partition.
    async fn read(queue: &mut super::MessageQueue, n: usize) -> BTreeMap<i32, Vec<i64>> {
        let mut got: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        let mut count = 0;
        while count < n {
            tokio::time::timeout(Duration::from_secs(20), queue.ready()).await.expect("messages within 20 s");
            while let Some(message) = queue.next() {
                let message = message.unwrap();
                assert_eq!(message.payload().unwrap(), format!("{}-{}", message.partition, message.offset).as_bytes());
                assert_eq!(message.key(), Some(&b"k"[..]));
                assert_eq!(message.headers, headers_of(message.partition, message.offset), "{message:?}");
                got.entry(message.partition).or_default().push(message.offset);
                count += 1;
            }
        }
        got
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn assigned_partitions_arrive_on_the_queue_in_order_and_forgotten_ones_are_dropped() {
        let broker = EmbeddedBroker::start(1).unwrap();
        broker.create_topic("t", 2).unwrap();
        let bootstrap = broker.bootstrap_servers().to_string();
        produce(&bootstrap, 0..300);
        let dir = tempfile::tempdir().unwrap();
        let catalog = std::sync::Arc::new(Catalog::open(dir.path()).unwrap());
        let connection = KafkaConnection { bootstrap_servers: bootstrap.clone(), ..KafkaConnection::default() };
        let key = super::super::Key { collection: "c".into(), group: "g".into(), connection, reset: "earliest" };
        let pool = super::super::Pool::default();
        let (mut membership, mut queue) = pool.join(&catalog, key, StartFrom::Earliest, "c/p", "t").unwrap();
        // The consumer's task serves the rebalance; every message goes to the worker's queue.
        assert!(matches!(membership.events.recv().await, Some(super::super::Assignment::Assigned(_))));

        // Both partitions, every offset once and in order: more than one take each (256 at a time).
        let got = read(&mut queue, 600).await;
        let expected: Vec<i64> = (0..300).collect();
        assert_eq!(got, BTreeMap::from([(0, expected.clone()), (1, expected)]));

        // Taken from librdkafka but not read yet, then forgotten: partition 0's are gone.
        produce(&bootstrap, 300..320);
        tokio::time::sleep(Duration::from_secs(1)).await; // all 40 reach the queue
        let first = queue.next().expect("a message").unwrap();
        queue.forget(&[0]);
        let rest = read(&mut queue, if first.partition == 0 { 20 } else { 19 }).await;
        assert_eq!(rest.keys().copied().collect::<Vec<_>>(), [1], "only partition 1 is left");
        assert!(queue.next().is_none());

        assert!(membership.strays.try_recv().is_err(), "nothing reached the consumer queue");
        drop(membership);
        drop(queue);
        // Closed (off the runtime's threads) once its last member is gone.
        tokio::time::timeout(Duration::from_secs(20), async {
            while pool.consumers() > 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .expect("the consumer is closed after its last member left");
    }
}
