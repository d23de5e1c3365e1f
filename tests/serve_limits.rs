//! `transformer serve` against clients that misbehave, over loopback: headers sent a byte at
//! a time, idle and surplus connections, a stop while a request is half sent or still being
//! decoded, requests that would hold the model too long or whose client gave up, and wide
//! beams. Every load is bounded in count and time.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use candle_core::{Device, Tensor};
use serde_json::{json, Value};

use common::server::{assert_error, get, post, post_json, tiny_checkpoint, Server};

fn connect(server: &Server) -> TcpStream {
    let address = server.url.trim_start_matches("http://").to_string();
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Seconds until the server closes `stream` (a read returns nothing or fails), sending
/// `bytes` one at a time `gap` apart meanwhile.
fn seconds_until_closed(mut stream: TcpStream, bytes: &[u8], gap: Duration) -> f64 {
    let started = Instant::now();
    stream.set_nonblocking(true).unwrap();
    let mut buffer = [0u8; 256];
    for &byte in bytes.iter().cycle().take(200) {
        if stream.write_all(&[byte]).is_err() {
            break;
        }
        std::thread::sleep(gap);
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(_) => panic!("the server answered a request it never got whole"),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => break,
        }
    }
    started.elapsed().as_secs_f64()
}

#[test]
fn headers_sent_a_byte_at_a_time_are_cut_off_at_the_header_timeout() {
    let server = Server::start(&["--header-timeout-ms", "500"]);
    let slow = connect(&server);
    let closed_after = seconds_until_closed(
        slow,
        b"GET /health HTTP/1.1\r\nHost: x\r\nAccept: a\r\n",
        Duration::from_millis(100),
    );
    assert!(
        (0.4..5.0).contains(&closed_after),
        "closed after {closed_after} s"
    );
    assert_eq!(get(&server.url("/health")).0, 200);
}

#[test]
fn an_idle_connection_is_closed_after_the_header_timeout() {
    let server = Server::start(&["--header-timeout-ms", "500"]);
    let mut idle = connect(&server);
    let started = Instant::now();
    let mut buffer = [0u8; 16];
    let read = idle.read(&mut buffer).unwrap_or(0);
    assert_eq!(read, 0);
    let seconds = started.elapsed().as_secs_f64();
    assert!((0.4..5.0).contains(&seconds), "closed after {seconds} s");
}

#[test]
fn a_full_server_sheds_the_connection_waiting_longest_for_its_head() {
    let server = Server::start(&[
        "--max-connections",
        "4",
        "--max-connections-per-client",
        "4",
        "--header-timeout-ms",
        "20000",
    ]);
    let mut held: Vec<TcpStream> = (0..4).map(|_| connect(&server)).collect();
    std::thread::sleep(Duration::from_millis(600));
    // A fifth connection is let in, in place of the oldest idle one.
    assert_eq!(get(&server.url("/health")).0, 200);
    let mut buffer = [0u8; 16];
    held[0]
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(
        held[0].read(&mut buffer).unwrap_or(0),
        0,
        "the oldest was closed"
    );
    held[3]
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(
        held[3].read(&mut buffer).is_err(),
        "the newest is still open"
    );
}

#[test]
fn a_503_comes_only_when_every_connection_is_answering() {
    let server = Server::start_with(
        never_ending_checkpoint(),
        &[
            "--max-connections",
            "2",
            "--max-request-tokens",
            "10000000",
            "--timeout-ms",
            "20000",
        ],
    );
    let body = long_work().to_string();
    let busy: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = connect(&server);
            let request = format!(
                "POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(request.as_bytes()).unwrap();
            stream
        })
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    let mut surplus = connect(&server);
    let mut answer = String::new();
    surplus.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(answer.contains("--max-connections"), "{answer}");
    // Their clients gone, the work is dropped and the server serves again.
    drop(busy);
    let started = Instant::now();
    while get(&server.url("/health")).0 != 200 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never served again"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The tiny model with `</s>` made all but impossible: it decodes until its `max_len`.
fn never_ending_checkpoint() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-never-ending");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let source = tiny_checkpoint().join("last");
        for entry in std::fs::read_dir(&source).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        let weights = dir.join("model.safetensors");
        let mut tensors = candle_core::safetensors::load(&weights, &Device::Cpu).unwrap();
        let mut bias = tensors["generator.proj.bias"].to_vec1::<f32>().unwrap();
        bias[transformer::tokenize::specials::EOS_ID as usize] = -1e4;
        tensors.insert(
            "generator.proj.bias".into(),
            Tensor::new(bias, &Device::Cpu).unwrap(),
        );
        candle_core::safetensors::save(&tensors, &weights).unwrap();
        dir
    })
}

