//! Density: what publishers cost one `weir serve` node while they are idle.
//! For each count (default 10 and 100; `-- --publishers 10,100,1000`), a fresh
//! node registers that many publishers in tenants of 10 (a tenant's collection
//! and its connection, which its publishers share: one consumer on the node),
//! each reading its own topic on the embedded broker (JSON
//! values; the passthrough plugin, in Rust, Python and JavaScript by turns
//! of tenant: each language's build compiled once). Printed: registration time; then, idle,
//! RSS and threads above an empty node and per publisher, the threads by what
//! owns them, and the CPU the node uses doing nothing; then the time from
//! sending one message to each topic (1 s time rollover) until half of the
//! publishers, and until every one, has committed it; then the time from starting the node again on
//! its data until every publisher holds its partition again. Before the
//! restart, the first 10 publishers (their topics of 4 partitions) read a
//! backlog of 120,000 messages each while the others stay idle: their rate beside the idle ones, against the
//! 10-publisher run's (`--publishers 10,…`). Beside it,
//! librdkafka's share: as many idle consumers with the workers' settings in
//! one process, one per publisher as before the consumers were shared.
//!
//! `cargo bench -p weir --bench density [-- --publishers 10,100] [--settings fetch.wait.max.ms=500,…]`
//! [--without-alone] (`--settings`: consumer settings on every connection, over the node's
//! defaults; `--without-alone`: leave out librdkafka's share)

#[path = "../../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::many;
use common::serve::Server;

/// How long the node is watched doing nothing.
const IDLE: Duration = Duration::from_secs(20);
const TENANT: usize = 10;
/// The busy publishers: the first tenant's (one consumer), and what each reads,
/// spread over its topic's partitions (the embedded broker keeps 5 MB a partition).
const BUSY: usize = 10;
const BUSY_MESSAGES: usize = 120_000;
const BUSY_PARTITIONS: i32 = 4;

/// A process as `/proc` shows it at one moment.
struct Sample {
    rss_mb: f64,
    threads: usize,
    /// Thread names without their numbers (`rdk:broker12` → `rdk:broker`), counted.
    owners: BTreeMap<String, usize>,
}

fn sample(pid: u32) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> f64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    let mut owners = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let Ok(name) = std::fs::read_to_string(task.path().join("comm")) else { continue };
        *owners.entry(owner(&name)).or_default() += 1;
    }
    Sample { rss_mb: field("VmRSS:") / 1024.0, threads: field("Threads:") as usize, owners }
}

/// A thread's name without its number, as in `Sample::owners`.
fn owner(comm: &str) -> String {
    comm.trim().trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '#').into()
}

/// Run time so far of each of `pid`'s threads, by thread id, with its owner.
fn thread_cpu(pid: u32) -> BTreeMap<String, (String, Duration)> {
    let mut threads = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let tid = task.file_name().to_string_lossy().into_owned();
        let (Ok(comm), Some(used)) = (
            std::fs::read_to_string(task.path().join("comm")),
            tid.parse().ok().and_then(|t| common::run_time_of_thread(pid, t)),
        ) else {
            continue;
        };
        threads.insert(tid, (owner(&comm), used));
    }
    threads
}

/// The CPU a process's threads use over a window, by thread owner: each
/// thread's run time, looked at on every [`ThreadClock::tick`] (a thread that
/// ends takes its time since the last tick with it).
struct ThreadClock {
    pid: u32,
    started: Instant,
    before: Duration,
    threads: BTreeMap<String, (String, Duration)>,
    by_owner: BTreeMap<String, f64>,
    /// Threads that ended meanwhile.
    ended: usize,
}

impl ThreadClock {
    fn start(pid: u32) -> Self {
        let before = common::cpu_of(pid).unwrap();
        let threads = thread_cpu(pid);
        Self { pid, started: Instant::now(), before, threads, by_owner: BTreeMap::new(), ended: 0 }
    }

