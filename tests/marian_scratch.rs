//! Training a MarianMT model from scratch (`model.arch = "marian"`, its SentencePiece
//! tokenizer learned from the corpus) through the binary: the run's checkpoint carries
//! OPUS-MT's files and the preset's settings, and its export translates as the run does when
//! read back. scripts/test-marian.sh checks the same exports against transformers,
//! SentencePiece and CTranslate2 themselves.

mod common;

use common::{multi30k_lines, succeeded, train_command, transformer, translated_ids};
use serde_json::Value;

/// A directory with 600 Multi30k pairs, then `extra_pairs`, and `config.toml`: `arch =
/// "marian"`, a tiny model, `model` and `data` added to its `[model]` and `[data]`.
fn marian_config(model: &str, data: &str, extra_pairs: &[String]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut pairs: Vec<String> = multi30k_lines("train.de.gz", 600)
        .iter()
        .zip(multi30k_lines("train.en.gz", 600))
        .map(|(de, en)| format!("{de}\t{en}"))
        .collect();
    pairs.extend_from_slice(extra_pairs);
    std::fs::write(dir.path().join("pairs.tsv"), pairs.join("\n") + "\n").unwrap();
    let config = format!(
        "[model]\narch = \"marian\"\nlayers = 1\nd_model = 32\nd_ff = 64\nheads = 2\n\
         max_len = 40\n{model}\n\n[data]\ntrain = \"pairs.tsv\"\nvocab_size = 300\n{data}\n\n\
         [training]\nepochs = 2\nmax_tokens = 1024\nwarmup = 20\n"
    );
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    dir
}

#[test]
fn a_model_trained_as_marian_carries_opus_mt_files_and_its_export_translates_alike() {
    for (joint, vocabularies, shared) in [
        ("true", &["vocab.json"][..], "true"),
        ("false", &["vocab.json", "target_vocab.json"][..], "false"),
        // One vocabulary under two embedding tables: exported with the vocabulary once per
        // side, the only way transformers reads separate tables.
        ("true", &["vocab.json"][..], "false"),
    ] {
        let dir = marian_config(
            &format!("share_source_embeddings = {shared}"),
            &format!("joint_vocab = {joint}"),
            &[],
        );
        let out = train_command(dir.path()).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let last = dir.path().join("run/last");
        for file in ["source.spm", "target.spm"].iter().chain(vocabularies) {
            assert!(last.join(file).is_file(), "joint {joint}: no {file}");
        }
        assert_eq!(
            last.join("target_vocab.json").exists(),
            joint == "false",
            "joint {joint}"
        );
        // The preset resolved: the checkpoint's config states the model it built.
        let saved = std::fs::read_to_string(last.join("config.toml")).unwrap();
        for line in [
            "arch = \"encoder-decoder\"",
            "norm = \"post\"",
            "positions = \"sinusoidal-halves\"",
            "activation = \"swish\"",
            "tokenizer = \"marian\"",
            "length_normalization = \"length\"",
            "max_len = 39",
        ] {
            assert!(
                saved.contains(line),
                "joint {joint}: {line:?} not in\n{saved}"
            );
        }
        assert!(
            saved.contains(&format!("share_source_embeddings = {shared}")),
            "{saved}"
        );
        // OPUS-MT's vocabulary layout: </s> 0, <unk> 1, <pad> last, on both sides.
        let vocab: Value = serde_json::from_slice(
            &std::fs::read(last.join(vocabularies[vocabularies.len() - 1])).unwrap(),
        )
        .unwrap();
        let vocab = vocab.as_object().unwrap();
        assert_eq!(
            (vocab["</s>"].as_u64(), vocab["<unk>"].as_u64()),
            (Some(0), Some(1))
        );
        assert_eq!(vocab["<pad>"].as_u64(), Some(vocab.len() as u64 - 1));

        let exported = dir.path().join("hf");
        succeeded(
            transformer()
                .args(["export", "--to", "hf"])
                .arg(dir.path().join("run"))
                .arg("--out")
                .arg(&exported),
        );
        let sources = multi30k_lines("val.de.gz", 12);
        for flags in [&["--beam", "1"][..], &["--beam", "3"][..]] {
            assert_eq!(
                translated_ids(&dir.path().join("run"), &sources, flags),
                translated_ids(&exported, &sources, flags),
                "joint {joint}, {flags:?}"
            );
        }
    }
}

#[test]
fn a_vocabulary_too_small_for_the_corpus_is_refused_naming_the_key() {
    let dir = marian_config("", "vocab_size = 20", &[]);
    // The key is stated twice: replace the first.
    let config = std::fs::read_to_string(dir.path().join("config.toml"))
        .unwrap()
        .replacen("vocab_size = 300\n", "", 1);
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    let out = train_command(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("data.vocab_size = 20")
            && stderr.contains("distinct characters")
            && stderr.contains("raise data.vocab_size"),
        "{stderr}"
    );
    let errors = stderr.lines().filter(|l| l.starts_with("error")).count();
    assert_eq!(errors, 1, "{stderr}");
}

#[test]
fn a_corpus_with_special_token_text_and_a_huge_line_trains_and_exports() {
    let awkward = [
        "Ein Hund.<pad><pad></s><unk>\tA dog.<pad></s><unk>".to_string(),
        format!("{}\tlong", "x".repeat(300_000)),
    ];
    let dir = marian_config("", "", &awkward);
    let out = train_command(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 sentences longer than 4192 bytes left out of learning"),
        "{stderr}"
    );
    // Each special keeps its one id: none of them was learned as a piece of text.
    let vocab: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("run/last/vocab.json")).unwrap())
            .unwrap();
    let vocab = vocab.as_object().unwrap();
    let ids: std::collections::BTreeSet<u64> = vocab.values().filter_map(Value::as_u64).collect();
    assert_eq!(ids.len(), vocab.len());
    let out = succeeded(
        transformer()
            .args([
                "tokenize",
                "--checkpoint",
                "run",
                "--target",
                "A dog.</s> Ein",
            ])
            .current_dir(dir.path()),
    );
    let ids: Vec<u64> = String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(|id| id.parse().unwrap())
        .collect();
    // </s> (id 0) ends the ids once, at the end: the typed </s> is text.
    assert_eq!(ids.iter().filter(|&&id| id == 0).count(), 1, "{ids:?}");
}

#[test]
fn a_corpus_the_position_table_cannot_hold_is_refused_before_training() {
    let dir = marian_config("", "", &[]);
    let config = std::fs::read_to_string(dir.path().join("config.toml"))
        .unwrap()
        .replace("max_len = 40", "max_len = 2");
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    let out = train_command(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("every one of the 600 training pairs")
            && stderr.contains("raise model.max_len"),
        "{stderr}"
    );
    assert!(!dir.path().join("run/last").exists());
}
