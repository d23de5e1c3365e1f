//! Every bad input a user can give gets one `error:` line naming the file, key or value and
//! the fix, and a non-zero exit; never a panic. Inputs the tool can go on with get a warning.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;

use common::{
    fails_naming, replaced_by_fifo, replaced_by_link_to_dev_zero, small_checkpoint, succeeded,
    transformer, with_config,
};
use tempfile::TempDir;

fn config_fails_naming(text: &str, needles: &[&str]) {
    let dir = with_config(text);
    let args = ["train", "--device", "cpu", "--config", "config.toml"];
    fails_naming(dir.path(), &args, needles);
    assert!(!dir.path().join("runs").exists(), "nothing was written");
}

#[test]
fn a_toml_syntax_error_is_named_with_its_line() {
    config_fails_naming(
        "[model]\nlayers = 2\nd_model = = 32\n",
        &["config.toml line 3", "model.d_model"],
    );
}

#[test]
fn a_value_of_the_wrong_type_is_named_with_what_was_expected() {
    config_fails_naming(
        "[model]\nlayers = \"six\"\n",
        &["line 2", "model.layers", "expected a whole number"],
    );
    config_fails_naming(
        "[training]\nlr_factor = \"fast\"\n",
        &["training.lr_factor", "expected a number"],
    );
}

#[test]
fn zero_and_negative_sizes_are_refused_by_key() {
    config_fails_naming("[model]\nd_ff = 0\n", &["model.d_ff", "at least 1, got 0"]);
    config_fails_naming("[model]\nlayers = -2\n", &["model.layers", "-2"]);
    config_fails_naming(
        "[training]\nmax_tokens = 0\n",
        &["training.max_tokens", "at least 1"],
    );
}

#[test]
fn sizes_no_machine_could_hold_are_refused_naming_the_key_and_the_memory() {
    // Each was an allocation that aborted the process (exit 134), or memory growing until
    // the kernel killed it.
    config_fails_naming(
        "[model]\nd_model = 1000000000\nheads = 8\n[data]\ntrain = \"toy.tsv\"\n",
        &["model.d_model = 1000000000", "to train", "this machine has"],
    );
    config_fails_naming(
        "[model]\nd_model = 65536\nd_ff = 65536\n[data]\ntrain = \"toy.tsv\"\n",
        &[
            "model.d_model = 65536, model.d_ff = 65536",
            "this machine has",
        ],
    );
    // Training counts 16 bytes a weight (weights, gradients, Adam): 720 GB here, where the
    // int8 weights alone would be 45 GB.
    config_fails_naming(
        "[model]\nd_model = 16384\nd_ff = 65536\n[data]\ntrain = \"toy.tsv\"\n",
        &["model.d_model = 16384", "to train"],
    );
    config_fails_naming(
        "[model]\nmax_len = 100000000000\n[data]\ntrain = \"toy.tsv\"\n",
        &["model.max_len = 100000000000", "position table"],
    );
    config_fails_naming(
        "[data]\ntokenizer = \"bpe\"\nvocab_size = 4000000000\n",
        &["data.vocab_size", "at most 4194304"],
    );
}

#[test]
fn dropout_outside_zero_to_one_is_refused_by_key() {
    config_fails_naming(
        "[model]\ndropout = 1.0\n",
        &["model.dropout", "[0, 1)", "got 1"],
    );
    config_fails_naming("[model]\ndropout = -0.1\n", &["model.dropout", "got -0.1"]);
}

#[test]
fn an_unknown_key_in_any_section_is_named() {
    config_fails_naming(
        "[training]\nlearning_rate = 1\n",
        &["line 2", "learning_rate"],
    );
}

#[test]
fn an_empty_corpus_is_named_with_how_to_fix_it() {
    let dir = with_config("[data]\ntrain = \"empty.tsv\"\n");
    std::fs::write(dir.path().join("empty.tsv"), "\n\n").unwrap();
    let args = ["train", "--device", "cpu", "--config", "config.toml"];
    fails_naming(
        dir.path(),
        &args,
        &["empty.tsv", "no usable sentence pairs"],
    );
}

