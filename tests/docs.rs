//! The guide cannot rot: its examples are taken out of `README.md` and
//! `docs/` and checked. Every TOML declaration parses and validates (and
//! every connection file parses), every `weir …` command line names real
//! subcommands and flags, the CLI reference is the CLI's own help, every
//! link between pages leads to one, the Python that reads a table runs
//! against a table this test made, and every whole publisher builds and runs
//! on its project's sample.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use weir::publisher::declaration::Declaration;
use weir::publisher::source::KafkaConnection;
use weir::stream::WorkerOptions;
use weir::tables::delta;

use common::stream::{Harness, clicks};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The guide's pages: the README and every page under `docs/`.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, into);
            } else if path.extension().is_some_and(|e| e == "md") {
                into.push(path);
            }
        }
    }
    let mut pages = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut pages);
    pages
}

/// A fenced code block of the guide.
struct Block {
    /// `page:line` of its opening fence.
    at: String,
    lang: String,
    text: String,
}

fn name(page: &Path) -> String {
    page.strip_prefix(repo()).unwrap_or(page).display().to_string()
}

fn blocks() -> Vec<Block> {
    let mut blocks = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut open: Option<(usize, String, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match (&mut open, line.strip_prefix("```")) {
                (None, Some(info)) => open = Some((i + 1, info.trim().to_string(), String::new())),
                (Some(_), Some(_)) => {
                    let (line, lang, text) = open.take().unwrap();
                    blocks.push(Block { at: format!("{}:{line}", name(&page)), lang, text });
                }
                (Some((_, _, text)), None) => {
                    text.push_str(line);
                    text.push('\n');
                }
                (None, None) => {}
            }
        }
        assert!(open.is_none(), "{}: a code block is not closed", name(&page));
    }
    blocks
}

/// Every `weir …` command line of the guide: the lines of shell blocks that
/// run `weir`, and the inline code that starts with `weir `.
fn command_lines() -> Vec<(String, String)> {
    let mut lines = Vec::new();
    for block in blocks().iter().filter(|b| b.lang == "sh") {
        let joined = block.text.replace("\\\n", " ");
        for line in joined.lines() {
            let words: Vec<&str> =
                line.split_whitespace().skip_while(|w| w.contains('=') && !w.starts_with('-')).collect();
            if words.first() == Some(&"weir") {
                lines.push((block.at.clone(), words.join(" ")));
            }
        }
    }
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        // Outside code blocks; inline code may wrap across lines.
        let prose: String =
            text.split("```").step_by(2).map(|part| part.replace('\n', " ")).collect::<Vec<_>>().join(" ");
        for (i, span) in prose.split('`').enumerate() {
            if i % 2 == 1 && span.starts_with("weir ") {
                lines.push((name(&page), span.to_string()));
            }
        }
    }
    lines
}

/// What `weir PATH -h` lists: its subcommands, and its options.
#[derive(Debug, Default)]
struct Help {
    subcommands: Vec<String>,
    options: Vec<String>,
}

fn weir(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_weir")).args(args).output().expect("running weir")
}

