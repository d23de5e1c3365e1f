//! Training a MarianMT model from scratch (`model.arch = "marian"`, its SentencePiece
//! tokenizer learned from the corpus) through the binary: the run's checkpoint carries
//! OPUS-MT's files and the preset's settings, and its export translates as the run does when
//! read back. scripts/test-marian.sh checks the same exports against transformers,
//! SentencePiece and CTranslate2 themselves.

mod common;

use common::{multi30k_lines, succeeded, train_command, transformer, translated_ids};
use serde_json::Value;

/// A directory with 600 Multi30k pairs and `config.toml`: `arch = "marian"`, a tiny model,
/// `data` added to its `[data]`.
fn marian_config(data: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let pairs: Vec<String> = multi30k_lines("train.de.gz", 600)
        .iter()
        .zip(multi30k_lines("train.en.gz", 600))
        .map(|(de, en)| format!("{de}\t{en}"))
        .collect();
    std::fs::write(dir.path().join("pairs.tsv"), pairs.join("\n") + "\n").unwrap();
    let config = format!(
        "[model]\narch = \"marian\"\nlayers = 1\nd_model = 32\nd_ff = 64\nheads = 2\n\
         max_len = 40\n\n[data]\ntrain = \"pairs.tsv\"\nvocab_size = 300\n{data}\n\n\
         [training]\nepochs = 2\nmax_tokens = 1024\nwarmup = 20\n"
    );
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    dir
}

#[test]
fn a_model_trained_as_marian_carries_opus_mt_files_and_its_export_translates_alike() {
    for (joint, vocabularies) in [
        ("true", &["vocab.json"][..]),
        ("false", &["vocab.json", "target_vocab.json"][..]),
    ] {
        let dir = marian_config(&format!("joint_vocab = {joint}"));
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
            saved.contains(&format!("share_source_embeddings = {joint}")),
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
    let dir = marian_config("vocab_size = 20");
    // The key is stated twice: replace the first.
    let config = std::fs::read_to_string(dir.path().join("config.toml"))
        .unwrap()
        .replacen("vocab_size = 300\n", "", 1);
    std::fs::write(dir.path().join("config.toml"), config).unwrap();
    let out = train_command(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("data.vocab_size = 20") && stderr.contains("raise data.vocab_size"),
        "{stderr}"
    );
    let errors = stderr.lines().filter(|l| l.starts_with("error")).count();
    assert_eq!(errors, 1, "{stderr}");
}
