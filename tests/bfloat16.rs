//! bfloat16 decoding (`--compute-type bfloat16`) against float32 through the binary: the same
//! translations on a trained MarianMT directory (greedy and beam), log-probabilities within
//! a stated tolerance, serve and eval taking it too, the checkpoint left untouched, and on a
//! CPU without bf16 products a refusal that says why (unless emulation is asked for). The
//! packed product itself is checked against the rounded f64 product in
//! src/kernels/bf16/tests.rs.

mod common;

use std::path::Path;

use common::{
    multi30k_lines, serve_and_eval_say_the_toy_pair, succeeded, train_tiny, transformer,
    translated_with_log_probs,
};

/// Whether this CPU multiplies bf16 (what `--compute-type bfloat16` needs without emulation).
fn cpu_has_bf16() -> bool {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.split_whitespace()
        .any(|flag| flag == "avx512_bf16" || flag == "amx_bf16")
}

/// Has every binary this test process starts emulate bf16 (on a CPU without bf16 products,
/// where bfloat16 is refused unless asked for so).
fn emulate_bf16() {
    std::env::set_var("TRANSFORMER_BF16_ENGINE", "emulated");
}

/// The tolerance bfloat16 keeps to float32's log-probabilities of the same tokens (bf16 keeps
/// 8 bits of each weight and input; measured 0.014 at worst on the fixture below, with 36 and
/// 37 of its 40 translations alike at beam 1 and 4 on AVX512-BF16).
const LOG_PROB_TOLERANCE: f64 = 0.1;

#[test]
fn bfloat16_translates_as_float32_does_within_the_log_prob_tolerance_greedy_and_beam() {
    if !cpu_has_bf16() {
        // Refused with the reason and the way out; emulated when asked.
        let out = transformer()
            .args(["translate", "--checkpoint", "tests/fixtures/marian-gelu"])
            .args(["--compute-type", "bfloat16", "Ein Hund läuft."])
            .env_remove("TRANSFORMER_BF16_ENGINE")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("neither AMX-BF16 nor AVX512-BF16")
                && stderr.contains("TRANSFORMER_BF16_ENGINE=emulated"),
            "{stderr}"
        );
        emulate_bf16();
    }
    // A MarianMT directory trained 800 steps in PyTorch: weak enough that its long tails are
    // fragile, which makes it a hard case.
    let checkpoint = Path::new("tests/fixtures/marian-gelu");
    let sources = multi30k_lines("val.de.gz", 40);
    for beam in ["1", "4"] {
        let float = translated_with_log_probs(checkpoint, &sources, &["--beam", beam]);
        let bf16 = translated_with_log_probs(
            checkpoint,
            &sources,
            &["--beam", beam, "--compute-type", "bfloat16"],
        );
        let mut same = 0;
        for ((float_ids, float_lp), (bf16_ids, bf16_lp)) in float.iter().zip(&bf16) {
            if float_ids != bf16_ids {
                continue;
            }
            same += 1;
            for (a, b) in float_lp.iter().zip(bf16_lp) {
                assert!(
                    (a - b).abs() < LOG_PROB_TOLERANCE,
                    "beam {beam}: {a} vs {b}"
                );
            }
        }
        assert!(
            same * 10 >= sources.len() * 8,
            "beam {beam}: {same} of {} alike",
            sources.len()
        );
    }
}

#[test]
fn serve_and_eval_take_bfloat16_and_the_checkpoint_is_left_as_it_was() {
    if !cpu_has_bf16() {
        emulate_bf16();
    }
    let tiny = train_tiny(&[]);
    let run = tiny.path().join("run");
    let listing = |dir: &Path| {
        let mut files: Vec<(String, u64, std::time::SystemTime)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                let meta = e.metadata().unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                (name, meta.len(), meta.modified().unwrap())
            })
            .collect();
        files.sort();
        files
    };
    let before = listing(&run.join("last"));
    let out = succeeded(
        transformer()
            .args(["translate", "--checkpoint"])
            .arg(&run)
            .args(["--compute-type", "bfloat16", "ich mochte ein bier"]),
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "i want a beer .\n");

    serve_and_eval_say_the_toy_pair(tiny.path(), &["--compute-type", "bfloat16"], "bfloat16");
    assert_eq!(listing(&run.join("last")), before);
}