/// Eight short sentences decoded with a beam of 4 for 3000 steps each: about 40 s of work
/// on two cores, were it done to the end.
fn long_work() -> Value {
    json!({ "q": vec!["ich mochte ein bier"; 8], "beam": 4, "max_len": 3000 })
}

#[test]
fn work_whose_requester_gave_up_is_dropped_and_the_next_request_is_answered() {
    let server = Server::start_with(
        never_ending_checkpoint(),
        &["--timeout-ms", "500", "--max-request-tokens", "10000000"],
    );
    let (status, body) = post_json(&server.url("/v1/translate"), &long_work());
    assert_eq!(status, 503, "{body}");
    let started = Instant::now();
    let (status, body) = post_json(
        &server.url("/v1/translate"),
        &json!({ "q": "ich", "max_len": 3 }),
    );
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let (_, metrics) = get(&server.url("/metrics"));
    let metrics = String::from_utf8(metrics).unwrap();
    let abandoned = metrics
        .lines()
        .find_map(|l| l.strip_prefix("transformer_abandoned_sentences_total "))
        .unwrap();
    assert_eq!(abandoned, "8", "{metrics}");
}

#[test]
fn a_request_that_could_decode_too_many_tokens_is_refused_before_it_is_queued() {
    let server = Server::start_with(never_ending_checkpoint(), &[]);
    let (status, body) = post(
        &server.url("/v1/translate"),
        "application/json",
        &long_work().to_string(),
    );
    assert_error(status, &body, 400, "serve --max-request-tokens");
    assert_eq!(
        post_json(
            &server.url("/v1/translate"),
            &json!({ "q": "ich", "max_len": 3 })
        )
        .0,
        200
    );
}

#[test]
fn a_half_sent_request_does_not_hold_up_a_stop() {
    let server = Server::start(&["--header-timeout-ms", "60000"]);
    let mut half = connect(&server);
    half.write_all(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Le")
        .unwrap();
    let started = Instant::now();
    let (status, stderr) = server.stop();
    assert!(status.success(), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(5), "{stderr}");
}

#[test]
fn a_second_signal_stops_at_once_whatever_is_in_flight() {
    let server = Server::start_with(
        never_ending_checkpoint(),
        &["--timeout-ms", "60000", "--max-request-tokens", "10000000"],
    );
    let url = server.url("/v1/translate");
    let client = std::thread::spawn(move || post_json(&url, &long_work()));
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let (status, stderr) = server.stop_twice();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(5), "{stderr}");
    assert!(stderr.contains("a second signal"), "{stderr}");
    drop(client);
}

#[test]
fn detect_holds_to_the_text_count_limit() {
    let server = Server::start(&["--max-texts", "2"]);
    let (status, body) = post(
        &server.url("/detect"),
        "application/json",
        &json!({ "q": ["a", "b", "c"] }).to_string(),
    );
    assert_error(status, &body, 400, "serve --max-texts");
}

#[test]
fn a_form_that_is_not_utf8_is_refused_and_a_lower_case_bearer_is_accepted() {
    let server = Server::start(&["--api-key", "k1"]);
    let (status, body) = post(
        &server.url("/translate"),
        "application/x-www-form-urlencoded",
        "q=%FF%FEbier&source=de&target=en&api_key=k1",
    );
    assert_error(status, &body, 400, "not UTF-8");
    let mut response = common::server::agent()
        .post(server.url("/v1/translate"))
        .header("Authorization", "bearer k1")
        .header("Content-Type", "application/json")
        .send(json!({ "q": "ich mochte ein bier" }).to_string())
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(body["translations"][0]["translation"], "i want a beer .");
}

