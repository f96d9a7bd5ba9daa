//! The web console's pages with a full catalog: one publisher with 1,000
//! batches (1,000 executions and table versions) and 10,000 dead letters,
//! made by a real `weir serve` from 100,000 messages on the embedded broker.
//! Each page is timed as the browser loads it, signed in with a session
//! cookie: the page's requests to the server, those the page sends side by
//! side sent side by side, until the last answer; and the bytes they answer. Printed: median and 95th percentile of 30 loads
//! each, against the 100 ms target.
//!
//! `cargo bench -p weir --bench console`

#[path = "../../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use serde_json::json;

use common::serve::{Server, broker, poll, registered};
use common::stream::{clicks, produce};

const MESSAGES: usize = 100_000;
/// Every tenth message is not JSON: a dead letter.
const EVERY: usize = 10;
const LOADS: usize = 30;

fn main() {
    let broker = broker();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"));
    // 100 messages a batch: 1,000 batches.
    let token = registered(&server, dir.path(), broker.bootstrap_servers());
    let good = clicks(0, MESSAGES);
    let values: Vec<String> =
        good.into_iter().enumerate().map(|(i, v)| if i % EVERY == 0 { format!("not json {i}") } else { v }).collect();
    let started = Instant::now();
    common::block_on(produce(broker.bootstrap_servers(), "clicks", &values));
    let rows = (MESSAGES - MESSAGES / EVERY) as u64;
    server.wait_for_rows(&token, "events", "clicks", rows);
    let base = "/v1/collections/events/publishers/read_clicks";
    let (_, last) = server.http("GET", &format!("{base}/executions?limit=1"), Some(&token), None);
    let executions = last[0]["id"].as_i64().unwrap();
    let dead = poll("every dead letter", || {
        let metrics = server.text("/metrics", common::serve::ADMIN);
        let total: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("weir_dead_letters_total"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        (total as usize >= MESSAGES / EVERY).then_some(total as usize)
    });
    println!(
        "catalog: {executions} executions, {rows} rows in the table, {dead} dead letters (made in {:.0} s)",
        started.elapsed().as_secs_f64()
    );

    let cookie = sign_in(&server, &token);
    let admin = sign_in(&server, common::serve::ADMIN);
    let table = "/v1/collections/events/tables/clicks";
    let one = |path: &str| vec![vec![path.to_string()]];
    let pages: Vec<(&str, &String, Vec<Vec<String>>)> = vec![
        (
            "the page itself (HTML, script, style)",
            &cookie,
            vec![vec!["/".into()], vec!["/console/app.js".into(), "/console/style.css".into()]],
        ),
        ("publishers", &cookie, one("/v1/publishers")),
        ("a publisher (status, 50 batches)", &cookie, vec![vec![base.into(), format!("{base}/executions?limit=50")]]),
        ("dead letters (200 shown)", &cookie, one(&format!("{base}/dead-letters?limit=200"))),
        ("dead letters by reason", &cookie, one(&format!("{base}/dead-letters?limit=200&reason=expected"))),
        (
            "a table (1,000 versions, the last 50 shown)",
            &cookie,
            vec![
                vec![table.into(), format!("{table}/schema?"), format!("{table}/versions?limit=50")],
                vec![format!("{table}/sample?offset=0&limit=20"), format!("{table}/files?offset=0&limit=100")],
            ],
        ),
        (
            "a table's later page (rows from 50,000)",
            &cookie,
            vec![
                vec![table.into(), format!("{table}/schema?"), format!("{table}/versions?limit=50")],
                vec![format!("{table}/sample?offset=50000&limit=20"), format!("{table}/files?offset=500&limit=100")],
            ],
        ),
        ("tables", &cookie, vec![vec!["/v1/collections".into()], vec!["/v1/collections/events/tables".into()]]),
        ("admin (tenants, audit log)", &admin, vec![vec!["/v1/tenants".into(), "/v1/admin/audit?limit=100".into()]]),
    ];
    println!(
        "{:<44} {:>9} {:>8} {:>8} {:>9}   (target: under 100 ms) its slowest request, median ms",
        "page", "median ms", "p95 ms", "first ms", "bytes"
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for (name, cookie, rounds) in pages {
        let paths: Vec<&String> = rounds.iter().flatten().collect();
        let mut times = Vec::new();
        let mut each: Vec<Vec<Duration>> = vec![Vec::new(); paths.len()];
        let mut bytes = 0;
        for _ in 0..LOADS {
            let started = Instant::now();
            // Round by round, as the page sends them: the requests of a round side by side.
            let answers: Vec<(usize, Duration)> = rounds
                .iter()
                .flat_map(|round| {
                    std::thread::scope(|s| {
                        let running: Vec<_> = round
                            .iter()
                            .map(|path| {
                                s.spawn(|| {
                                    let one = Instant::now();
                                    (get(&server, cookie, path), one.elapsed())
                                })
                            })
                            .collect();
                        running.into_iter().map(|r| r.join().unwrap()).collect::<Vec<_>>()
                    })
                })
                .collect();
            times.push(started.elapsed());
            bytes = answers.iter().map(|a| a.0).sum::<usize>();
            for (i, (_, took)) in answers.into_iter().enumerate() {
                each[i].push(took);
            }
        }
        let first = times[0];
        times.sort();
        let median = |mut t: Vec<Duration>| {
            t.sort();
            t[t.len() / 2]
        };
        let (slowest, at) = each.into_iter().map(median).zip(&paths).max().unwrap();
        println!(
            "{name:<44} {:>9.1} {:>8.1} {:>8.1} {bytes:>9}   {at} {:.1}",
            ms(times[LOADS / 2]),
            ms(times[LOADS * 95 / 100]),
            ms(first),
            ms(slowest)
        );
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

/// A session's cookie (`weir_session=…`) for `token`.
fn sign_in(server: &Server, token: &str) -> String {
    let response =
        agent().post(format!("{}/console/session", server.url)).send_json(json!({ "token": token })).unwrap();
    let cookie = response.headers().get("set-cookie").expect("a session").to_str().unwrap();
    cookie.split(';').next().unwrap().to_string()
}

/// GETs `path` with the session; the bytes answered.
fn get(server: &Server, cookie: &str, path: &str) -> usize {
    let mut response = agent().get(format!("{}{path}", server.url)).header("Cookie", cookie).call().unwrap();
    assert_eq!(response.status().as_u16(), 200, "{path}");
    response.body_mut().with_config().limit(1 << 30).read_to_vec().unwrap().len()
}
