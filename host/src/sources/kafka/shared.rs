//! Consumers shared by a node's workers. Every worker that reads through the
//! same connection, in the same collection and consumer group, joins one
//! librdkafka consumer subscribed to all their topics (a topic has one
//! publisher per collection), instead of a client of its own: its threads,
//! buffers, fetches and heartbeats are paid once per connection, not once per
//! publisher. The group still splits every topic's partitions between the
//! nodes, each assigned partition is forwarded to its worker's own queue, and
//! a worker that leaves (paused, deleted, stopped) takes only its topic's
//! partitions with it (the cooperative assignor).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt as _;
use rdkafka::consumer::Consumer as _;
use rdkafka::error::KafkaResult;
use tokio::sync::{mpsc, oneshot};

use super::check::Watermarks;
use super::consumer::{Assignment, GroupConsumer, GroupContext, Key, Member, to_raw};
use super::queue::{Forwarding, MessageQueue};
use crate::catalog::Catalog;
use crate::formats::RawMessage;
use crate::publisher::source::StartFrom;

/// The consumers of one node, by what lets workers share them.
#[derive(Default)]
pub struct Pool {
    consumers: Mutex<Vec<(Key, Weak<Shared>)>>,
    /// Consumers not yet closed (closing one tells its group it left, and
    /// waits for its last offset commits).
    open: Arc<AtomicUsize>,
}

/// One consumer and the task that serves its queue (rebalances, errors,
/// messages fetched before their partition was forwarded).
pub struct Shared {
    /// Handed to the task when the last worker is gone, which closes it.
    consumer: Option<Arc<GroupConsumer>>,
    close: Option<oneshot::Sender<Arc<GroupConsumer>>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let (Some(consumer), Some(close)) = (self.consumer.take(), self.close.take())
            && let Err(consumer) = close.send(consumer)
        {
            // Without its task (the runtime is shutting down) it closes on its own.
            close_apart(consumer);
        }
    }
}

/// Closes a consumer (drops it) on a thread of its own, which says when it
/// is done. Closing waits for the group, and may wait for good (librdkafka
/// #4884): on a thread of its own it holds up neither the runtime's threads
/// nor the end of the process.
fn close_apart(consumer: Arc<GroupConsumer>) -> oneshot::Receiver<()> {
    let (done, closed) = oneshot::channel();
    let closing = std::thread::Builder::new().name("weir-close".into()).spawn(move || {
        drop(consumer);
        let _ = done.send(());
    });
    if let Err(e) = closing {
        tracing::error!(error = %e, "no thread to close a Kafka consumer on: it stays open until the node stops");
    }
    closed
}

/// The consumer [`serve`] owns: closed apart however the task ends, also
/// when the runtime drops it mid-way.
struct Owned(Option<Arc<GroupConsumer>>);

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(consumer) = self.0.take() {
            close_apart(consumer);
        }
    }
}

impl Shared {
    pub fn consumer(&self) -> &GroupConsumer {
        self.consumer.as_ref().expect("the consumer is only taken when dropped")
    }

    /// Subscribes to every member's topic, as the members are now.
    fn resubscribe(&self, members: &std::collections::HashMap<String, Member>) {
        let mut topics: Vec<&str> = members.keys().map(String::as_str).collect();
        topics.sort_unstable();
        let consumer = self.consumer();
        let result = if topics.is_empty() {
            consumer.unsubscribe();
            Ok(())
        } else {
            consumer.subscribe(&topics)
        };
        if let Err(e) = result {
            tracing::error!(group = %consumer.context().label(), error = %e, ?topics, "subscribing failed");
        }
    }
}

/// A worker's place in a shared consumer: its queue, and what the consumer
/// tells it. Leaving (dropping it) takes its topic out of the subscription.
pub struct Membership {
    shared: Arc<Shared>,
    topic: String,
    pub events: mpsc::UnboundedReceiver<Assignment>,
    pub strays: mpsc::UnboundedReceiver<RawMessage>,
}

impl Membership {
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let consumer = self.shared.consumer();
        let mut members = consumer.context().members();
        if let Some(member) = members.remove(&self.topic) {
            // Nothing more of its partitions goes to its queue: what is fetched until the
            // group takes them back reaches the consumer queue, and is dropped there.
            let partitions: Vec<i32> = member.assigned.iter().copied().collect();
            member.forwarding.unforward(consumer.client().native_ptr(), &self.topic, &partitions);
        }
        self.shared.resubscribe(&members);
    }
}

