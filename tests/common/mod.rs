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