    fn tick(&mut self) {
        let now = thread_cpu(self.pid);
        self.ended += self.threads.keys().filter(|tid| !now.contains_key(*tid)).count();
        for (tid, (owner, used)) in &now {
            let then = self.threads.get(tid).map_or(Duration::ZERO, |(_, then)| *then);
            *self.by_owner.entry(owner.clone()).or_default() += used.saturating_sub(then).as_secs_f64();
        }
        self.threads = now;
    }

    /// Cores used since the start, in all and by thread owner.
    fn stop(mut self) -> Cores {
        self.tick();
        let took = self.started.elapsed().as_secs_f64();
        let used = common::cpu_of(self.pid).unwrap() - self.before;
        self.by_owner.values_mut().for_each(|cpu| *cpu /= took);
        Cores { all: used.as_secs_f64() / took, by_owner: self.by_owner, ended: self.ended, took }
    }
}

/// What [`ThreadClock`] measured.
#[derive(Default)]
struct Cores {
    all: f64,
    by_owner: BTreeMap<String, f64>,
    ended: usize,
    /// Seconds from the start to the stop.
    took: f64,
}

impl Cores {
    /// The same CPU as cores over the first `window` of the time measured,
    /// when the work measured ended before the clock was stopped.
    fn over(mut self, window: Duration) -> Cores {
        let scale = self.took / window.as_secs_f64();
        self.all *= scale;
        self.by_owner.values_mut().for_each(|cores| *cores *= scale);
        self.took = window.as_secs_f64();
        self
    }

    /// The owners that used at least half a thousandth of a core.
    fn owners(&self) -> String {
        let cores = self.by_owner.iter().filter(|(_, cores)| **cores >= 0.0005);
        cores.map(|(name, cores)| format!("{name} {cores:.3}")).collect::<Vec<_>>().join(", ")
    }
}

/// The cores `pid` used over `IDLE`, and what it looked like at the end.
fn idle(pid: u32) -> (Cores, Sample) {
    let mut clock = ThreadClock::start(pid);
    while clock.started.elapsed() < IDLE {
        std::thread::sleep(Duration::from_secs(1));
        clock.tick();
    }
    (clock.stop(), sample(pid))
}

struct Run {
    publishers: usize,
    register_s: f64,
    /// What the node used doing nothing.
    idle: Cores,
    /// What this process (the embedded broker, serving the idle consumers) used meanwhile.
    broker_idle_cores: f64,
    sample: Sample,
    /// From sending the first of the messages until the broker had acknowledged them all.
    acked_s: f64,
    /// From sending a message to each publisher until the last has committed it.
    first_commit_s: f64,
    /// ...until half of them have.
    median_commit_s: f64,
    /// Where the commits' time went.
    phases: Phases,
    /// What the node used from sending until the last had committed.
    burst: Cores,
    /// Messages a second the busy publishers read and committed, the others idle,
    /// and what the node and this process (the embedded broker) used meanwhile.
    busy: Busy,
    /// From starting the node again on its data until every publisher holds its partition again.
    restart_s: f64,
}

/// Publishers whose partitions `server` holds now, as its heartbeat says (every 2 s).
fn holding(server: &Server) -> usize {
    let port = server.url.rsplit(':').next().unwrap().trim_end_matches('/');
    let metrics = server.text("/metrics", common::serve::ADMIN);
    many::series(&metrics, "weir_cluster_partitions", &[])
        .iter()
        .filter(|(labels, held)| labels.contains(&format!(":{port}\"")) && *held > 0.0)
        .count()
}

/// Publishers (`p<i>`) that have committed a batch, as one `/metrics` answer says.
fn committed(server: &Server) -> Vec<usize> {
    let metrics = server.text("/metrics", common::serve::ADMIN);
    many::series(&metrics, "weir_batches_committed_total", &[])
        .iter()
        .filter(|(_, n)| *n > 0.0)
        .filter_map(|(labels, _)| {
            let name = labels.split("publisher=\"p").nth(1)?;
            name.split('"').next()?.parse().ok()
        })
        .collect()
}

