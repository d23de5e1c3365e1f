//! One rule for decoding settings at every door: a value out of bounds is refused with an
//! error that names it as that door calls it, and the bound; nothing is narrowed silently.
//! The tiny model chooses from 10 target tokens and has a position table of 5000 rows.

mod common;

use std::path::Path;

use common::server::{assert_error, post_json, tiny_checkpoint, Server};
use common::{small_checkpoint, train_command, transformer, with_config};
use serde_json::json;

/// Runs `transformer args` and checks it failed with `status`, one `error:` line holding
/// every one of `needles`, and nothing on stdout.
fn refused(args: &[&str], checkpoint: &Path, status: i32, needles: &[&str]) {
    let output = transformer()
        .args(args)
        .arg("--checkpoint")
        .arg(checkpoint)
        .args(["--device", "cpu"])
        .write_stdin("ich mochte ein bier\n")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(status), "{args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    for needle in needles {
        assert!(
            errors[0].contains(needle),
            "{needle:?} not in {:?}",
            errors[0]
        );
    }
}

#[test]
fn the_command_line_doors_refuse_a_setting_out_of_bounds_by_its_flag() {
    let run = tiny_checkpoint();
    let too_wide = [
        "--beam 13 is more than the 10 target tokens",
        "use at most 10",
    ];
    refused(&["translate", "ich", "--beam", "13"], run, 2, &too_wide);
    refused(&["translate", "--beam", "13"], run, 2, &too_wide);
    let reference = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(reference.path(), "i want a beer .\n").unwrap();
    let reference = reference.path().to_str().unwrap();
    refused(
        &["eval", "--src", "-", "--ref", reference, "--beam", "13"],
        run,
        2,
        &too_wide,
    );
    refused(
        &["translate", "ich", "--length-penalty", "1e39"],
        run,
        2,
        &[
            "--length-penalty 1e39 would take the length penalty ((5 + len) / 6)^alpha out of \
             f32's range at the model's 5000 positions",
            "use a value between -11.89 and 11.89",
        ],
    );
    refused(
        &["translate", "ich", "--max-len", "5001"],
        run,
        2,
        &["--max-len 5001 is more than the model's 5000 positions (model.max_len)"],
    );
    refused(&["serve", "--beam", "13", "--port", "0"], run, 2, &too_wide);
    // The bound itself is allowed, and gives what the widest search gives.
    let at_the_bound = transformer()
        .args([
            "translate",
            "ich mochte ein bier",
            "--beam",
            "10",
            "--device",
            "cpu",
        ])
        .arg("--checkpoint")
        .arg(run)
        .output()
        .unwrap();
    assert!(at_the_bound.status.success());
    assert_eq!(
        String::from_utf8_lossy(&at_the_bound.stdout),
        "i want a beer .\n"
    );
}

#[test]
fn a_checkpoints_own_setting_out_of_bounds_is_named_with_its_file() {
    let dir = small_checkpoint();
    let run = dir.path().join("run");
    let best = ["best", "last"]
        .iter()
        .map(|name| run.join(name))
        .find(|p| p.join("config.toml").is_file())
        .unwrap();
    let config = best.join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let edited = text
        .replace("beam = 1", "beam = 99")
        .replace("length_penalty = 1.0", "length_penalty = 1e39");
    assert_ne!(edited, text);
    std::fs::write(&config, edited).unwrap();
    // The file is at fault, not the command line: status 1, the file named.
    let named = format!("decode.length_penalty = 1e39 in {}", config.display());
    refused(
        &["translate", "ich"],
        &best,
        1,
        &[&named, "out of f32's range"],
    );
    refused(
        &["translate", "ich", "--length-penalty", "1"],
        &best,
        1,
        &["decode.beam = 99 in"],
    );
    // Flags over both answer: a value a flag replaces is never checked.
    let output = transformer()
        .args(["translate", "ich", "--beam", "2", "--length-penalty", "1"])
        .args(["--device", "cpu", "--checkpoint"])
        .arg(&best)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn training_refuses_a_decode_section_the_model_cannot_search_before_any_step() {
    let dir = with_config(
        "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\nmax_len = 8\n\
         [data]\ntrain = \"toy.tsv\"\n[training]\nepochs = 1\nmax_tokens = 64\n\
         [decode]\nbeam = 50\n",
    );
    let output = train_command(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("decode.beam = 50 in config.toml is more than the 10 target tokens"),
        "{stderr}"
    );
    assert!(!dir.path().join("run/last").exists());
}

#[test]
fn the_http_doors_refuse_a_setting_out_of_bounds_by_its_field() {
    let server = Server::start(&[]);
    let v1 = server.url("/v1/translate");
    for (body, message) in [
        (
            json!({ "q": "ich", "beam": 13 }),
            "beam 13 is more than the 10 target tokens the model chooses from",
        ),
        (
            json!({ "q": "ich", "beam": 0 }),
            "beam 0 must be at least 1",
        ),
        (
            json!({ "q": "ich", "beam": 2, "n_best": 3 }),
            "n_best 3 is more than beam 2",
        ),
        (
            json!({ "q": "ich", "n_best": 11 }),
            "n_best needs a beam of 11 (one hypothesis per beam), and that is more than the 10",
        ),
        (
            json!({ "q": "ich", "length_penalty": 1e39 }),
            "length_penalty 1e39 would take the length penalty ((5 + len) / 6)^alpha out of f32's",
        ),
        (
            json!({ "q": "ich", "max_len": 5001 }),
            "max_len 5001 is more than the model's 5000 positions",
        ),
    ] {
        let (status, answer) = post_json(&v1, &body);
        assert_error(status, &answer.to_string(), 400, message);
    }
    // n_best alone widens the server's beam to find its hypotheses.
    let (status, answer) = post_json(&v1, &json!({ "q": "ich mochte ein bier", "n_best": 3 }));
    assert_eq!(status, 200, "{answer}");
    let alternatives = answer["translations"][0]["alternatives"]
        .as_array()
        .unwrap();
    assert_eq!(alternatives.len(), 2, "{answer}");
    // LibreTranslate's alternatives under the same rule, by its own field.
    let (status, answer) = post_json(
        &server.url("/translate"),
        &json!({ "q": "ich mochte ein bier", "source": "de", "target": "en", "alternatives": 10 }),
    );
    assert_error(
        status,
        &answer.to_string(),
        400,
        "alternatives needs a beam of 11 (one hypothesis per beam), and that is more than the \
         10 target tokens",
    );
    let (status, answer) = post_json(
        &server.url("/translate"),
        &json!({ "q": "ich mochte ein bier", "source": "de", "target": "en", "alternatives": 2 }),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["alternatives"].as_array().unwrap().len(),
        2,
        "{answer}"
    );
}
