//! Helpers shared by the tests that run the binary.

use std::process::Output;

use assert_cmd::Command;

/// The `transformer` binary of this build.
pub fn transformer() -> Command {
    Command::cargo_bin("transformer").unwrap()
}

/// Runs `command` and fails the test with its stderr unless it succeeded.
pub fn succeeded(command: &mut Command) -> Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Trains configs/tiny.toml (2 layers, 4 heads) into `DIR/run` of a fresh directory, with
/// `extra` arguments, and returns the directory.
#[allow(dead_code)] // not every test crate trains
pub fn train_tiny(extra: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "--quiet", "--config"])
            .arg("configs/tiny.toml")
            .arg("--out")
            .arg(dir.path().join("run"))
            .args(extra),
    );
    dir
}