/// `weir PATH -h`, the same on every machine: no `WEIR_*` variable's value
/// shown, no terminal's width.
fn help_text(path: &[String]) -> String {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("-h");
    let out = Command::new(env!("CARGO_BIN_EXE_weir")).args(&args).env_clear().output().expect("running weir");
    assert!(out.status.success(), "weir {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn help(path: &[String]) -> Help {
    let text = help_text(path);
    let (mut help, mut section) = (Help::default(), "");
    for line in text.lines() {
        if !line.starts_with(' ') {
            section = line.trim_end_matches(':');
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or_default();
        match section {
            "Commands" => help.subcommands.push(first.to_string()),
            // `  -o, --output <OUTPUT>  What…` or `      --update  What…`; other lines go on a description.
            "Options" if line.trim_start().starts_with('-') => {
                let line = line.trim_start();
                let (short, long) = match line.strip_prefix("--") {
                    Some(_) => ("", line),
                    None => line.split_once(", ").unwrap_or((line, "")),
                };
                let long = long.split_whitespace().next().unwrap_or_default();
                help.options.extend([short, long].into_iter().filter(|o| !o.is_empty()).map(str::to_string));
            }
            _ => {}
        }
    }
    help
}

/// Checks one command line; `Err` says what is wrong.
fn check_line(line: &str, helps: &mut HashMap<Vec<String>, Help>) -> Result<(), String> {
    let stop = ["#", "&&", "||", "|", "&", ";", ">", "2>"];
    let words: Vec<&str> = line.split_whitespace().skip(1).take_while(|w| !stop.contains(w)).collect();
    let (mut path, mut flags, mut positional, mut after_flag) = (Vec::<String>::new(), Vec::new(), false, false);
    for word in words {
        let level = helps.entry(path.clone()).or_insert_with(|| help(&path));
        if word.starts_with('-') && word.len() > 1 && !word.starts_with("-<") {
            let flag = word.split('=').next().unwrap();
            flags.push(flag.to_string());
            after_flag = !word.contains('=');
            continue;
        }
        if !positional && level.subcommands.iter().any(|s| s == word) {
            path.push(word.to_string());
            after_flag = false;
            continue;
        }
        if !level.subcommands.is_empty() && !after_flag && !positional {
            return Err(format!(
                "`weir {}` has no subcommand `{word}` (it has {:?})",
                path.join(" "),
                level.subcommands
            ));
        }
        positional |= !after_flag;
        after_flag = false;
    }
    let level = helps.entry(path.clone()).or_insert_with(|| help(&path));
    for flag in flags {
        if !level.options.contains(&flag) && flag != "-h" && flag != "--help" {
            return Err(format!("`weir {}` takes no `{flag}` (it takes {:?})", path.join(" "), level.options));
        }
    }
    Ok(())
}

#[test]
fn every_weir_command_line_in_the_guide_names_real_subcommands_and_flags() {
    let mut helps = HashMap::new();
    let lines = command_lines();
    assert!(lines.len() > 100, "the guide's command lines were not found: {}", lines.len());
    let wrong: Vec<String> = lines
        .iter()
        .filter_map(|(at, line)| check_line(line, &mut helps).err().map(|e| format!("{at}: {line}\n    {e}")))
        .collect();
    assert!(wrong.is_empty(), "command lines in the guide that weir does not take:\n{}", wrong.join("\n"));
    // The checker itself refuses what weir refuses.
    assert!(check_line("weir publisher regster events", &mut helps).is_err());
    assert!(check_line("weir table show events/clicks --no-such-flag", &mut helps).is_err());
    assert!(check_line("weir --server https://a:1 publisher status events/p", &mut helps).is_ok());
}

/// `docs/reference/cli.md` as the CLI's help makes it.
fn cli_reference() -> String {
    let mut out = String::from(
        "# CLI\n\nEvery command's `-h`, as `weir` prints it. `tests/docs.rs` makes this page from the CLI \
         itself and fails when they differ: `WEIR_BLESS=1 cargo test --release --test docs cli` writes it \
         again.\n",
    );
    let mut queue = vec![Vec::<String>::new()];
    while let Some(path) = queue.pop() {
        let text = help_text(&path);
        out.push_str(
            &format!("\n## weir {}\n\n```text\n{}\n```\n", path.join(" "), text.trim_end())
                .replace("weir \n", "weir\n"),
        );
        let subcommands = help(&path).subcommands;
        for sub in subcommands.iter().rev().filter(|s| *s != "help") {
            let mut deeper = path.clone();
            deeper.push(sub.clone());
            queue.push(deeper);
        }
    }
    out
}

#[test]
fn the_cli_reference_is_the_cli_s_own_help() {
    let page = repo().join("docs/reference/cli.md");
    let made = cli_reference();
    if std::env::var_os("WEIR_BLESS").is_some() {
        std::fs::write(&page, &made).unwrap();
    }
    let written = std::fs::read_to_string(&page).unwrap_or_default();
    assert!(
        written == made,
        "docs/reference/cli.md is not what the CLI says: write it again with `WEIR_BLESS=1 cargo test --release --test docs cli`"
    );
}

#[test]
fn every_link_between_the_guides_pages_leads_to_a_page() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let prose: String = text.split("```").step_by(2).collect();
        for link in prose.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            if link.contains("://") || link.starts_with('#') {
                continue;
            }
            let target = page.parent().unwrap().join(link.split('#').next().unwrap());
            if !target.exists() {
                broken.push(format!("{}: {link}", name(&page)));
            }
        }
    }
    assert!(broken.is_empty(), "links to nothing:\n{}", broken.join("\n"));
}

