//! Builds the guest examples and hostile fixtures (their own workspace, for
//! wasm32-wasip2) so the tests, the benchmark and `weir demo` can load them,
//! and the columnar kernels, which the binary embeds for `weir plugin build`
//! to compose in. The components land in
//! `<target>/guests/wasm32-wasip2/release/`, outside the source tree; none is
//! ever committed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let guests = manifest_dir.parent().unwrap().join("guest-examples");
    // Relative to this package, not absolute: two clones sharing one target
    // directory share this build script's fingerprint, and absolute paths
    // would have one clone watch the other's sources.
    // Only the Rust guests: the Python and JavaScript ones (and their
    // node_modules, __pycache__) are built by the tests that use them.
    for path in [
        "Cargo.toml",
        "Cargo.lock",
        "sdk",
        "kernels",
        "clicks-enrich",
        "clicks-by-section",
        "read-clicks",
        "passthrough",
        "fixtures",
        "hostile",
    ] {
        println!("cargo:rerun-if-changed=../guest-examples/{path}");
    }
    println!("cargo:rerun-if-changed=../wit");

    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out; the guests get <target>/guests.
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let target_root = out_dir.ancestors().nth(4).expect("OUT_DIR inside a target directory");
    let guest_target = target_root.join("guests");

    check_target_installed();
    // The guests in the release profile; the kernels in their own, built for speed.
    cargo_build(&guests, &guest_target, &["--release", "--workspace", "--exclude", "kernels"]);
    cargo_build(&guests, &guest_target, &["--profile", "kernels", "--package", "kernels"]);
    let wasm_dir = guest_target.join("wasm32-wasip2");
    println!("cargo:rustc-env=WEIR_GUESTS_DIR={}", wasm_dir.join("release").display());
    println!("cargo:rustc-env=WEIR_KERNELS_WASM={}", wasm_dir.join("kernels").join("kernels.wasm").display());
}

fn cargo_build(guests: &Path, target_dir: &Path, args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--target", "wasm32-wasip2"])
        .args(args)
        .arg("--manifest-path")
        .arg(guests.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target_dir);
    // The outer build's flags are for the host, not for wasm.
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_TARGET", "RUSTC_WORKSPACE_WRAPPER"] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("running cargo for the guest examples");
    if !status.success() {
        panic!("building guest-examples for wasm32-wasip2 ({}) failed (see the output above)", args.join(" "));
    }
}

fn check_target_installed() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).args(["--print", "target-libdir", "--target", "wasm32-wasip2"]).output();
    let installed = out
        .ok()
        .filter(|o| o.status.success())
        .map(|o| Path::new(String::from_utf8_lossy(&o.stdout).trim()).exists())
        .unwrap_or(false);
    if !installed {
        panic!(
            "the wasm32-wasip2 target is not installed, so the test plugins cannot be built.\n\
             Run `rustup target add wasm32-wasip2` (scripts/setup.sh does it for you)."
        );
    }
}