impl Pool {
    /// Joins the worker of `publisher` (`collection/name`) reading `topic` to
    /// a consumer of `key`, which subscribes to its topic too; returns its
    /// membership and queue.
    pub fn join(
        &self,
        catalog: &Arc<Catalog>,
        key: Key,
        start_from: StartFrom,
        publisher: &str,
        topic: &str,
    ) -> KafkaResult<(Membership, MessageQueue)> {
        let topic = topic.to_string();
        let config = key.config();
        let start = Key::start(&config, start_from);
        // Under the pool's lock until the member is in: a second worker of the same topic
        // (tests start two of one publisher on a node) must not find this consumer without it.
        let mut consumers = self.consumers.lock().unwrap_or_else(|e| e.into_inner());
        consumers.retain(|(_, shared)| shared.strong_count() > 0);
        // One that does not read the topic yet: two workers of one publisher on a node each
        // have their own, and split the partitions as two nodes do.
        let found = consumers
            .iter()
            .filter(|(k, _)| *k == key)
            .filter_map(|(_, shared)| shared.upgrade())
            .find(|shared| !shared.consumer().context().members().contains_key(&topic));
        let shared = match found {
            Some(shared) => shared,
            None => {
                let label = format!("{} (group {})", key.collection, key.group);
                let context = GroupContext::new(catalog.clone(), key.connection.clone(), label);
                let consumer: Arc<GroupConsumer> = Arc::new(config.create_with_context(context)?);
                let (close, closing) = oneshot::channel();
                self.open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(consumer.clone(), closing, self.open.clone()));
                let shared = Arc::new(Shared { consumer: Some(consumer), close: Some(close) });
                consumers.push((key, Arc::downgrade(&shared)));
                shared
            }
        };
        let forwarding = Arc::new(Forwarding::default());
        // The queue is in place before any partition of the topic can be assigned.
        let queue = MessageQueue::new(shared.consumer().client(), shared.clone(), forwarding.clone());
        let (events_tx, events) = mpsc::unbounded_channel();
        let (strays_tx, strays) = mpsc::unbounded_channel();
        let member = Member {
            publisher: publisher.to_string(),
            events: events_tx,
            forwarding,
            strays: strays_tx,
            start,
            assigned: Default::default(),
        };
        {
            let mut members = shared.consumer().context().members();
            members.insert(topic.clone(), member);
            shared.resubscribe(&members);
        }
        drop(consumers);
        Ok((Membership { shared, topic, events, strays }, queue))
    }

    /// Where each partition the node's workers hold begins and ends, as
    /// their consumers last heard: `(publisher, topic, watermarks)`.
    pub fn watermarks(&self) -> Vec<(String, String, Watermarks)> {
        let consumers: Vec<Arc<Shared>> = {
            let consumers = self.consumers.lock().unwrap_or_else(|e| e.into_inner());
            consumers.iter().filter_map(|(_, shared)| shared.upgrade()).collect()
        };
        consumers
            .iter()
            .flat_map(|shared| {
                let consumer = shared.consumer();
                consumer.context().watermarks(consumer.client())
            })
            .collect()
    }

    /// The node's consumers not yet closed.
    pub fn consumers(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

/// How long a consumer whose last worker left waits for the group to take
/// its partitions back before it closes.
const RELEASE_WAIT: Duration = Duration::from_secs(10);

/// How often a consumer whose brokers are unreachable asks them for metadata.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// Serves the consumer queue: rebalances (run in its callback), errors, and
/// messages fetched before their partition was forwarded, handed to their
/// worker. While every broker is unreachable it asks for metadata until one
/// answers, and tells the workers: librdkafka reports that every broker is
/// down, but not that one is back. Once its last worker is gone, it closes
/// the consumer ([`close_apart`]: closing waits for the group).
async fn serve(
    consumer: Arc<GroupConsumer>,
    mut closing: oneshot::Receiver<Arc<GroupConsumer>>,
    open: Arc<AtomicUsize>,
) {
    let mut owned = Owned(Some(consumer));
    let handed = serve_queue(owned.0.as_ref().expect("owned until the end"), &mut closing).await;
    drop(handed);
    let closed = close_apart(owned.0.take().expect("owned until the end"));
    if closed.await.is_err() {
        tracing::error!("closing a Kafka consumer panicked");
    }
    open.fetch_sub(1, Ordering::SeqCst);
}

async fn serve_queue(
    consumer: &Arc<GroupConsumer>,
    closing: &mut oneshot::Receiver<Arc<GroupConsumer>>,
) -> Option<Arc<GroupConsumer>> {
    let context = consumer.context();
    let mut stream = consumer.stream();
    loop {
        tokio::select! {
            biased;
            handed = &mut *closing => {
                // Closing a cooperative consumer that still holds partitions can hang for good
                // (librdkafka answers the revoke made while closing never: #4884, seen here on
                // a node's shutdown). Its last worker unsubscribed it: the group takes its
                // partitions back through the queue, served until it holds none, then it closes.
                let deadline = tokio::time::Instant::now() + RELEASE_WAIT;
                while consumer.assignment().is_ok_and(|held| held.count() > 0) && tokio::time::Instant::now() < deadline {
                    tokio::select! {
                        _ = stream.next() => {}
                        () = tokio::time::sleep(Duration::from_millis(50)) => {}
                    }
                }
                return handed.ok();
            }
            received = stream.next() => match received {
                Some(Ok(message)) => match to_raw(&message) {
                    Ok(raw) => context.stray(rdkafka::Message::topic(&message), raw),
                    Err(e) => tracing::warn!(group = %context.label(), error = %e, "reading the consumer queue"),
                },
                Some(Err(e)) => tracing::warn!(group = %context.label(), error = %e, "reading the consumer queue"),
                None => return None,
            },
            () = context.probe.notified() => {}
            () = tokio::time::sleep(PROBE_EVERY), if context.is_down() => {
                let topic = context.members().keys().next().cloned();
                let asking = consumer.clone();
                let answered = tokio::task::spawn_blocking(move || {
                    asking.client().fetch_metadata(topic.as_deref(), Duration::from_secs(2)).is_ok()
                })
                .await
                .unwrap_or(false);
                if answered {
                    context.reachable();
                }
            }
        }
    }
}