#[test]
fn parallel_files_of_different_lengths_are_named_with_both_counts() {
    let dir = with_config("[data]\ntrain = { src = \"train.de\", tgt = \"train.en\" }\n");
    std::fs::write(dir.path().join("train.de"), "ein\nzwei\ndrei\n").unwrap();
    std::fs::write(dir.path().join("train.en"), "one\ntwo\n").unwrap();
    let args = ["train", "--device", "cpu", "--config", "config.toml"];
    fails_naming(
        dir.path(),
        &args,
        &["train.de has 3 lines", "train.en has 2", "aligned"],
    );
}

#[test]
fn a_missing_validation_file_is_named() {
    let dir = with_config("[data]\ntrain = \"toy.tsv\"\nvalid = \"valid.tsv\"\n");
    let args = ["train", "--device", "cpu", "--config", "config.toml"];
    fails_naming(dir.path(), &args, &["valid.tsv", "check the path"]);
}

const TRANSLATE: [&str; 6] = ["translate", "--device", "cpu", "--checkpoint", "run", "ich"];

#[test]
fn weights_that_are_not_safetensors_are_called_damaged() {
    let dir = small_checkpoint();
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    std::fs::write(dir.path().join("run/last/model.safetensors"), garbage).unwrap();
    fails_naming(dir.path(), &TRANSLATE, &["model.safetensors", "damaged"]);
    std::fs::write(dir.path().join("run/last/model.safetensors"), b"").unwrap();
    fails_naming(dir.path(), &TRANSLATE, &["model.safetensors", "damaged"]);
}

#[test]
fn weights_that_are_not_a_file_are_named_not_taken_for_missing() {
    let dir = small_checkpoint();
    let weights = dir.path().join("run/last/model.safetensors");
    replaced_by_link_to_dev_zero(&weights);
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &["run/last/model.safetensors is a pipe or device, not a regular file"],
    );
    replaced_by_fifo(&weights);
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &["run/last/model.safetensors is a pipe or device, not a regular file"],
    );
}

#[test]
fn a_damaged_checkpoint_config_is_named_with_its_line() {
    let dir = small_checkpoint();
    std::fs::write(dir.path().join("run/last/config.toml"), "[model\n").unwrap();
    fails_naming(dir.path(), &TRANSLATE, &["run/last", "config.toml line 1"]);
}

#[test]
fn a_missing_vocabulary_file_says_the_checkpoint_is_incomplete() {
    let dir = small_checkpoint();
    std::fs::remove_file(dir.path().join("run/last/vocab.tgt.txt")).unwrap();
    fails_naming(
        dir.path(),
        &TRANSLATE,
        &["run/last is incomplete", "vocab.tgt.txt"],
    );
}

#[test]
fn input_longer_than_the_position_table_is_cut_with_a_warning_and_the_stream_goes_on() {
    let dir = small_checkpoint();
    let long = "ich mochte ein bier ich mochte ein bier ich mochte";
    let output = succeeded(
        transformer()
            .current_dir(dir.path())
            .args(["translate", "--device", "cpu", "--checkpoint", "run"])
            .write_stdin(format!("{long}\nich\n")),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stdout.lines().count(),
        2,
        "one output line per input line: {stdout}"
    );
    assert!(
        stderr.contains("has 10 tokens") && stderr.contains("only the first 6"),
        "{stderr}"
    );
    let single = succeeded(transformer().current_dir(dir.path()).args([
        "translate",
        "--device",
        "cpu",
        "--checkpoint",
        "run",
        long,
    ]));
    assert!(String::from_utf8_lossy(&single.stderr).contains("model.max_len 8"));
}