#[test]
fn a_beam_as_wide_as_the_vocabulary_never_generates_start_or_padding() {
    let server = Server::start(&[]);
    let (status, body) = post_json(
        &server.url("/v1/translate"),
        &json!({ "q": "ich mochte ein bier", "beam": 10, "n_best": 10 }),
    );
    assert_eq!(status, 200, "{body}");
    let translation = &body["translations"][0];
    let mut all = vec![translation];
    all.extend(translation["alternatives"].as_array().unwrap());
    assert_eq!(all.len(), 10, "{body}");
    let mut ids = std::collections::HashSet::new();
    for hypothesis in &all {
        let tokens: Vec<&str> = hypothesis["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(
            !tokens.contains(&"<s>") && !tokens.contains(&"<pad>"),
            "{tokens:?}"
        );
        assert!(ids.insert(hypothesis["ids"].to_string()), "{body}");
    }
    let (status, body) = post_json(
        &server.url("/translate"),
        &json!({ "q": "ich mochte ein bier", "source": "de", "target": "en", "alternatives": 8 }),
    );
    assert_eq!(status, 200, "{body}");
    let alternatives: Vec<&str> = body["alternatives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let distinct: std::collections::HashSet<&&str> = alternatives.iter().collect();
    assert_eq!(distinct.len(), alternatives.len(), "{alternatives:?}");
    assert!(
        !alternatives.contains(&"i want a beer ."),
        "{alternatives:?}"
    );
    assert!(!alternatives.is_empty());
}

/// The tiny model with an 8-position table: it reads sentences of at most 6 tokens.
fn short_table_checkpoint() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-short-table");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = std::fs::read_to_string("configs/tiny.toml")
            .unwrap()
            .replace("[model]", "[model]\nmax_len = 8")
            .replace(
                "data/toy.tsv",
                &std::fs::canonicalize("data/toy.tsv")
                    .unwrap()
                    .display()
                    .to_string(),
            );
        std::fs::write(dir.join("config.toml"), config).unwrap();
        common::succeeded(
            common::transformer()
                .current_dir(&dir)
                .args(["train", "--device", "cpu", "--quiet"])
                .args(["--config", "config.toml", "--out", "run"]),
        );
        dir.join("run")
    })
}

#[test]
fn a_sentence_longer_than_the_model_reads_is_the_clients_error_on_every_endpoint() {
    let server = Server::start_with(short_table_checkpoint(), &[]);
    let long = "ich mochte ein bier bier bier bier";
    let (status, body) = get(&server.url(&format!("/v1/attention?q={}", long.replace(' ', "+"))));
    assert_error(
        status,
        &String::from_utf8(body).unwrap(),
        400,
        "this model reads 6",
    );
    // /v1 cuts a text into lines and sentences: a long one is refused, short lines are not.
    let (status, body) = post(
        &server.url("/v1/translate"),
        "application/json",
        &json!({ "q": "ich mochte ein bier bier bier bier" }).to_string(),
    );
    assert_error(status, &body, 400, "more than the 6 this model reads");
    let (status, body) = post(
        &server.url("/v1/translate"),
        "application/json",
        &json!({ "q": "ich mochte ein bier\nbier bier bier" }).to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = get(&server.url("/v1/attention?q=%FF%FE"));
    assert_error(status, &String::from_utf8(body).unwrap(), 400, "not UTF-8");
    let (status, body) = get(&server.url("/v1/attention?q=ich+mochte+ein+bier"));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(body.starts_with(b"\x89PNG"));
}

/// A connection to `server` whose receive buffer is as small as the kernel allows, so that
/// answers it does not read soon fill it.
fn connect_with_small_receive_buffer(server: &Server) -> TcpStream {
    use std::os::fd::FromRawFd;
    let address: std::net::SocketAddrV4 = server.url.trim_start_matches("http://").parse().unwrap();
    // SAFETY: a fresh socket, set up and connected here, then owned by the TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let size: libc::c_int = 2048;
        let set = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        assert_eq!(set, 0);
        let peer = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: address.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*address.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        let connected = libc::connect(
            fd,
            (&peer as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(connected, 0);
        TcpStream::from_raw_fd(fd)
    }
}

#[test]
fn a_client_that_stops_reading_its_answers_is_cut_off() {
    let server = Server::start(&["--max-connections", "1", "--header-timeout-ms", "500"]);
    let mut reader_that_never_reads = connect_with_small_receive_buffer(&server);
    // Twenty attention pictures of about half a megabyte each, asked for at once.
    let request = "GET /v1/attention?q=ich+mochte+ein+bier+ich+mochte+ein+bier HTTP/1.1\r\n\
                   Host: x\r\n\r\n";
    reader_that_never_reads
        .write_all(request.repeat(20).as_bytes())
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    // The one connection allowed is free again: the stalled one was closed.
    assert_eq!(get(&server.url("/health")).0, 200);
    drop(reader_that_never_reads);
}

/// Width and height of a PNG, from its header.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let word = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

#[test]
fn the_attention_picture_of_a_translation_that_never_ends_is_bounded() {
    let picture = |max_len: &str| {
        let server = Server::start_with(never_ending_checkpoint(), &["--max-len", max_len]);
        let (status, png) = get(&server.url("/v1/attention?q=ich+mochte"));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&png));
        png_size(&png)
    };
    // The target is cut at 80 tokens however far the server's decoding would go.
    assert_eq!(picture("400"), picture("80"));
    let server = Server::start_with(never_ending_checkpoint(), &["--max-request-tokens", "50"]);
    let (status, body) = get(&server.url("/v1/attention?q=ich+mochte"));
    assert_error(
        status,
        &String::from_utf8(body).unwrap(),
        400,
        "--max-request-tokens",
    );
}