#[test]
fn every_declaration_and_connection_file_in_the_guide_parses_and_validates() {
    let data = repo().join("guest-examples/data");
    let mut checked = 0;
    for block in blocks().iter().filter(|b| b.lang == "toml") {
        if block.text.contains("[source.kafka]") || block.text.contains("[source.postgres_cdc]") {
            let declaration = Declaration::parse(&block.text).unwrap_or_else(|e| panic!("{}: {e}", block.at));
            declaration.resolve_any(Some(&data)).unwrap_or_else(|e| panic!("{}: {e}", block.at));
        } else if block.text.contains("kind = \"postgres-cdc-in\"") {
            let text = block.text.replace("kind = \"postgres-cdc-in\"", "");
            toml::from_str::<weir::sources::postgres::PostgresConnection>(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", block.at));
        } else if block.text.contains("bootstrap_servers") {
            toml::from_str::<KafkaConnection>(&block.text).unwrap_or_else(|e| panic!("{}: {e}", block.at));
        } else {
            panic!("{}: a TOML block that is neither a declaration nor a connection file", block.at);
        }
        checked += 1;
    }
    assert!(checked >= 3, "the guide's declarations were not found");
}

/// Loads DuckDB's delta extension from the wheel `scripts/setup.sh` installs
/// into DuckDB's default connection: without a network, `LOAD delta` cannot
/// download it. Everything after this runs as the guide has it.
const OFFLINE_DUCKDB: &str = r#"
import os, duckdb, duckdb_extension_delta
_root = os.path.join(os.path.dirname(duckdb_extension_delta.__file__), "extensions")
(_path,) = [os.path.join(d, f) for d, _, fs in os.walk(_root) for f in fs if f.endswith(".duckdb_extension")]
duckdb.execute("SET autoinstall_known_extensions = false")
duckdb.execute(f"LOAD '{_path}'")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guides_python_reads_a_table_the_test_made() {
    // A table of at least eight versions, where the guide's snippets look for it.
    let h = Harness::new(3);
    h.produce("clicks", &clicks(0, 300)).await;
    let mut w = h.start(
        h.publisher("read-clicks", json!({"kafka.messages_rollover": 30, "kafka.time_rollover_seconds": 1}), None),
        WorkerOptions::default(),
    );
    w.commits_until(300).await;
    w.stop().await;
    let cwd = tempfile::tempdir().unwrap();
    let parent = cwd.path().join("weir-data/tables/acme/events");
    std::fs::create_dir_all(&parent).unwrap();
    std::os::unix::fs::symlink(h.dir.path().join(delta::table_dir("events", "clicks")), parent.join("clicks")).unwrap();

    let snippets: Vec<Block> = blocks()
        .into_iter()
        .filter(|b| b.lang == "python" && ["delta_scan", "deltalake", "scan_delta"].iter().any(|r| b.text.contains(r)))
        .collect();
    assert!(snippets.len() >= 2, "the guide's table readers were not found");
    for snippet in snippets {
        let out = Command::new("python3")
            .arg("-c")
            .arg(format!("{OFFLINE_DUCKDB}\n{}", snippet.text))
            .current_dir(cwd.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {}", snippet.at, String::from_utf8_lossy(&out.stderr));
    }
}

/// The language `weir plugin new` takes for a block, and the file its code goes in.
fn publisher_project(block: &Block) -> Option<(&'static str, &'static str)> {
    let text = &block.text;
    match block.lang.as_str() {
        "rust" if text.contains("export_publisher!") || text.contains("export_stream_publisher!") => {
            Some(("rust", "src/lib.rs"))
        }
        "ts" | "typescript" if text.contains("export const publish") => Some(("typescript", "app.ts")),
        "js" | "javascript" if text.contains("export const publish") => Some(("javascript", "app.js")),
        "python" if text.contains("@weir.publisher") => Some(("python", "app.py")),
        _ => None,
    }
}

#[test]
fn every_publisher_in_the_guide_builds_and_runs_on_its_sample() {
    let dir = tempfile::tempdir().unwrap();
    let blocks = blocks();
    let projects: Vec<(usize, &Block, &str, &str)> = blocks
        .iter()
        .enumerate()
        .filter_map(|(i, block)| publisher_project(block).map(|(language, file)| (i, block, language, file)))
        .collect();
    // Two at a time: a build is mostly one core's work (the Rust ones wait on each other for cargo's lock).
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while let Some(&(i, block, language, file)) =
                    projects.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    if let Err(e) = build_and_run(dir.path(), i, block, language, file) {
                        failures.lock().unwrap().push(e);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    for language in ["rust", "typescript", "python"] {
        assert!(projects.iter().any(|p| p.2 == language), "no {language} publisher found in the guide");
    }
}

/// Makes the guide's publisher `block` a project of its language with `weir
/// plugin new`, builds it with `weir plugin build`, runs it on the project's sample.
fn build_and_run(dir: &Path, i: usize, block: &Block, language: &str, file: &str) -> Result<(), String> {
    let name = format!("guide_{i}");
    let project = dir.join(&name);
    let project_arg = project.display().to_string();
    let new = weir(&["plugin", "new", &name, "--language", language, "--dir", &project_arg]);
    if !new.status.success() {
        return Err(format!("{} ({language}): plugin new: {}", block.at, String::from_utf8_lossy(&new.stderr)));
    }
    std::fs::write(project.join(file), &block.text).unwrap();
    if language == "rust" {
        std::fs::copy(repo().join("guest-examples/Cargo.lock"), project.join("Cargo.lock")).unwrap();
    }
    // Built in the guests' target directory, with the guests' lock file, so the SDK's
    // dependencies are not compiled again.
    let guests_target = common::guests_dir().ancestors().nth(2).unwrap().to_path_buf();
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["plugin", "build", &project_arg])
        .env("CARGO_TARGET_DIR", &guests_target)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "{} ({language}) does not build:\n{said}{}",
            block.at,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let component = said["built ".len()..].split(" (").next().unwrap().to_string();
    let declaration = project.join("publisher.toml").display().to_string();
    let sample = project.join("sample.jsonl").display().to_string();
    let output = dir.join(format!("{name}-out")).display().to_string();
    let ran =
        weir(&["run-plugin", &component, "--declaration", &declaration, "--input", &sample, "--output-dir", &output]);
    if !ran.status.success() {
        return Err(format!("{} ({language}) fails on its sample: {}", block.at, String::from_utf8_lossy(&ran.stderr)));
    }
    Ok(())
}