#[test]
fn eval_names_a_missing_hypothesis_file_and_the_flag_to_fix() {
    let dir = TempDir::new().unwrap();
    std::fs::write(dir.path().join("ref.txt"), "a b c\n").unwrap();
    fails_naming(
        dir.path(),
        &["eval", "--hyp", "hyp.txt", "--ref", "ref.txt"],
        &["cannot read hyp.txt", "check the path given to --hyp"],
    );
    let output = transformer()
        .current_dir(dir.path())
        .args(["eval", "--hyp", "hyp.txt", "--ref", "ref.txt"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&output.stderr).contains("config"));
}

#[test]
fn eval_out_in_a_missing_directory_names_that_file_not_a_temporary_one() {
    let dir = TempDir::new().unwrap();
    std::fs::write(dir.path().join("ref.txt"), "a b c\n").unwrap();
    std::fs::write(dir.path().join("hyp.txt"), "a b c\n").unwrap();
    let args = [
        "eval",
        "--hyp",
        "hyp.txt",
        "--ref",
        "ref.txt",
        "--out",
        "gone/out.txt",
    ];
    fails_naming(
        dir.path(),
        &args,
        &["cannot write gone/out.txt: No such file"],
    );
    let output = transformer()
        .current_dir(dir.path())
        .args(args)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&output.stderr).contains(".tmp"));
}

#[test]
fn a_tsv_line_with_a_third_column_is_named_not_glued_into_the_target() {
    let dir = with_config("[data]\ntrain = \"three.tsv\"\n");
    std::fs::write(
        dir.path().join("three.tsv"),
        "ich mochte ein bier\ti want a beer .\nein cola\ta coke\t#1234 CC-BY\n",
    )
    .unwrap();
    let args = ["train", "--device", "cpu", "--config", "config.toml"];
    fails_naming(
        dir.path(),
        &args,
        &["three.tsv line 2", "found 3 columns", "cut -f1,2"],
    );
}

#[test]
fn a_corpus_that_is_not_utf8_is_named_with_its_line() {
    let dir = with_config("[data]\ntrain = \"latin1.tsv\"\n");
    std::fs::write(
        dir.path().join("latin1.tsv"),
        b"ich mochte ein bier\ti want a beer .\nM\xe4nner\tmen\n",
    )
    .unwrap();
    let args = ["train", "--device", "cpu", "--config", "config.toml"];
    fails_naming(
        dir.path(),
        &args,
        &[
            "latin1.tsv line 2 is not valid UTF-8",
            "convert the file to UTF-8",
        ],
    );
}

#[test]
fn pictures_that_cannot_be_written_are_named_with_the_reason() {
    let dir = small_checkpoint();
    // A directory where the picture should go: the write fails even for root.
    std::fs::create_dir(dir.path().join("taken.png")).unwrap();
    fails_naming(
        dir.path(),
        &[
            "attention",
            "ich",
            "--device",
            "cpu",
            "--checkpoint",
            "run",
            "--out",
            "taken.png",
        ],
        &[
            "cannot write taken.png",
            "a directory has that name: pick another path",
        ],
    );
    fails_naming(
        dir.path(),
        &["plot", "run", "--out", "taken.png"],
        &[
            "cannot write taken.png",
            "a directory has that name: pick another path",
        ],
    );
}

#[test]
fn plot_of_a_run_without_loss_records_says_so_and_writes_nothing() {
    let dir = TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("run")).unwrap();
    std::fs::write(dir.path().join("run/metrics.jsonl"), "").unwrap();
    fails_naming(
        dir.path(),
        &["plot", "run"],
        &["run/metrics.jsonl holds no loss records yet"],
    );
    assert!(!dir.path().join("run/loss.png").exists());
}

#[test]
fn eval_names_hypotheses_and_references_of_different_lengths() {
    let dir = TempDir::new().unwrap();
    std::fs::write(dir.path().join("hyp.txt"), "a b c\n").unwrap();
    std::fs::write(dir.path().join("ref.txt"), "a b c\nd e\n").unwrap();
    fails_naming(
        dir.path(),
        &["eval", "--hyp", "hyp.txt", "--ref", "ref.txt"],
        &["hyp.txt", "ref.txt"],
    );
}

