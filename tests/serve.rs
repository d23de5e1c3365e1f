//! `transformer serve` run as a process and talked to over loopback with a real HTTP client
//! (ureq): LibreTranslate's API, the /v1 API, dynamic batching under 64 concurrent requests,
//! a full queue, bad requests, the key, timeouts and a graceful stop. Every request has a
//! client timeout, and every load is bounded in count.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{json, Value};

use common::server::{agent, assert_error, get, post, post_json, tiny_checkpoint, Server};
use common::{succeeded, transformer};

fn translate_form(server: &Server, q: &str) -> (u16, String) {
    let form = format!("q={}&source=de&target=en", q.replace(' ', "+"));
    post(
        &server.url("/translate"),
        "application/x-www-form-urlencoded",
        &form,
    )
}

#[test]
fn a_libretranslate_form_request_gets_the_toy_translation() {
    let server = Server::start(&[]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    let (status, body) = translate_form(&server, "ich mochte ein bier");
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body, json!({ "translatedText": "i want a beer ." }));
    let (status, body) = get(&server.url("/languages"));
    assert_eq!(status, 200);
    let languages: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(languages[0]["code"], "de");
    assert_eq!(languages[0]["name"], "German");
    assert_eq!(languages[0]["targets"], json!(["en"]));
}

#[test]
fn a_list_of_texts_gets_a_list_and_auto_names_the_source() {
    let server = Server::start(&[]);
    let (status, body) = post_json(
        &server.url("/translate"),
        &json!({ "q": ["ich mochte ein cola", "ich mochte ein bier"], "source": "auto",
                 "target": "en", "format": "text" }),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["translatedText"],
        json!(["i want a coke .", "i want a beer ."])
    );
    assert_eq!(body["detectedLanguage"][0]["language"], "de");
    let (_, body) = post_json(
        &server.url("/translate"),
        &json!({ "q": "ich mochte ein bier\nich mochte ein cola", "source": "de", "target": "en",
                 "alternatives": 2 }),
    );
    assert_eq!(body["translatedText"], "i want a beer .\ni want a coke .");
    assert_eq!(body["alternatives"].as_array().unwrap().len(), 2, "{body}");
}

