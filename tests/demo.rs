//! The README's main job: `weir demo` runs the whole pipeline on its embedded
//! broker and accounts for every message it produced.

use std::process::Command;

#[test]
fn weir_demo_commits_every_good_event_and_keeps_every_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["demo", "--messages", "300", "--malformed", "4", "--messages-rollover", "120", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("running weir demo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("produced 304 click events (4 malformed)"), "{stdout}");
    assert!(stdout.contains("300 rows in "), "{stdout}");
    assert!(stdout.contains(", 4 dead letters; catalog at "), "{stdout}");
    assert!(stdout.contains("clicks v2:"), "at least two rollovers: {stdout}");

    let catalog = weir::catalog::Catalog::open(dir.path()).unwrap();
    let rows: u64 = catalog.versions("events", "clicks").unwrap().iter().map(|v| v.rows).sum();
    assert_eq!(rows, 300);
    assert_eq!(catalog.dead_letters("events/read_clicks").unwrap().len(), 4);
}