/// Where the time of the batches of one message each went, over all publishers:
/// from sending to the batch's closing, then each phase of its processing, in
/// seconds, the mean and the largest.
#[derive(Default)]
struct Phases(BTreeMap<&'static str, (f64, f64)>);

/// The phases of publisher `p<i>`'s committed executions, from its executions' record.
fn phases(server: &Server, tokens: &[(String, String)], publishers: usize, sent_at_ms: i64) -> Phases {
    let mut seen: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    for i in 0..publishers {
        let path = format!("/v1/collections/events/publishers/p{i}/executions");
        let (status, executions) = server.http("GET", &path, Some(&tokens[i / TENANT].0), None);
        assert_eq!(status, 200, "{executions}");
        for e in executions.as_array().unwrap().iter().filter(|e| e["status"] == "committed") {
            let t = &e["timings_ms"];
            let closed = (e["started_at_ms"].as_i64().unwrap() - sent_at_ms) as f64;
            for (phase, ms) in [
                ("closed", closed),
                ("decode", t["decode"].as_f64().unwrap_or(0.0)),
                ("publish", t["publish"].as_f64().unwrap_or(0.0)),
                ("plugin cpu", t["plugin_cpu"].as_f64().unwrap_or(0.0)),
                ("write", t["write"].as_f64().unwrap_or(0.0)),
                ("commit", t["commit"].as_f64().unwrap_or(0.0)),
                ("log", t["log"].as_f64().unwrap_or(0.0)),
            ] {
                seen.entry(phase).or_default().push(ms / 1e3);
            }
            let language = ["rust", "python", "javascript"][(i / TENANT) % 3];
            seen.entry(language).or_default().push(t["plugin_cpu"].as_f64().unwrap_or(0.0) / 1e3);
        }
    }
    Phases(
        seen.into_iter()
            .map(|(phase, s)| (phase, (s.iter().sum::<f64>() / s.len() as f64, s.iter().copied().fold(0.0, f64::max))))
            .collect(),
    )
}

/// When table `t<i>`'s first version was committed (ms since the epoch).
fn first_version_at_ms(server: &Server, token: &str, i: usize) -> i64 {
    let path = format!("/v1/collections/events/tables/t{i}/versions");
    let (status, versions) = server.http("GET", &path, Some(token), None);
    assert_eq!(status, 200, "{versions}");
    let at = versions.as_array().unwrap().iter().filter_map(|v| v["created_at_ms"].as_i64()).min();
    at.unwrap_or_else(|| panic!("t{i} has no version: {versions}"))
}

/// Rows in every version of table `t<i>`.
fn rows(server: &Server, token: &str, i: usize) -> u64 {
    let path = format!("/v1/collections/events/tables/t{i}/versions");
    match server.http("GET", &path, Some(token), None) {
        (200, Value::Array(versions)) => versions.iter().filter_map(|v| v["rows"].as_u64()).sum(),
        _ => 0,
    }
}

/// The rate the first `busy` publishers (the first tenant's, on one
/// consumer) read and commit a backlog at, whatever the others do: paused,
/// [`BUSY_MESSAGES`] produced to each one's topic, resumed; messages a second
/// from the resume until the last is committed, and the cores used meanwhile.
fn busy_rate(server: &Server, broker: &weir::embedded::broker::EmbeddedBroker, token: &str, busy: usize) -> Busy {
    let publisher = |i: usize, action: &str| {
        let path = format!("/v1/collections/events/publishers/p{i}/{action}");
        let (status, answer) = server.http("POST", &path, Some(token), None);
        assert!(status < 300, "{action} p{i}: {answer}");
    };
    let before: Vec<u64> = (0..busy).map(|i| rows(server, token, i)).collect();
    (0..busy).for_each(|i| publisher(i, "pause"));
    let producer = common::stream::producer(broker.bootstrap_servers());
    let values = common::stream::clicks(0, BUSY_MESSAGES);
    common::block_on(async {
        for i in 0..busy {
            let topic = format!("t{i}");
            // Round the partitions: none may outgrow what the embedded broker keeps.
            let sends = values.iter().enumerate().map(|(n, value)| {
                let partition = n as i32 % BUSY_PARTITIONS;
                let record =
                    rdkafka::producer::FutureRecord::<(), _>::to(&topic).payload(value.as_str()).partition(partition);
                producer.send(record, Duration::from_secs(60))
            });
            for sent in futures::future::join_all(sends).await {
                sent.map_err(|(e, _)| e).expect("acknowledged");
            }
        }
    });
    let (started, resumed_at_ms) = (Instant::now(), weir::catalog::now_ms());
    let (mut node, mut bench) = (ThreadClock::start(server.pid()), ThreadClock::start(std::process::id()));
    eprintln!("density: {busy} busy publishers resume");
    (0..busy).for_each(|i| publisher(i, "resume"));
    let deadline = Instant::now() + Duration::from_secs(600);
    for (i, before) in before.iter().enumerate() {
        while rows(server, token, i) < before + BUSY_MESSAGES as u64 {
            assert!(Instant::now() < deadline, "p{i} committed {} rows in 600 s", rows(server, token, i));
            std::thread::sleep(Duration::from_millis(100));
            node.tick();
            bench.tick();
        }
    }
    let took = started.elapsed().as_secs_f64();
    let rate = (busy * BUSY_MESSAGES) as f64 / took;
    let (node, bench) = (node.stop(), bench.stop());
    // Each one's reading, from its executions after the resume: from its first batch's
    // window (the 1 s time rollover before that batch closed) to the end of its last.
    let spans: Vec<(f64, f64)> = (0..busy)
        .filter_map(|i| {
            let path = format!("/v1/collections/events/publishers/p{i}/executions");
            let (_, executions) = server.http("GET", &path, Some(token), None);
            let after: Vec<(i64, f64)> = executions
                .as_array()?
                .iter()
                .filter(|e| e["status"] == "committed")
                .filter_map(|e| {
                    let (at, t) = (e["started_at_ms"].as_i64()?, &e["timings_ms"]);
                    let took: f64 = ["decode", "publish", "commit", "log"].iter().filter_map(|k| t[*k].as_f64()).sum();
                    Some((at, took))
                })
                .filter(|&(at, _)| at >= resumed_at_ms)
                .collect();
            let first = after.iter().map(|&(at, _)| at).min()?;
            let end = after.iter().map(|&(at, took)| at as f64 + took).fold(0.0, f64::max);
            Some(((first - resumed_at_ms) as f64 / 1e3, (end - first as f64) / 1e3 + 1.0))
        })
        .collect();
    let mut began: Vec<f64> = spans.iter().map(|s| s.0).collect();
    began.sort_by(f64::total_cmp);
    let span = spans.iter().map(|s| s.1).sum::<f64>() / spans.len() as f64;
    let reading = BUSY_MESSAGES as f64 / span;
    Busy { rate, reading, span, node, bench, began: (began[0], began[began.len() - 1]) }
}

/// What [`busy_rate`] measured.
struct Busy {
    /// From the resume (all ten paused, their consumer closed: a new one joins the group) to the last commit.
    rate: f64,
    /// Messages a second a publisher read at, from its first batch's rollover window to
    /// the end of its last: what the others cost it, whenever the group gave it its partitions.
    reading: f64,
    /// That span, the mean of the ten, in seconds.
    span: f64,
    node: Cores,
    /// This process: the embedded broker, the producer, the benchmark polling the node.
    bench: Cores,
    /// Seconds from the resume until the first, and the last, of them began a batch.
    began: (f64, f64),
}

/// The benchmark's connection: the node's default consumer settings, with
/// `settings` over them (`--settings key=value,…`).
fn connection(bootstrap: &str, settings: &[(String, String)]) -> Value {
    let settings: serde_json::Map<String, Value> =
        settings.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    json!({"bootstrap_servers": bootstrap, "client_settings": settings})
}

fn run(publishers: usize, settings: &[(String, String)]) -> Run {
    let broker = common::serve::broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    let connection = connection(broker.bootstrap_servers(), settings);
    // The tenants' plugins: the passthrough in Rust, Python and JavaScript in turn.
    let plugins = [common::guest("passthrough"), common::python_guest("passthrough"), common::js_guest("passthrough")];
    let started = Instant::now();
    let mut tokens = Vec::new();
    for i in 0..publishers {
        if i % TENANT == 0 {
            let token = server.tenant(&format!("tenant-{}", i / TENANT), json!({}));
            many::collection(&server, &token, "events", &connection);
            let sha = many::plugin(&server, &token, &plugins[(i / TENANT) % plugins.len()]);
            tokens.push((token, sha));
        }
        broker.create_topic(&format!("t{i}"), if i < BUSY { BUSY_PARTITIONS } else { 1 }).unwrap();
        let (token, sha) = tokens.last().unwrap();
        many::register(&server, token, "events", i, sha);
    }
    let register_s = started.elapsed().as_secs_f64();
    // Every group joined and settled before the node is watched.
    std::thread::sleep(Duration::from_secs(10));
    let broker_before = common::cpu_of(std::process::id()).unwrap();
    let (idle, sample) = idle(server.pid());
    let broker_idle_cores =
        (common::cpu_of(std::process::id()).unwrap() - broker_before).as_secs_f64() / IDLE.as_secs_f64();

    // One message to each topic, all sent at once by one producer; the clock starts as they are sent.
    let producer = common::stream::producer(broker.bootstrap_servers());
    let values = common::stream::clicks(0, publishers);
    eprintln!("density: a message to each of {publishers} publishers");
    let (started, sent_at_ms) = (Instant::now(), weir::catalog::now_ms());
    let mut burst = ThreadClock::start(server.pid());
    common::block_on(async {
        let sends = (0..publishers).map(|i| {
            let topic = format!("t{i}");
            let producer = &producer;
            let value = &values[i];
            async move {
                let record = rdkafka::producer::FutureRecord::<(), _>::to(&topic).payload(value.as_str());
                producer.send(record, Duration::from_secs(30)).await.map_err(|(e, _)| e).expect("acknowledged");
            }
        });
        futures::future::join_all(sends).await;
    });
    let acked_s = started.elapsed().as_secs_f64();
    // Until every publisher has committed, one `/metrics` answer every 500 ms (not a request
    // per table, and not often: with 1,000 publishers an answer is itself work for the node
    // being measured); each commit's time is its table version's, read afterwards.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let waiting = publishers - committed(&server).len();
        if waiting == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{waiting} publishers committed nothing in 300 s");
        std::thread::sleep(Duration::from_millis(500));
        burst.tick();
    }
    let burst = burst.stop();
    let mut taken: Vec<f64> = (0..publishers)
        .map(|i| (first_version_at_ms(&server, &tokens[i / TENANT].0, i) - sent_at_ms) as f64 / 1e3)
        .collect();
    taken.sort_by(f64::total_cmp);
    // The node's CPU from sending until the last commit (the clock started as the messages were sent).
    let burst = burst.over(Duration::from_secs_f64(taken[taken.len() - 1]));
    let phases = phases(&server, &tokens, publishers, sent_at_ms);
    let (median_commit_s, first_commit_s) = (taken[taken.len() / 2], taken[taken.len() - 1]);

    let busy = busy_rate(&server, &broker, &tokens[0].0, publishers.min(BUSY));

    // A restart on the same data: compiled plugins come from the artifact cache.
    let data = server.data_dir.clone();
    server.stop();
    let started = Instant::now();
    let server = Server::start(&data);
    let deadline = Instant::now() + Duration::from_secs(300);
    while holding(&server) < publishers {
        assert!(
            Instant::now() < deadline,
            "every publisher consuming again within 300 s: {} of {publishers} are\n{}",
            holding(&server),
            server.text("/metrics", common::serve::ADMIN)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let restart_s = started.elapsed().as_secs_f64();
    Run {
        publishers,
        register_s,
        idle,
        broker_idle_cores,
        sample,
        acked_s,
        first_commit_s,
        median_commit_s,
        phases,
        burst,
        busy,
        restart_s,
    }
}

/// The share that is librdkafka's: `n` consumers with the settings weir's
/// workers use, in this process, each its own group on its own topic (of Tansu, in a process of its own, so that
/// this one holds only the consumers), polled by one thread, idle. Returns
/// MB and threads per consumer, and the cores this process uses.
fn librdkafka_alone(n: usize) -> (f64, f64, f64) {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let broker = common::tansu::Tansu::start();
    let pid = std::process::id();
    let before = sample(pid);
    let consumers: Vec<BaseConsumer> = (0..n)
        .map(|i| {
            broker.create_topic(&format!("alone-{i}"), 1);
            let mut config = ClientConfig::new();
            for (key, value) in weir::sources::kafka::CONSUMER_DEFAULTS {
                config.set(*key, *value);
            }
            let consumer: BaseConsumer = config
                .set("bootstrap.servers", &broker.address)
                .set("group.id", format!("alone-{i}"))
                .set("enable.auto.commit", "false")
                .create()
                .unwrap();
            consumer.subscribe(&[&format!("alone-{i}")]).unwrap();
            consumer
        })
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let polling = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for consumer in &consumers {
                    let _ = consumer.poll(Duration::ZERO);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    // Tansu lets a group join after about half the session timeout.
    std::thread::sleep(Duration::from_secs(10));
    let (cores, after) = idle(pid);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    polling.join().unwrap();
    let n = n as f64;
    ((after.rss_mb - before.rss_mb) / n, (after.threads as f64 - before.threads as f64) / n, cores.all)
}

fn main() {
    let counts: Vec<usize> =
        std::env::args().skip_while(|a| a != "--publishers").nth(1).map_or(vec![10, 100], |list| {
            list.split(',').map(|n| n.parse().expect("--publishers takes numbers")).collect()
        });
    let empty = {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(&dir.path().join("data"));
        std::thread::sleep(Duration::from_secs(3));
        let (cores, sample) = idle(server.pid());
        println!(
            "\ndensity: an empty weir serve node holds {:.0} MB RSS and {} threads, and uses {:.3} of a core idle",
            sample.rss_mb, sample.threads, cores.all
        );
        sample
    };
    let alone: Vec<(usize, (f64, f64, f64))> = if std::env::args().any(|a| a == "--without-alone") {
        Vec::new()
    } else {
        counts.iter().map(|&n| (n, librdkafka_alone(n))).collect()
    };
    let settings: Vec<(String, String)> = std::env::args()
        .skip_while(|a| a != "--settings")
        .nth(1)
        .map(|list| {
            let pair = |kv: &str| kv.split_once('=').map(|(k, v)| (k.into(), v.into()));
            list.split(',').map(|kv| pair(kv).expect("--settings takes key=value,…")).collect()
        })
        .unwrap_or_default();
    let runs: Vec<Run> = counts.iter().map(|&n| run(n, &settings)).collect();
    println!(
        "publishers in tenants of {TENANT} (one connection and consumer each; Rust, Python and JavaScript plugins by turns), each its own 1-partition topic on the embedded broker; idle over {} s after registration; {} cores",
        IDLE.as_secs(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:>10} {:>11} {:>8} {:>12} {:>8} {:>12} {:>11} {:>13} {:>13} {:>10}",
        "publishers",
        "register s",
        "RSS MB",
        "MB/publisher",
        "threads",
        "threads/pub",
        "idle cores",
        "commit p50 s",
        "commit all s",
        "restart s"
    );
    for r in &runs {
        let n = r.publishers as f64;
        println!(
            "{:>10} {:>11.1} {:>8.0} {:>12.2} {:>8} {:>12.2} {:>11.3} {:>13.2} {:>13.2} {:>10.1}",
            r.publishers,
            r.register_s,
            r.sample.rss_mb,
            (r.sample.rss_mb - empty.rss_mb) / n,
            r.sample.threads,
            (r.sample.threads as f64 - empty.threads as f64) / n,
            r.idle.all,
            r.median_commit_s,
            r.first_commit_s,
            r.restart_s
        );
    }
    for (n, (mb, threads, cores)) in &alone {
        println!(
            "librdkafka alone, {n} idle consumers in one process (one group and topic each, on Tansu): {mb:.2} MB and {threads:.2} threads a consumer, {cores:.3} of a core"
        );
    }
    let alone = runs.iter().find(|r| r.publishers == BUSY).map(|r| (r.busy.reading, r.busy.rate));
    let of_alone =
        |now: f64, then: Option<f64>| then.map_or(String::new(), |then| format!(" ({:.2} of alone)", now / then));
    for r in &runs {
        println!(
            "{BUSY} busy publishers ({BUSY_MESSAGES} messages each over {BUSY_PARTITIONS} partitions, one consumer) beside {} idle: each read its backlog from its first batch's window to its last commit in {:.2} s, {:.0} messages/s a publisher{}; all ten from the resume (the group's rejoin included: the first began a batch {:.2} s after it, the last {:.2} s) {:.0} messages/s{}; the node used {:.2} cores ({}), the benchmark's process {:.2} ({})",
            r.publishers - BUSY.min(r.publishers),
            r.busy.span,
            r.busy.reading,
            of_alone(r.busy.reading, alone.map(|a| a.0)),
            r.busy.began.0,
            r.busy.began.1,
            r.busy.rate,
            of_alone(r.busy.rate, alone.map(|a| a.1)),
            r.busy.node.all,
            r.busy.node.owners(),
            r.busy.bench.all,
            r.busy.bench.owners(),
        );
    }
    for r in &runs {
        println!(
            "{} publishers idle: the embedded broker serving their consumers used {:.3} of a core meanwhile",
            r.publishers, r.broker_idle_cores
        );
    }
    for r in &runs {
        let phase = |name: &str| r.phases.0.get(name).copied().unwrap_or_default();
        let (closed, decode, publish, cpu, write, commit, log) = (
            phase("closed"),
            phase("decode"),
            phase("publish"),
            phase("plugin cpu"),
            phase("write"),
            phase("commit"),
            phase("log"),
        );
        println!(
            "{} publishers, a message each (all acknowledged by the broker {:.2} s after the first was sent): batches closed {:.2} s after sending (last {:.2}); then, mean (largest) seconds: decode {:.3} ({:.3}), publish {:.3} ({:.3}; the plugin's CPU {:.3} ({:.3}), writing the file {:.3} ({:.3})), commit {:.3} ({:.3}), Delta log {:.3} ({:.3}); the node used {:.2} cores meanwhile ({})",
            r.publishers,
            r.acked_s,
            closed.0,
            closed.1,
            decode.0,
            decode.1,
            publish.0,
            publish.1,
            cpu.0,
            cpu.1,
            write.0,
            write.1,
            commit.0,
            commit.1,
            log.0,
            log.1,
            r.burst.all,
            r.burst.owners()
        );
        let cpu = |language| phase(language).0 * 1e3;
        println!(
            "{} publishers, a message each: the plugin's CPU a call, mean ms: Rust {:.2}, Python {:.2}, JavaScript {:.2}",
            r.publishers,
            cpu("rust"),
            cpu("python"),
            cpu("javascript")
        );
    }
    if let Some(last) = runs.last() {
        let owners: Vec<String> = last
            .sample
            .owners
            .iter()
            .map(|(name, n)| {
                let before = empty.owners.get(name).copied().unwrap_or(0);
                format!("{name} {n} (+{})", n - before.min(*n))
            })
            .collect();
        println!("threads of the {}-publisher node by name: {}", last.publishers, owners.join(", "));
        println!(
            "idle cores of the {}-publisher node by thread name: {} ({} threads ended meanwhile)",
            last.publishers,
            last.idle.owners(),
            last.idle.ended
        );
    }
    println!(
        "(targets, issue 44: ≤ 1 MB RSS a publisher, ≤ 0.05 core idle for 1,000, a thread count that does not grow with publishers)"
    );
}
