//! stdin and stdout as Unix filters use them: a reader that stops reading, a full disk, a
//! line typed at a terminal, bad bytes in the middle of good lines, a byte-order mark, and
//! the two ways of writing an umlaut.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{succeeded, train_tiny, transformer};

/// `transformer` with `args`, its stdout a pipe whose reading end is closed before the
/// command writes: the command must end quietly with status 0.
fn ends_quietly_when_stdout_is_closed(args: &[&str], stdin: &[u8]) {
    let mut child = StdCommand::new(env!("CARGO_BIN_EXE_transformer"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut input = child.stdin.take().unwrap();
    // The command may already have ended (or not read stdin at all).
    let _ = input.write_all(stdin);
    drop(input);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{args:?}: {stderr}");
    assert!(
        !stderr.contains("error") && !stderr.contains("panicked"),
        "{args:?}: {stderr}"
    );
}

/// `transformer` with `args` writing stdout to /dev/full: one error line, status 1.
fn fails_with_one_line_on_a_full_disk(args: &[&str], stdin: &[u8]) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut child = StdCommand::new(env!("CARGO_BIN_EXE_transformer"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(full)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command may already have ended (or not read stdin at all).
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(
        stderr.lines().last(),
        Some(
            "error: cannot write to stdout: No space left on device (os error 28); check the \
              disk or the pipe it goes to"
        ),
        "{args:?}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

/// A hypothesis and a reference file in `dir`.
fn eval_files(dir: &Path) -> (String, String) {
    let (hyp, reference) = (dir.join("hyp.en"), dir.join("ref.en"));
    std::fs::write(&hyp, "i want a beer .\n").unwrap();
    std::fs::write(&reference, "i want a beer .\n").unwrap();
    (hyp.display().to_string(), reference.display().to_string())
}

/// Every command that prints results on stdout, with arguments that make it print, over a
/// tiny run and eval files in `dir`.
fn result_printing_commands(dir: &Path) -> Vec<Vec<String>> {
    let run = dir.join("run").display().to_string();
    let (hyp, reference) = eval_files(dir);
    let out = dir.join("again").display().to_string();
    let picture = dir.join("attention.png").display().to_string();
    let translate = ["translate", "--device", "cpu", "--checkpoint", &run];
    let train = [
        "train",
        "--device",
        "cpu",
        "-q",
        "--config",
        "configs/tiny.toml",
    ];
    [
        translate.to_vec(),
        [&translate[..], &["ich mochte ein bier"]].concat(),
        vec!["eval", "--hyp", &hyp, "--ref", &reference, "--json"],
        vec!["infer-test", "--runs", "3", "--seed", "1"],
        [&train[..], &["--out", &out]].concat(),
        vec![
            "attention",
            "ich",
            "--device",
            "cpu",
            "--checkpoint",
            &run,
            "--out",
            &picture,
        ],
        // The PyTorch language-model fixture, w4 ... w12 its words.
        vec![
            "generate",
            "w4",
            "--device",
            "cpu",
            "--checkpoint",
            "tests/fixtures/parity-lm",
        ],
        vec!["bench", "matmul", "--steps", "1", "--device", "cpu"],
    ]
    .iter()
    .map(|args| args.iter().map(|a| a.to_string()).collect())
    .collect()
}

#[test]
fn every_command_that_prints_results_ends_quietly_when_its_reader_stops_reading() {
    let dir = train_tiny(&[]);
    let stdin = b"ich mochte ein bier\n".repeat(50);
    for args in result_printing_commands(dir.path()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ends_quietly_when_stdout_is_closed(&args, &stdin);
        // train refuses to write into the run it wrote the first time.
        let _ = std::fs::remove_dir_all(dir.path().join("again"));
    }
}

#[test]
fn every_command_that_prints_results_names_stdout_when_the_disk_is_full() {
    let dir = train_tiny(&[]);
    for args in result_printing_commands(dir.path()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fails_with_one_line_on_a_full_disk(&args, b"ich mochte ein bier\n");
        let _ = std::fs::remove_dir_all(dir.path().join("again"));
    }
}

#[test]
fn a_line_typed_at_a_terminal_is_translated_before_the_next_one_is_typed() {
    let dir = train_tiny(&[]);
    let mut child = StdCommand::new(env!("CARGO_BIN_EXE_transformer"))
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path().join("run"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let (lines, answers) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for _ in 0..2 {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            lines.send(line).unwrap();
        }
    });
    // stdin stays open: the translation must come without more input or the end of it.
    for (sentence, expected) in [
        ("ich mochte ein bier\n", "i want a beer .\n"),
        ("ich mochte ein cola\n", "i want a coke .\n"),
    ] {
        stdin.write_all(sentence.as_bytes()).unwrap();
        stdin.flush().unwrap();
        let answer = answers.recv_timeout(Duration::from_secs(60));
        assert_eq!(
            answer.as_deref(),
            Ok(expected),
            "no answer while stdin is open"
        );
    }
    drop(stdin);
    reader.join().unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn invalid_utf8_on_stdin_stops_after_translating_the_good_lines_before_it() {
    let dir = train_tiny(&[]);
    let output = transformer()
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(dir.path().join("run"))
        .write_stdin(b"ich mochte ein bier\nich mochte ein cola\n\xff\xfe\nich\n".to_vec())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "i want a beer .\ni want a coke .\n"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(
            "error: stdin line 3 is not valid UTF-8; the lines before it were \
                            translated"
        ),
        "{stderr}"
    );
}

#[test]
fn a_byte_order_mark_on_stdin_is_not_part_of_the_first_word() {
    let dir = train_tiny(&[]);
    let output = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(dir.path().join("run"))
            .write_stdin("\u{feff}ich mochte ein bier\n"),
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "i want a beer .\n");
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("unknown"),
        "the first word was read as a known word"
    );
}

#[test]
fn a_decomposed_umlaut_in_training_and_a_composed_one_in_translation_are_the_same_word() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("umlaut.tsv");
    // Trained on "u" + combining diaeresis, asked with the precomposed "ü".
    std::fs::write(
        &data,
        "ich mochte ein mu\u{308}sli\ti want a muesli .\nich mochte ein bier\ti want a beer .\n",
    )
    .unwrap();
    let tiny = std::fs::read_to_string("configs/tiny.toml").unwrap();
    let config = dir.path().join("umlaut.toml");
    std::fs::write(
        &config,
        tiny.replace("data/toy.tsv", &data.display().to_string()),
    )
    .unwrap();
    let run = dir.path().join("run");
    succeeded(
        transformer()
            .args(["train", "--device", "cpu", "-q", "--config"])
            .arg(&config)
            .arg("--out")
            .arg(&run),
    );
    let output = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(&run)
            .arg("ich mochte ein m\u{fc}sli"),
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "i want a muesli .\n"
    );
    assert!(!String::from_utf8_lossy(&output.stderr).contains("unknown"));
}

#[test]
fn a_dash_as_the_sentence_reads_stdin() {
    let dir = train_tiny(&[]);
    let output = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(dir.path().join("run"))
            .arg("-")
            .write_stdin("ich mochte ein cola\n"),
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout), "i want a coke .\n");
}