#[test]
fn a_body_declared_over_the_limit_is_refused_before_it_is_sent() {
    let server = Server::start(&["--max-body-bytes", "1000"]);
    let mut client = connect(&server);
    client
        .write_all(
            b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 300000\r\n\r\n{\"q\": ",
        )
        .unwrap();
    let started = Instant::now();
    let mut answer = [0u8; 512];
    let read = client.read(&mut answer).unwrap();
    let head = String::from_utf8_lossy(&answer[..read]);
    assert!(head.starts_with("HTTP/1.1 413 "), "{head}");
    assert!(head.contains("--max-body-bytes"), "{head}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// `request` sent whole, then the client's writing side shut (`shutdown(SHUT_WR)`): what
/// the server answers before it closes.
fn answer_after_half_close(server: &Server, request: &[u8]) -> String {
    let mut stream = connect(server);
    stream.write_all(request).unwrap();
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

fn post_request(path: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: \
         {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The body of a whole answer, checked against its Content-Length.
fn whole_body(answer: &str) -> &str {
    let (head, body) = answer.split_once("\r\n\r\n").expect(answer);
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length: "))
        .expect(head)
        .parse()
        .unwrap();
    assert_eq!(body.len(), length, "{answer}");
    body
}

#[test]
fn a_client_that_shuts_its_writing_side_after_its_request_is_answered() {
    let server = Server::start_with(
        never_ending_checkpoint(),
        &["--max-request-tokens", "10000000"],
    );
    // Work that takes long enough for the end of the stream to arrive while it is decoded,
    // as well as requests answered at once.
    let slow = json!({ "q": vec!["ich mochte ein bier"; 2], "beam": 2, "max_len": 400 });
    let requests = [
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        post_request(
            "/translate",
            "application/x-www-form-urlencoded",
            "q=ich&source=de&target=en",
        ),
        post_request("/v1/translate", "application/json", &slow.to_string()),
        b"GET /health HTTP/1.0\r\n\r\n".to_vec(),
    ];
    for request in requests {
        let answer = answer_after_half_close(&server, &request);
        assert!(
            answer.starts_with("HTTP/1.1 200 ") || answer.starts_with("HTTP/1.0 200 "),
            "{answer}"
        );
        let _: Value = serde_json::from_str(whole_body(&answer)).expect(&answer);
    }
}

#[test]
fn a_body_cut_short_by_a_half_close_is_answered_at_once() {
    let server = Server::start(&[]);
    let mut request = post_request("/v1/translate", "application/json", r#"{"q": "ich"}"#);
    request.truncate(request.len() - 4);
    let started = Instant::now();
    let answer = answer_after_half_close(&server, &request);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(
        whole_body(&answer).contains("before sending the whole body"),
        "{answer}"
    );
}

#[test]
fn the_work_of_a_client_that_closed_its_connection_is_dropped() {
    let server = Server::start_with(
        never_ending_checkpoint(),
        &["--max-request-tokens", "10000000"],
    );
    let queued = || {
        let (_, body) = get(&server.url("/health"));
        serde_json::from_slice::<Value>(&body).unwrap()["queued_sentences"]
            .as_u64()
            .unwrap()
    };
    let mut stream = connect(&server);
    stream
        .write_all(&post_request(
            "/v1/translate",
            "application/json",
            &long_work().to_string(),
        ))
        .unwrap();
    let started = Instant::now();
    while queued() == 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "never queued");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Closed, not half-closed: the server cannot tell until its probe is answered by a reset.
    drop(stream);
    let closed = Instant::now();
    while queued() > 0 {
        assert!(
            closed.elapsed() < Duration::from_secs(5),
            "the work of a client gone still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
