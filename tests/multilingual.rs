//! M2M100 and NLLB-200 directories through the binary, against what transformers computed
//! with the fixtures (`tests/fixtures/{m2m100,nllb}-tiny/expected.json`,
//! scripts/make_m2m100_fixture.py): `translate --json` with `--source-lang` / `--target-lang`
//! gives `generate()`'s ids, greedy and with its 4 beams, for every language pair, whether
//! the sentences are decoded in one batch or one at a time; the languages are usage errors
//! when unknown or not named; int8 decodes these families too; and `serve` lists the
//! model's languages and translates any pair of them, LibreTranslate's way and its own.

mod common;

use std::path::Path;

use serde_json::{json, Value};

use common::server::{assert_error, get, post_json, Server};
use common::{transformer, translated_ids, translated_json};

const FAMILIES: [&str; 2] = ["m2m100", "nllb"];

fn dir(family: &str) -> String {
    format!("tests/fixtures/{family}-tiny")
}

fn expected(family: &str) -> Value {
    let path = format!("{}/expected.json", dir(family));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn strings(value: &Value) -> Vec<String> {
    serde_json::from_value(value.clone()).unwrap()
}

/// transformers' output rows as our translations' ids: `</s>` and the forced language
/// token are the prompt, the padding is not output.
fn generated(rows: &Value) -> Vec<Vec<u32>> {
    let rows: Vec<Vec<u32>> = serde_json::from_value(rows.clone()).unwrap();
    rows.into_iter()
        .map(|row| row[2..].iter().copied().filter(|&id| id != 1).collect())
        .collect()
}

fn language_flags(pair: &Value) -> [&str; 5] {
    [
        "--source-lang",
        pair["source_lang"].as_str().unwrap(),
        "--target-lang",
        pair["target_lang"].as_str().unwrap(),
        "--no-sentence-split",
    ]
}

#[test]
fn translate_gives_generates_ids_for_every_pair_batched_and_alone() {
    for family in FAMILIES {
        let dir = dir(family);
        for pair in expected(family)["generate"].as_array().unwrap() {
            let sources = strings(&pair["sources"]);
            for (search, beam) in [("greedy", "1"), ("beam", "4")] {
                let want = generated(&pair[search]["ids"]);
                for batch in ["32", "1"] {
                    let flags = [
                        &language_flags(pair)[..],
                        &["--beam", beam, "--batch-size", batch],
                    ]
                    .concat();
                    let got = translated_ids(Path::new(&dir), &sources, &flags);
                    assert_eq!(
                        got, want,
                        "{family} {search} {} -> {}, batches of {batch}",
                        pair["source_lang"], pair["target_lang"]
                    );
                }
            }
        }
    }
}

#[test]
fn the_text_leaves_the_language_token_out() {
    for family in FAMILIES {
        let pair = &expected(family)["generate"][0];
        let sources = strings(&pair["sources"]);
        let flags = [&language_flags(pair)[..], &["--beam", "1"]].concat();
        let got = translated_json(Path::new(&dir(family)), &sources, &flags);
        for (translation, text) in got.iter().zip(strings(&pair["greedy"]["text"])) {
            // transformers 5's M2M100 text starts with the language token, which ours drops.
            let want = text.trim_start_matches("__en__ ");
            assert_eq!(translation["translation"], want, "{family}");
            assert!(!translation["tokens"][0].as_str().unwrap().contains("__"));
        }
    }
}

#[test]
fn languages_are_usage_errors_when_unknown_or_not_named() {
    let cases: [(&str, &[&str], &[&str]); 4] = [
        (
            "m2m100",
            &[],
            &[
                "multilingual model of 100 languages",
                "--source-lang",
                "af, am",
            ],
        ),
        (
            "nllb",
            &["--source-lang", "de", "--target-lang", "eng_Latn"],
            &["--source-lang de", "deu_Latn"],
        ),
        (
            "m2m100",
            &["--source-lang", "de", "--target-lang", "xx"],
            &["--target-lang xx", "100 language codes"],
        ),
        ("nllb", &["--source-lang", "deu_Latn"], &["--target-lang"]),
    ];
    for (family, flags, needles) in cases {
        let out = transformer()
            .args(["translate", "--checkpoint", &dir(family)])
            .args(flags)
            .arg("Ein Hund.")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{family} {flags:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        for needle in needles {
            assert!(stderr.contains(needle), "{family} {flags:?}: {stderr}");
        }
    }
}

#[test]
fn int8_decodes_these_families_through_the_weight_forms() {
    for family in FAMILIES {
        let pair = &expected(family)["generate"][0];
        let sources = strings(&pair["sources"]);
        let flags = [&language_flags(pair)[..], &["--beam", "1"]].concat();
        let float = common::translated_with_log_probs(Path::new(&dir(family)), &sources, &flags);
        let int8_flags = [&flags[..], &["--compute-type", "int8"]].concat();
        let int8 =
            common::translated_with_log_probs(Path::new(&dir(family)), &sources, &int8_flags);
        for ((float_ids, float_lp), (int8_ids, int8_lp)) in float.iter().zip(&int8) {
            // Where the two agree on a prefix, its tokens' probabilities are close.
            let same = float_ids
                .iter()
                .zip(int8_ids)
                .take_while(|(a, b)| a == b)
                .count();
            assert!(same > 0, "{family}: int8 {int8_ids:?} vs {float_ids:?}");
            for (a, b) in float_lp[..same].iter().zip(&int8_lp[..same]) {
                assert!((a - b).abs() < 0.1, "{family}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn a_server_lists_the_models_languages_and_translates_any_pair() {
    let server = Server::start_with(Path::new(&dir("nllb")), &[]);
    let (status, body) = get(&server.url("/languages"));
    assert_eq!(status, 200);
    let languages: Value = serde_json::from_slice(&body).unwrap();
    let codes: Vec<&str> = (languages.as_array().unwrap().iter())
        .map(|entry| entry["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes.len(), 202);
    assert!(codes.contains(&"deu_Latn") && codes.contains(&"fra_Latn"));
    assert_eq!(languages[0]["targets"].as_array().unwrap().len(), 201);
    for pair in expected("nllb")["generate"].as_array().unwrap() {
        let sources = strings(&pair["sources"]);
        let want = translated_json(
            Path::new(&dir("nllb")),
            &sources,
            &[&language_flags(pair)[..], &["--beam", "4"]].concat(),
        );
        let (status, answer) = post_json(
            &server.url("/translate"),
            &json!({"q": sources, "source": pair["source_lang"], "target": pair["target_lang"]}),
        );
        assert_eq!(status, 200, "{answer}");
        for (got, want) in answer["translatedText"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&want)
        {
            assert_eq!(got, &want["translation"]);
        }
        let (status, answer) = post_json(
            &server.url("/v1/translate"),
            &json!({"q": sources[0], "source": pair["source_lang"], "target": pair["target_lang"]}),
        );
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["translations"][0]["ids"], want[0]["ids"]);
    }
    for (body, want) in [
        (
            json!({"q": "Ein Hund.", "source": "de", "target": "eng_Latn"}),
            "de is not supported as a source language",
        ),
        (
            json!({"q": "Ein Hund.", "source": "auto", "target": "eng_Latn"}),
            "language detection",
        ),
    ] {
        let (status, answer) = post_json(&server.url("/translate"), &body);
        assert_error(status, &answer.to_string(), 400, want);
    }
    let (status, answer) = post_json(&server.url("/v1/translate"), &json!({"q": "Ein Hund."}));
    assert_error(status, &answer.to_string(), 400, "missing source");
}

#[test]
fn a_servers_flags_name_its_default_pair() {
    let server = Server::start_with(
        Path::new(&dir("m2m100")),
        &["--source-lang", "de", "--target-lang", "en"],
    );
    let pair = &expected("m2m100")["generate"][0];
    let sources = strings(&pair["sources"]);
    let (status, answer) = post_json(
        &server.url("/v1/translate"),
        &json!({"q": sources[1], "beam": 1}),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["translations"][0]["ids"],
        json!(generated(&pair["greedy"]["ids"])[1])
    );
    // The default pair is no detection: `auto` is refused, as /detect is.
    let (status, answer) = post_json(
        &server.url("/translate"),
        &json!({"q": sources[1], "source": "auto", "target": "en"}),
    );
    assert_error(status, &answer.to_string(), 400, "language detection");
    let (status, answer) = post_json(&server.url("/detect"), &json!({"q": sources[1]}));
    assert_error(status, &answer.to_string(), 400, "does not detect");
    // Half a pair takes the default's other half.
    let (status, answer) = post_json(
        &server.url("/v1/translate"),
        &json!({"q": sources[1], "beam": 1, "target": "en"}),
    );
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn a_language_flag_a_model_cannot_honour_is_a_usage_error() {
    // A model of one pair translates into its own language whatever a flag calls it (a
    // server may rename its pair for its clients: tests/marian.rs).
    let cases: [(&str, &[&str], &str); 2] = [
        (
            "tests/fixtures/marian-gelu",
            &["translate", "--source-lang", "fr", "Ein Hund."],
            "--source-lang fr",
        ),
        (
            "tests/fixtures/nllb-tiny",
            &["serve", "--port", "0", "--source-lang", "deu_Latn"],
            "give --target-lang too",
        ),
    ];
    for (checkpoint, args, needle) in cases {
        let out = transformer()
            .args(&args[..1])
            .args(["--checkpoint", checkpoint])
            .args(&args[1..])
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn an_nllb_code_cuts_sentences_by_its_languages_rules() {
    let out = common::succeeded(
        transformer()
            .args(["sentences", "--lang", "deu_Latn", "--json"])
            .arg("Wir kommen am 3. Mai. Bring z. B. Brot mit."),
    );
    let sentences: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        sentences,
        ["Wir kommen am 3. Mai.", "Bring z. B. Brot mit."]
    );
}

#[test]
fn a_vocabulary_map_never_fills_a_translation_with_a_language_or_framing_token() {
    let dir = tempfile::tempdir().unwrap();
    for (family, listed, flags) in [
        // Each family's tokens no text holds.
        (
            "m2m100",
            &["__fr__", "__en__", "__de__", "<s>", "<pad>"][..],
            ["--source-lang", "de", "--target-lang", "en"],
        ),
        (
            "nllb",
            &["fra_Latn", "eng_Latn", "deu_Latn", "<s>", "<pad>", "<mask>"][..],
            ["--source-lang", "deu_Latn", "--target-lang", "eng_Latn"],
        ),
    ] {
        let path = dir.path().join(format!("{family}.vmap"));
        // A map whose only always-allowed targets are languages and framing.
        std::fs::write(&path, format!("\t{}\n", listed.join(" "))).unwrap();
        let got = translated_json(
            Path::new(&self::dir(family)),
            &["Ein Mann schläft.".to_string()],
            &[&flags[..], &["--vocab-map", path.to_str().unwrap()]].concat(),
        );
        let tokens = got[0]["tokens"].as_array().unwrap();
        for token in tokens {
            let token = token.as_str().unwrap();
            assert!(!listed.contains(&token), "{family}: {token} in {tokens:?}");
        }
    }
}

#[test]
fn an_output_file_that_is_an_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.txt");
    std::fs::write(&source, "Ein Hund.\n").unwrap();
    let cases: [&[&str]; 2] = [
        &["translate", "--file", "source.txt", "--out", "source.txt"],
        &[
            "eval",
            "--src",
            "source.txt",
            "--ref",
            "source.txt",
            "--out",
            "source.txt",
        ],
    ];
    for args in cases {
        let out = transformer()
            .current_dir(dir.path())
            .args(args)
            .args([
                "--checkpoint",
                &format!("{}/tests/fixtures/m2m100-tiny", env!("CARGO_MANIFEST_DIR")),
            ])
            .args(["--source-lang", "de", "--target-lang", "en"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--out source.txt is also the"), "{stderr}");
        assert_eq!(std::fs::read_to_string(&source).unwrap(), "Ein Hund.\n");
    }
}

#[test]
fn an_output_file_that_is_the_vocabulary_map_or_part_of_the_model_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = copy_of("m2m100", dir.path());
    let source = dir.path().join("source.txt");
    std::fs::write(&source, "Ein Hund.\n").unwrap();
    let map = dir.path().join("map.vmap");
    std::fs::write(&map, "\thello\n").unwrap();
    let config = std::fs::read(model.join("config.json")).unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "translate",
                "--file",
                "source.txt",
                "--vocab-map",
                "map.vmap",
                "--out",
                "map.vmap",
            ],
            "is also the --vocab-map input",
        ),
        (
            &[
                "eval",
                "--src",
                "source.txt",
                "--ref",
                "source.txt",
                "--vocab-map",
                "map.vmap",
                "--out",
                "map.vmap",
            ],
            "is also the --vocab-map input",
        ),
        (
            &[
                "translate",
                "--file",
                "source.txt",
                "--out",
                "m2m100/config.json",
            ],
            "is inside the checkpoint",
        ),
        (
            &[
                "eval",
                "--src",
                "source.txt",
                "--ref",
                "source.txt",
                "--out",
                "m2m100/config.json",
            ],
            "is inside the checkpoint",
        ),
    ];
    for (args, says) in cases {
        let out = transformer()
            .current_dir(dir.path())
            .args(args)
            .args(["--checkpoint", "m2m100"])
            .args(["--source-lang", "de", "--target-lang", "en"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(std::fs::read_to_string(&map).unwrap(), "\thello\n");
        assert_eq!(std::fs::read(model.join("config.json")).unwrap(), config);
    }
}

#[test]
fn an_output_onto_a_hub_snapshots_link_or_into_the_run_around_a_checkpoint_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("source.txt"), "Ein Hund.\n").unwrap();
    // The Hub cache's layout: a snapshot's files are links into blobs/.
    let snapshot = dir.path().join("hub/snapshots/abc");
    let blobs = dir.path().join("hub/blobs");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(&blobs).unwrap();
    for entry in std::fs::read_dir(self::dir("m2m100")).unwrap() {
        let entry = entry.unwrap();
        let blob = blobs.join(entry.file_name());
        std::fs::copy(entry.path(), &blob).unwrap();
        let link = snapshot.join(entry.file_name());
        std::os::unix::fs::symlink(Path::new("../../blobs").join(entry.file_name()), link).unwrap();
    }
    // A run whose best/ is the model, with the run's own files around it.
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::rename(copy_of("m2m100", dir.path()), run.join("best")).unwrap();
    std::fs::write(run.join("metrics.jsonl"), "{}\n").unwrap();
    let cases = [
        ("hub/snapshots/abc", "hub/snapshots/abc/config.json"),
        ("run", "run/metrics.jsonl"),
    ];
    for (checkpoint, written) in cases {
        let before = std::fs::read(dir.path().join(written)).unwrap();
        let out = transformer()
            .current_dir(dir.path())
            .args(["translate", "--file", "source.txt", "--out", written])
            .args(["--checkpoint", checkpoint])
            .args(["--source-lang", "de", "--target-lang", "en"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{written}: {stderr}");
        assert!(stderr.contains("is inside the checkpoint"), "{stderr}");
        assert_eq!(std::fs::read(dir.path().join(written)).unwrap(), before);
    }
    // A new file beside them is written.
    let out = transformer()
        .current_dir(dir.path())
        .args(["translate", "--file", "source.txt", "--out", "run/test.hyp"])
        .args(["--checkpoint", "run"])
        .args(["--source-lang", "de", "--target-lang", "en"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(run.join("test.hyp").is_file());
}

/// A copy of `family`'s fixture under `into`.
fn copy_of(family: &str, into: &Path) -> std::path::PathBuf {
    let copy = into.join(family);
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(dir(family)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    copy
}

#[test]
fn a_directory_without_its_tokenizer_files_is_refused_naming_them() {
    for (family, removed, languages, said) in [
        (
            "m2m100",
            "vocab.json",
            ["de", "en"],
            "has no vocab.json or tokenizer.json",
        ),
        (
            "m2m100",
            "sentencepiece.bpe.model",
            ["de", "en"],
            "has no sentencepiece.bpe.model or tokenizer.json",
        ),
        (
            "nllb",
            "tokenizer.json",
            ["deu_Latn", "eng_Latn"],
            "has no vocab.json or tokenizer.json",
        ),
        (
            "nllb",
            "tokenizer_config.json",
            ["deu_Latn", "eng_Latn"],
            "has no tokenizer_config.json",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let copy = copy_of(family, dir.path());
        std::fs::remove_file(copy.join(removed)).unwrap();
        let out = transformer()
            .args(["translate", "--checkpoint"])
            .arg(&copy)
            .args([
                "--source-lang",
                languages[0],
                "--target-lang",
                languages[1],
                "Ein Hund.",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{family} {removed}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(said), "{family} {removed}: {stderr}");
    }
}

#[test]
fn a_config_whose_special_ids_are_not_the_familys_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_of("m2m100", dir.path());
    let config = std::fs::read_to_string(copy.join("config.json")).unwrap();
    std::fs::write(
        copy.join("config.json"),
        config.replace("\"pad_token_id\": 1", "\"pad_token_id\": 5"),
    )
    .unwrap();
    let out = transformer()
        .args(["translate", "--checkpoint"])
        .arg(&copy)
        .args(["--source-lang", "de", "--target-lang", "en", "Ein Hund."])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("pad_token_id is 5"), "{stderr}");
}

#[test]
fn a_pytorch_file_with_a_tied_table_under_four_names_loads_as_its_safetensors_does() {
    // scripts/make_pth_fixture.py: one storage for model.shared, both embed_tokens and
    // lm_head, read once (and, for int8, quantized as it streams out of the zip).
    let sources = strings(&expected("m2m100")["generate"][0]["sources"]);
    let flags = ["--source-lang", "de", "--target-lang", "en", "--beam", "1"];
    for compute in ["float32", "int8"] {
        let flags = [&flags[..], &["--compute-type", compute]].concat();
        let from_safetensors =
            common::translated_with_log_probs(Path::new(&dir("m2m100")), &sources, &flags);
        let from_pytorch = common::translated_with_log_probs(
            Path::new("tests/fixtures/m2m100-tiny-pth"),
            &sources,
            &flags,
        );
        assert_eq!(from_pytorch, from_safetensors, "{compute}");
    }
}

/// A copy of the PyTorch fixture with the middle byte of its zip entry `entry` flipped.
fn pytorch_copy_with_a_flipped_byte(into: &Path, entry: &str) -> std::path::PathBuf {
    let copy = into.join(entry.replace('/', "-"));
    std::fs::create_dir(&copy).unwrap();
    for file in std::fs::read_dir("tests/fixtures/m2m100-tiny-pth").unwrap() {
        let file = file.unwrap();
        std::fs::copy(file.path(), copy.join(file.file_name())).unwrap();
    }
    let weights = copy.join("pytorch_model.bin");
    let (start, size) = {
        let mut archive = zip::ZipArchive::new(std::fs::File::open(&weights).unwrap()).unwrap();
        let stored = archive.by_name(entry).unwrap();
        (stored.data_start().unwrap(), stored.compressed_size())
    };
    let mut bytes = std::fs::read(&weights).unwrap();
    bytes[(start + size / 2) as usize] ^= 0x01;
    std::fs::write(&weights, bytes).unwrap();
    copy
}

#[test]
fn a_flipped_bit_in_a_pytorch_files_pickle_or_storage_is_refused_by_its_checksum() {
    // A bit of the pickle (which candle's reader stops short of checking) could point a
    // weight at another storage and translate silently otherwise.
    let dir = tempfile::tempdir().unwrap();
    for (entry, names) in [
        ("pytorch_model/data.pkl", "pytorch_model/data.pkl"),
        ("pytorch_model/data/0", "tensor "),
    ] {
        let copy = pytorch_copy_with_a_flipped_byte(dir.path(), entry);
        for compute in ["float32", "int8"] {
            let out = transformer()
                .args(["translate", "--checkpoint"])
                .arg(&copy)
                .args(["--source-lang", "de", "--target-lang", "en"])
                .args(["--compute-type", compute, "Ein Hund."])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{entry} {compute}: {stderr}");
            assert!(stderr.contains("checksum"), "{entry} {compute}: {stderr}");
            assert!(stderr.contains(names), "{entry} {compute}: {stderr}");
        }
    }
}

/// An M2M100 model made with `vocab_size` = pieces + languages (no rows for
/// M2M100Tokenizer's 8 `madeupword` tokens, which no input produces; transformers' generate()
/// runs it) loads and gives generate()'s ids of the whole model, whose made-up rows are never
/// chosen; a table short of a language token is still refused.
#[test]
fn an_m2m100_table_without_the_made_up_words_rows_runs() {
    let scratch = tempfile::tempdir().unwrap();
    let cut = |rows: usize| {
        let copy = copy_of("m2m100", scratch.path());
        let copy = {
            let named = scratch.path().join(format!("m2m100-{rows}"));
            std::fs::rename(&copy, &named).unwrap();
            named
        };
        let weights = copy.join("model.safetensors");
        let mut tensors =
            candle_core::safetensors::load(&weights, &candle_core::Device::Cpu).unwrap();
        let shared = tensors["model.shared.weight"].narrow(0, 0, rows).unwrap();
        tensors.insert("model.shared.weight".into(), shared);
        candle_core::safetensors::save(&tensors, &weights).unwrap();
        let config = std::fs::read_to_string(copy.join("config.json")).unwrap();
        let mut config: Value = serde_json::from_str(&config).unwrap();
        assert_eq!(
            config["vocab_size"], 609,
            "the fixture: 501 pieces, 100 languages, 8 made up"
        );
        config["vocab_size"] = json!(rows);
        std::fs::write(copy.join("config.json"), config.to_string()).unwrap();
        copy
    };
    let without_made_up = cut(601);
    for pair in expected("m2m100")["generate"].as_array().unwrap() {
        let sources = strings(&pair["sources"]);
        for (search, beam) in [("greedy", "1"), ("beam", "4")] {
            let flags = [&language_flags(pair)[..], &["--beam", beam]].concat();
            let got = translated_ids(&without_made_up, &sources, &flags);
            assert_eq!(
                got,
                generated(&pair[search]["ids"]),
                "{search} {}",
                pair["target_lang"]
            );
        }
    }
    let short = cut(600);
    let out = transformer()
        .args([
            "translate",
            "--source-lang",
            "de",
            "--target-lang",
            "en",
            "--checkpoint",
        ])
        .arg(&short)
        .arg("Ein Hund.")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("ids up to 600") && said.contains("600 rows"),
        "{said}"
    );
}