/// Sentences of the toy vocabulary, all different: three words for even `i`, four for odd.
fn toy_sentences(count: usize) -> Vec<String> {
    let words = ["ich", "mochte", "ein", "bier", "cola"];
    (0..count)
        .map(|i| {
            let (length, mut n) = if i % 2 == 0 { (3, i) } else { (4, 3 * i) };
            (0..length)
                .map(|_| {
                    let word = words[n % words.len()];
                    n /= words.len();
                    word
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// German numbers to English, one to three words ("zwei sechs eins" -> "two six one"): a
/// model whose translations of different sentences differ, so that answers handed to the
/// wrong request would be seen.
fn numbers_checkpoint() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-numbers");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut pairs = String::new();
        for length in 1..=3 {
            for n in 0..NUMBERS.len().pow(length) {
                let (de, en) = number_words(n, length as usize);
                pairs.push_str(&format!("{de}\t{en}\n"));
            }
        }
        std::fs::write(dir.join("pairs.tsv"), pairs).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            "[model]\nlayers = 2\nd_model = 32\nd_ff = 64\nheads = 4\ndropout = 0.0\n\
             [data]\ntrain = \"pairs.tsv\"\nsource_lang = \"de\"\ntarget_lang = \"en\"\n\
             [training]\nepochs = 80\nmax_tokens = 400\nwarmup = 50\nlog_every = 50\n\
             checkpoint_every = 10000\n",
        )
        .unwrap();
        succeeded(
            transformer()
                .current_dir(&dir)
                .args(["train", "--device", "cpu", "--quiet"])
                .args(["--config", "config.toml", "--out", "run"]),
        );
        dir.join("run")
    })
}

const NUMBERS: [(&str, &str); 6] = [
    ("eins", "one"),
    ("zwei", "two"),
    ("drei", "three"),
    ("vier", "four"),
    ("fuenf", "five"),
    ("sechs", "six"),
];

/// The `n`th sentence of `length` number words, in German and in English.
fn number_words(mut n: usize, length: usize) -> (String, String) {
    let (mut de, mut en) = (Vec::new(), Vec::new());
    for _ in 0..length {
        let (d, e) = NUMBERS[n % NUMBERS.len()];
        de.push(d);
        en.push(e);
        n /= NUMBERS.len();
    }
    (de.join(" "), en.join(" "))
}

/// `translate` offline with the tiny model, one line per sentence.
fn offline(sentences: &[String], extra: &[&str]) -> Vec<String> {
    offline_with(tiny_checkpoint(), sentences, extra)
}

/// `translate` offline with `checkpoint`, one line per sentence.
fn offline_with(checkpoint: &Path, sentences: &[String], extra: &[&str]) -> Vec<String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_transformer"))
        .args(["translate", "--device", "cpu", "--checkpoint"])
        .arg(checkpoint)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all((sentences.join("\n") + "\n").as_bytes())
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn sixty_four_concurrent_requests_each_get_their_own_translation() {
    // Three-word sentences, every third of the 216.
    let sentences: Vec<String> = (0..64).map(|i| number_words(3 * i, 3).0).collect();
    let want = offline_with(numbers_checkpoint(), &sentences, &[]);
    let distinct: std::collections::HashSet<&String> = want.iter().collect();
    assert_eq!(
        distinct.len(),
        64,
        "the translations must all differ: {want:?}"
    );
    let server = Server::start_with(
        numbers_checkpoint(),
        &["--max-batch", "16", "--max-wait-ms", "20"],
    );
    let got: Vec<(u16, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = sentences
            .iter()
            .map(|sentence| {
                let server = &server;
                scope.spawn(move || translate_form(server, sentence))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((sentence, want), (status, body)) in sentences.iter().zip(&want).zip(&got) {
        assert_eq!(*status, 200, "{sentence}: {body}");
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["translatedText"], *want, "{sentence}");
    }
    // They were batched: fewer decoder batches than sentences.
    let (_, metrics) = get(&server.url("/metrics"));
    let metrics = String::from_utf8(metrics).unwrap();
    let batches = metric(&metrics, "transformer_batch_sentences_count");
    let translated = metric(&metrics, "transformer_sentences_total");
    assert_eq!(translated, 64.0, "{metrics}");
    assert!(batches < 64.0, "{batches} batches for 64 sentences");
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[test]
fn the_v1_api_answers_with_the_json_of_translate_json() {
    let server = Server::start(&[]);
    let (status, body) = post(
        &server.url("/v1/translate"),
        "application/json",
        r#"{"q": ["ich mochte ein bier", "ich mochte ein cola"], "beam": 3}"#,
    );
    assert_eq!(status, 200, "{body}");
    let want = offline(
        &["ich mochte ein bier".into(), "ich mochte ein cola".into()],
        &["--json", "--beam", "3"],
    );
    // Byte for byte: the same fields in the same order, the same numbers.
    assert_eq!(body, format!(r#"{{"translations":[{}]}}"#, want.join(",")));
    let (status, body) = post_json(
        &server.url("/v1/translate"),
        &json!({ "q": "ich mochte ein bier", "beam": 4, "n_best": 3, "length_penalty": 0.6 }),
    );
    assert_eq!(status, 200, "{body}");
    let translation = &body["translations"][0];
    assert_eq!(translation["translation"], "i want a beer .");
    let alternatives = translation["alternatives"].as_array().unwrap();
    assert_eq!(alternatives.len(), 2);
    for alternative in alternatives {
        assert_ne!(alternative["translation"], translation["translation"]);
        assert_eq!(
            alternative["ids"].as_array().unwrap().len(),
            alternative["log_probs"].as_array().unwrap().len()
        );
    }
}

#[test]
fn bad_requests_get_their_status_and_a_one_line_error_and_the_server_keeps_serving() {
    let server = Server::start(&["--max-body-bytes", "2048", "--max-chars", "200"]);
    let translate = server.url("/translate");
    let cases: Vec<(String, &str, String, u16, &str)> = vec![
        (
            "bad JSON".into(),
            "application/json",
            "{\"q\": ".into(),
            400,
            "not valid JSON",
        ),
        (
            "no q".into(),
            "application/json",
            r#"{"source":"de","target":"en"}"#.into(),
            400,
            "missing q",
        ),
        (
            "q a number".into(),
            "application/json",
            r#"{"q":3,"source":"de","target":"en"}"#.into(),
            400,
            "q must be a string",
        ),
        (
            "wrong source".into(),
            "application/json",
            r#"{"q":"ich","source":"fr","target":"en"}"#.into(),
            400,
            "fr is not supported",
        ),
        (
            "wrong target".into(),
            "application/json",
            r#"{"q":"ich","source":"de","target":"fr"}"#.into(),
            400,
            "fr is not supported",
        ),
        (
            "xml".into(),
            "application/json",
            r#"{"q":"ich","source":"de","target":"en","format":"xml"}"#.into(),
            400,
            "format xml",
        ),
        (
            "oversized body".into(),
            "application/json",
            format!(
                r#"{{"q":"{}","source":"de","target":"en"}}"#,
                "ich ".repeat(1000)
            ),
            413,
            "2048 bytes",
        ),
        (
            "long text".into(),
            "application/json",
            format!(
                r#"{{"q":"{}","source":"de","target":"en"}}"#,
                "ich ".repeat(60)
            ),
            400,
            "--max-chars",
        ),
        (
            "multipart".into(),
            "multipart/form-data; boundary=x",
            "--x--".into(),
            415,
            "Content-Type multipart/form-data",
        ),
    ];
    for (what, content_type, body, status, message) in &cases {
        let (got_status, got_body) = post(&translate, content_type, body);
        assert!(got_status == *status, "{what}: {got_status} {got_body}");
        assert_error(got_status, &got_body, *status, message);
    }
    let v1 = server.url("/v1/translate");
    for (body, message) in [
        (
            json!({ "q": "ich", "beam": 0 }),
            "beam 0 must be at least 1",
        ),
        (
            json!({ "q": "ich", "beam": 2, "n_best": 3 }),
            "n_best 3 is more than beam 2",
        ),
        (
            json!({ "q": "ich", "temperature": 1 }),
            "unknown field `temperature`",
        ),
        (json!({ "q": [] }), "empty list"),
    ] {
        let (status, text) = post(&v1, "application/json", &body.to_string());
        assert_error(status, &text, 400, message);
    }
    let (status, body) = get(&server.url("/nowhere"));
    assert_error(
        status,
        &String::from_utf8(body).unwrap(),
        404,
        "no endpoint /nowhere",
    );
    let (status, body) = get(&server.url("/v1/attention?q=ich&layers=9"));
    assert_error(status, &String::from_utf8(body).unwrap(), 400, "layers");
    // Still serving.
    let (status, body) = translate_form(&server, "ich mochte ein bier");
    assert_eq!(
        (status, body.as_str()),
        (200, r#"{"translatedText":"i want a beer ."}"#)
    );
}

#[test]
fn a_server_with_a_key_refuses_requests_without_it() {
    let server = Server::start(&["--api-key", "s3cret"]);
    let url = server.url("/translate");
    let (status, body) = post(
        &url,
        "application/x-www-form-urlencoded",
        "q=ich&source=de&target=en",
    );
    assert_error(status, &body, 403, "requires an API key");
    let (status, body) = post(
        &url,
        "application/x-www-form-urlencoded",
        "q=ich&source=de&target=en&api_key=wrong",
    );
    assert_error(status, &body, 403, "invalid API key");
    let (status, _) = post(
        &url,
        "application/x-www-form-urlencoded",
        "q=ich+mochte+ein+bier&source=de&target=en&api_key=s3cret",
    );
    assert_eq!(status, 200);
    let mut response = agent()
        .post(&server.url("/v1/translate"))
        .header("Authorization", "Bearer s3cret")
        .header("Content-Type", "application/json")
        .send(r#"{"q": "ich mochte ein bier"}"#)
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        200,
        "{}",
        response.body_mut().read_to_string().unwrap()
    );
    let (status, body) = get(&server.url("/frontend/settings"));
    assert_eq!(status, 200);
    let settings: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(settings["keyRequired"], true);
}

#[test]
fn a_full_queue_answers_429_at_once_and_then_serves_again() {
    // A queue of one sentence, held for two seconds while the batch waits for company.
    let server = Server::start(&[
        "--max-queue",
        "1",
        "--max-batch",
        "2",
        "--max-wait-ms",
        "2000",
    ]);
    std::thread::scope(|scope| {
        let first = scope.spawn(|| translate_form(&server, "ich mochte ein bier"));
        std::thread::sleep(Duration::from_millis(400));
        let started = std::time::Instant::now();
        let (status, body) = translate_form(&server, "ich mochte ein cola");
        assert_error(status, &body, 429, "queue holds 1 of 1");
        assert!(
            started.elapsed() < Duration::from_millis(1000),
            "429 took {:?}",
            started.elapsed()
        );
        assert_eq!(first.join().unwrap().0, 200);
    });
    assert_eq!(translate_form(&server, "ich mochte ein cola").0, 200);
}

#[test]
fn a_request_over_the_time_limit_gets_503() {
    let server = Server::start(&[
        "--timeout-ms",
        "300",
        "--max-batch",
        "2",
        "--max-wait-ms",
        "3000",
    ]);
    let (status, body) = translate_form(&server, "ich mochte ein bier");
    assert_error(status, &body, 503, "--timeout-ms");
}

#[test]
fn stopping_the_server_answers_every_request_in_flight_and_exits_zero() {
    // The batch waits 1.5 s for company, so the requests are still in flight at SIGTERM.
    let server = Server::start(&["--max-batch", "64", "--max-wait-ms", "1500"]);
    let sentences = toy_sentences(8);
    let want = offline(&sentences, &[]);
    let url = server.url("/translate");
    let (answers, (status, stderr)) = std::thread::scope(|scope| {
        let handles: Vec<_> = sentences
            .iter()
            .map(|s| {
                let url = &url;
                scope.spawn(move || {
                    post_json(url, &json!({ "q": s, "source": "de", "target": "en" }))
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let stopped = server.stop();
        let answers: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (answers, stopped)
    });
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(stderr.contains("stopping"), "{stderr}");
    assert!(
        stderr.contains("every request in flight was answered"),
        "{stderr}"
    );
    for ((answer, want), sentence) in answers.iter().zip(&want).zip(&sentences) {
        assert_eq!(answer.0, 200, "{sentence}: {}", answer.1);
        assert_eq!(answer.1["translatedText"], *want, "{sentence}");
    }
    assert!(
        agent().get(&url).call().is_err(),
        "still accepting after the stop"
    );
}

#[test]
fn the_page_health_metrics_and_attention_picture_are_served() {
    let server = Server::start(&[]);
    let (status, page) = get(&server.url("/"));
    assert_eq!(status, 200);
    let page = String::from_utf8(page).unwrap();
    assert!(page.contains("id=\"translate\"") && page.contains("/v1/attention"));
    let (status, png) = get(&server.url("/v1/attention?q=ich+mochte+ein+bier&layers=2"));
    assert_eq!(status, 200);
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let (_, health) = get(&server.url("/health"));
    let health: Value = serde_json::from_slice(&health).unwrap();
    assert_eq!(
        (health["status"].as_str(), health["source"].as_str()),
        (Some("ok"), Some("de"))
    );
    translate_form(&server, "ich mochte ein bier");
    let (_, metrics) = get(&server.url("/metrics"));
    let metrics = String::from_utf8(metrics).unwrap();
    assert_eq!(
        metric(
            &metrics,
            "transformer_http_requests_total{endpoint=\"translate\",status=\"200\"}"
        ),
        1.0
    );
    assert!(
        metrics.contains("transformer_queued_sentences 0"),
        "{metrics}"
    );
}

#[test]
fn a_checkpoint_without_its_language_pair_is_refused_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = std::fs::read_to_string("configs/tiny.toml").unwrap();
    let config: String = config
        .lines()
        .filter(|l| !l.contains("_lang"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.path().join("tiny.toml"), config).unwrap();
    succeeded(
        transformer()
            .args([
                "train",
                "--device",
                "cpu",
                "--quiet",
                "--stop-at-step",
                "1",
                "--config",
            ])
            .arg(dir.path().join("tiny.toml"))
            .arg("--out")
            .arg(dir.path().join("run")),
    );
    let out = transformer()
        .args(["serve", "--device", "cpu", "--port", "0", "--checkpoint"])
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("data.source_lang"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn a_busy_port_is_a_one_line_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = transformer()
        .args(["serve", "--device", "cpu", "--port", &port, "--checkpoint"])
        .arg(tiny_checkpoint())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen on 127.0.0.1:{port}")),
        "{stderr}"
    );
}