#[test]
fn eval_names_a_missing_or_damaged_checkpoint() {
    let dir = small_checkpoint();
    std::fs::write(dir.path().join("src.txt"), "ich\n").unwrap();
    std::fs::write(dir.path().join("ref.txt"), "i\n").unwrap();
    let eval = |checkpoint| {
        [
            "eval",
            "--device",
            "cpu",
            "--ref",
            "ref.txt",
            "--src",
            "src.txt",
            "--checkpoint",
            checkpoint,
        ]
    };
    fails_naming(dir.path(), &eval("gone"), &["gone", "does not exist"]);
    std::fs::write(
        dir.path().join("run/last/model.safetensors"),
        b"not weights",
    )
    .unwrap();
    fails_naming(dir.path(), &eval("run"), &["model.safetensors", "damaged"]);
}

#[test]
fn an_unknown_kernel_choice_is_a_usage_error_that_names_the_variable() {
    let output = transformer()
        .env("TRANSFORMER_KERNELS", "fast")
        .args(["infer-test", "--runs", "1", "--device", "cpu"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "error: TRANSFORMER_KERNELS=\"fast\" is not a kernel choice; use fused, composed or \
         cuda-fused, or unset it"
    );
}

/// The fused CUDA kernels are asked for by name; a build without CUDA says it has none, and
/// TF32 takes on or off.
#[test]
fn the_gpu_switches_are_usage_errors_where_they_cannot_apply() {
    let run = |variable: &str, value: &str| {
        let output = transformer()
            .env(variable, value)
            .args(["infer-test", "--runs", "1", "--device", "cpu"])
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        )
    };
    if !cfg!(feature = "cuda") {
        let (code, stderr) = run("TRANSFORMER_KERNELS", "cuda-fused");
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.starts_with("error: TRANSFORMER_KERNELS=cuda-fused needs a CUDA build"),
            "{stderr}"
        );
    }
    let (code, stderr) = run("TRANSFORMER_TF32", "yes");
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "error: TRANSFORMER_TF32=\"yes\" is not a choice; use on or off, or unset it"
    );
    // On the CPU, TF32 changes nothing: the demo runs.
    let (code, stderr) = run("TRANSFORMER_TF32", "on");
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn an_unknown_isa_cap_is_a_usage_error_that_names_the_variable() {
    let output = transformer()
        .env("TRANSFORMER_MAX_ISA", "avx3")
        .args(["infer-test", "--runs", "1", "--device", "cpu"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "error: TRANSFORMER_MAX_ISA=\"avx3\" is not an instruction set; use one of baseline, \
         avx2, avx2-vnni, avx512, avx512-vnni, avx512-bf16, amx"
    );
    // A known level in any spelling runs, and says where gemm is not capped by it.
    let output = transformer()
        .env("TRANSFORMER_MAX_ISA", "AVX2")
        .args(["infer-test", "--runs", "1", "--device", "cpu"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let gemm_capped = transformer::kernels::isa::gemm_isa() <= transformer::kernels::isa::Isa::Avx2;
    assert_eq!(
        !gemm_capped,
        stderr.contains("candle's matrix products still use"),
        "{stderr}"
    );
}

/// Runs `args` in `dir` with `/dev/zero` as stdin: it must end in one error line naming
/// `needles`, exit 1, with its memory bounded (an address-space limit of 3 GiB, which an
/// unbounded read passes within a second).
fn endless_input_fails_naming(dir: &Path, args: &[&str], needles: &[&str]) {
    let zero = std::fs::File::open("/dev/zero").unwrap();
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("transformer"));
    command.current_dir(dir).args(args).stdin(zero);
    // SAFETY: setrlimit in the child before exec, with nothing else to race with.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 3 << 30,
                rlim_max: 3 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &limit);
            Ok(())
        });
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("error: "), "{args:?}: {stderr}");
    for needle in needles {
        assert!(last.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn endless_input_ends_in_an_error_naming_it_with_memory_bounded() {
    let dir = small_checkpoint();
    let run = ["--checkpoint", "run", "--device", "cpu"];
    let line_too_long = ["stdin line 1 is longer than 16777216 bytes"];
    let translate: Vec<&str> = ["translate"].iter().chain(&run).copied().collect();
    endless_input_fails_naming(dir.path(), &translate, &line_too_long);
    endless_input_fails_naming(
        dir.path(),
        &["tokenize", "--checkpoint", "run"],
        &line_too_long,
    );
    endless_input_fails_naming(dir.path(), &["sentences", "--lang", "de"], &line_too_long);
    let whole = "more than 536870912 bytes, the most read whole";
    let html: Vec<&str> = ["translate", "--format", "html"]
        .iter()
        .chain(&run)
        .copied()
        .collect();
    endless_input_fails_naming(dir.path(), &html, &["cannot read stdin", whole]);
    let file: Vec<&str> = [
        "translate",
        "--file",
        "/dev/zero",
        "--format",
        "text",
        "--out",
        "o.txt",
    ]
    .iter()
    .chain(&run)
    .copied()
    .collect();
    endless_input_fails_naming(dir.path(), &file, &["--file /dev/zero", whole]);
    endless_input_fails_naming(
        dir.path(),
        &["eval", "--hyp", "/dev/zero", "--ref", "-"],
        &["cannot read stdin", whole],
    );
}

/// A subword model with the paper's 5000-row position table, trained on the toy pairs.
fn subword_checkpoint() -> TempDir {
    common::trained_in(
        "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\n\
         [data]\ntrain = \"toy.tsv\"\ntokenizer = \"bpe\"\nvocab_size = 40\n\
         [training]\nepochs = 1\nmax_tokens = 64\n",
        &[],
    )
}

/// `translate` of stdin under a 2 GiB address-space limit: its output and stderr.
fn translate_bounded(dir: &Path, input: &[u8], extra: &[&str]) -> (String, String) {
    let args = [
        "translate",
        "--checkpoint",
        "run",
        "--device",
        "cpu",
        "--json",
    ];
    run_bounded(dir, input, &[&args[..], extra].concat())
}

/// The binary with `args` on `input`, under a 2 GiB address-space limit: its output and
/// stderr, having succeeded.
fn run_bounded(dir: &Path, input: &[u8], args: &[&str]) -> (String, String) {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("transformer"));
    command
        .current_dir(dir)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // SAFETY: setrlimit in the child before exec, with nothing else to race with.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &limit);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &input));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    (String::from_utf8_lossy(&output.stdout).into_owned(), stderr)
}

/// One 2 MB word is one sentence, read as far as a source is read (1024 tokens, as
/// CTranslate2's max_input_length, though the position table has 5000 rows; only a beginning
/// that surely holds them is tokenized) and said so once: not 500 windows of 4096 tokens, each
/// decoded for thousands of steps (a 20 KB word took 52 s and 4 GB of a 2-layer model before,
/// and a 16 MB word took 2.7 GB to tokenize whole).
#[test]
fn one_endless_word_is_one_sentence_cut_where_sources_are_cut() {
    let dir = subword_checkpoint();
    let mut word = "e".repeat(2_000_000).into_bytes();
    word.push(b'\n');
    let (stdout, stderr) = translate_bounded(dir.path(), &word, &["--beam", "4"]);
    assert_eq!(stdout.lines().count(), 1);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("tokens or more, more than"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("only the first 1024 were translated")
            && warnings[0].contains("max_input_length"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(json["truncated_from"].as_u64().unwrap() > 1024, "{json}");
    assert!(json["ids"].as_array().unwrap().len() <= 1024 + 50);
    // A word as long as a stdin line may be (16 MB) is read the same way, within the limit.
    let mut longest = "e".repeat(16_000_000).into_bytes();
    longest.push(b'\n');
    let (stdout, _) = translate_bounded(dir.path(), &longest, &[]);
    assert_eq!(stdout.lines().count(), 1);
    // `tokenize` shows the tokens a model could read of it, with a warning.
    let (stdout, stderr) = run_bounded(dir.path(), &longest, &["tokenize", "--checkpoint", "run"]);
    assert!(
        stderr.contains("only the tokens of its first 4194304 bytes"),
        "{stderr}"
    );
    assert!(stdout.split_whitespace().count() > 1024);
    // A run-on line with spaces but no sentence end is cut in windows at spaces, each a
    // sentence of at most 1024 tokens, decoded a few at a time (`--batch-tokens`).
    let mut run_on = "eee ".repeat(50_000).into_bytes();
    run_on.push(b'\n');
    let (stdout, stderr) = translate_bounded(dir.path(), &run_on, &[]);
    assert_eq!(stdout.lines().count(), 1, "{stderr}");
}

/// A vocabulary of nothing but the special tokens (`min_freq` above every word's count) is
/// refused before a step is taken, naming the key: it trained 80 steps of `<unk>` before.
#[test]
fn a_vocabulary_of_only_special_tokens_is_refused_naming_min_freq() {
    let dir = with_config(
        "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\n\
         [data]\ntrain = \"toy.tsv\"\nmin_freq = 5\n[training]\nepochs = 1\nmax_tokens = 64\n",
    );
    let args = ["train", "--device", "cpu", "--config", "config.toml"];
    let needles = [
        "source vocabulary",
        "only the special tokens",
        "data.min_freq = 5",
    ];
    fails_naming(dir.path(), &args, &needles);
    assert!(
        !dir.path().join("runs/config").exists(),
        "no run was written"
    );
}

/// `max_tokens` below a pair's length makes each such pair a batch of its own: said, with
/// the length it needs.
#[test]
fn a_max_tokens_below_the_longest_pair_is_warned_of() {
    let dir = with_config(
        "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\n\
         [data]\ntrain = \"toy.tsv\"\n[training]\nepochs = 1\nmax_tokens = 1\n",
    );
    let output = succeeded(&mut common::train_command(dir.path()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("warning: training.max_tokens = 1 is less than 2 of the 2 training pairs")
            && stderr.contains("raise training.max_tokens to at least 7"),
        "{stderr}"
    );
}

/// A config edited after its weights were written (`heads`, which no tensor's shape shows)
/// is refused naming the key and both values, for a float and an int8 checkpoint; a dropout
/// (training only) may change.
#[test]
fn a_model_key_edited_after_the_weights_were_written_is_refused() {
    let dir = small_checkpoint();
    let last = dir.path().join("run/last");
    succeeded(
        transformer()
            .current_dir(dir.path())
            .args(["quantize", "run/last", "--out", "int8"]),
    );
    for checkpoint in ["run/last", "int8"] {
        let config = dir.path().join(checkpoint).join("config.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, text.replace("dropout = 0.1\n", "dropout = 0.3\n")).unwrap();
        let args = [
            "translate",
            "--device",
            "cpu",
            "--checkpoint",
            checkpoint,
            "ich",
        ];
        succeeded(transformer().current_dir(dir.path()).args(args));
        std::fs::write(&config, text.replace("heads = 2\n", "heads = 1\n")).unwrap();
        fails_naming(
            dir.path(),
            &args,
            &["model.heads is 1", "model.heads = 2", "config.toml"],
        );
        std::fs::write(&config, text).unwrap();
    }
    assert!(last.join("model.safetensors").is_file());
}

/// `average` of a checkpoint rather than a run says so (an int8 one names the run it came
/// from), not to set training.keep_last; `--out` onto another run's averaged checkpoint needs
/// `--overwrite`, the run's own averaged/ does not.
#[test]
fn average_names_a_checkpoint_given_as_a_run_and_keeps_other_runs_averages() {
    let kept = "[model]\nlayers = 1\nd_model = 16\nd_ff = 32\nheads = 2\n\
                [data]\ntrain = \"toy.tsv\"\n[training]\nepochs = 20\nmax_tokens = 64\n\
                checkpoint_every = 5\nkeep_last = 3\n";
    let dir = common::trained_in(kept, &[]);
    succeeded(transformer().current_dir(dir.path()).args([
        "train",
        "--device",
        "cpu",
        "--quiet",
        "--config",
        "config.toml",
        "--out",
        "other",
    ]));
    succeeded(
        transformer()
            .current_dir(dir.path())
            .args(["quantize", "run/last", "--out", "int8"]),
    );
    fails_naming(
        dir.path(),
        &["average", "int8", "--last", "2"],
        &[
            "int8 is an int8 checkpoint",
            "not a run directory",
            "quantized from",
        ],
    );
    fails_naming(
        dir.path(),
        &["average", "run/last", "--last", "2"],
        &["run/last is a checkpoint, not a run directory"],
    );
    for _ in 0..2 {
        succeeded(
            transformer()
                .current_dir(dir.path())
                .args(["average", "run", "--last", "2"]),
        );
    }
    let theirs = std::fs::read(dir.path().join("run/averaged/model.safetensors")).unwrap();
    fails_naming(
        dir.path(),
        &["average", "other", "--last", "2", "--out", "run/averaged"],
        &["run/averaged already exists", "--overwrite"],
    );
    assert_eq!(
        std::fs::read(dir.path().join("run/averaged/model.safetensors")).unwrap(),
        theirs
    );
    succeeded(transformer().current_dir(dir.path()).args([
        "average",
        "other",
        "--last",
        "2",
        "--out",
        "run/averaged",
        "--overwrite",
    ]));
    // A run's own last/ and best/ are its training's, --overwrite or not.
    for own in ["run/last", "run/best"] {
        fails_naming(
            dir.path(),
            &[
                "average",
                "other",
                "--last",
                "2",
                "--out",
                own,
                "--overwrite",
            ],
            &[own, "a training run's own checkpoint"],
        );
    }
}

/// A checkpoint path that is not here and reads as a Hub name says, when the Hub does not
/// have it either, that no such directory is here.
#[test]
fn a_mistyped_checkpoint_path_sent_to_the_hub_names_the_missing_directory() {
    let dir = TempDir::new().unwrap();
    let output = transformer()
        .current_dir(dir.path())
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env("HF_HUB_CACHE", dir.path().join("cache"))
        .env_remove("HF_HUB_OFFLINE")
        .args(["translate", "--checkpoint", "rnus/base", "ich"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("nor is there a directory rnus/base here") && stderr.lines().count() == 1,
        "{stderr}"
    );
}

/// HTML on stdin is read as `--file` reads an .html file: not UTF-8, it is windows-1252 (as
/// browsers guess), and comes back in it.
#[test]
fn html_on_stdin_in_another_encoding_is_read_as_a_file_would_be() {
    let dir = small_checkpoint();
    let output = succeeded(
        transformer()
            .current_dir(dir.path())
            .args([
                "translate",
                "--device",
                "cpu",
                "--checkpoint",
                "run",
                "--format",
                "html",
            ])
            .write_stdin(&b"<p>Gr\xfc\xdfe: ich mochte ein bier</p>\n"[..]),
    );
    assert!(output.stdout.starts_with(b"<p>"), "{:?}", output.stdout);
    assert!(!String::from_utf8_lossy(&output.stderr).contains("error"));
}

/// A full or closed stderr (`2>/dev/full`, `2>&1 | head -1`) loses the messages, not the run:
/// no panic, the run trained and saved.
#[test]
fn a_full_stderr_loses_the_messages_not_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_transformer"))
        .args([
            "train",
            "--device",
            "cpu",
            "--config",
            "configs/tiny.toml",
            "--out",
        ])
        .arg(&run)
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(run.join("last/model.safetensors").is_file());
    assert!(String::from_utf8_lossy(&output.stdout).contains("i want a beer ."));
}
