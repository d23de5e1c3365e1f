//! `transformer serve` against clients that hold connections without sending requests (a
//! slowloris) or whose bodies trickle in, over loopback: a client's share of the
//! connections, the connection waiting longest for its request's head (or sending its body
//! slowest) shed for a new one. Every load is bounded in count and time.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use common::server::{post_json, Server};

/// The server's address.
fn address(server: &Server) -> SocketAddrV4 {
    server.url.trim_start_matches("http://").parse().unwrap()
}

/// A connection to `to` from the loopback address `from` (127.0.0.2 is another client than
/// 127.0.0.1 to the server); `None` when it is refused.
fn connect_from(to: SocketAddrV4, from: Ipv4Addr) -> Option<TcpStream> {
    let socket_address = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a fresh socket, bound and connected here, then owned by the TcpStream (or
    // closed when connecting fails).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let local = socket_address(from, 0);
        assert_eq!(
            libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), size),
            0
        );
        let peer = socket_address(*to.ip(), to.port());
        if libc::connect(fd, (&peer as *const libc::sockaddr_in).cast(), size) != 0 {
            libc::close(fd);
            return None;
        }
        Some(TcpStream::from_raw_fd(fd))
    }
}

/// What a slow client is slow to send.
#[derive(Clone, Copy)]
enum Slow {
    /// A request's head, never finished.
    Head,
    /// A request's body: the head whole, then the 1000 bytes it announces.
    Body,
    /// A request's body: the head and 20,000 of the 100,000 bytes it announces at once, then
    /// the rest a byte at a time.
    BurstThenBody,
}

/// Until `stop`: a connection from `from` that sends a byte every 200 ms (of a request's
/// head, or of its body after the head), reopened 100 ms after the server closes it.
fn slow_client(
    to: SocketAddrV4,
    from: Ipv4Addr,
    slow: Slow,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let head = b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaaaa";
        let whole_head = b"POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: \
                           application/json\r\nContent-Length: 1000\r\n\r\n";
        let burst = String::from_utf8_lossy(whole_head).replace("1000", "100000");
        let burst = [burst.as_bytes(), &[b' '; 20_000]].concat();
        let (start, trickled): (&[u8], &[u8]) = match slow {
            Slow::Head => (b"", head),
            Slow::Body => (whole_head, b" "),
            Slow::BurstThenBody => (&burst, b" "),
        };
        while !stop.load(Ordering::Relaxed) {
            if let Some(mut stream) = connect_from(to, from) {
                if stream.write_all(start).is_err() {
                    continue;
                }
                stream.set_nonblocking(true).unwrap();
                let mut buffer = [0u8; 512];
                for &byte in trickled.iter().cycle() {
                    if stop.load(Ordering::Relaxed) || stream.write_all(&[byte]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                    match stream.read(&mut buffer) {
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        // Closed, shed, or answered 503.
                        _ => break,
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

/// A real client's requests, one every 250 ms for `seconds`, alongside `count` clients slow
/// to send `slow`, from 127.0.0.2 or spread over `addresses` addresses from there on: each
/// request's status and how long it took.
fn served_beside_slow_clients(
    server: &Server,
    (count, slow, addresses): (usize, Slow, u8),
    seconds: u64,
) -> Vec<(u16, Duration)> {
    let stop = Arc::new(AtomicBool::new(false));
    let attackers: Vec<_> = (0..count)
        .map(|i| {
            let from = Ipv4Addr::new(127, 0, 0, 2 + (i % usize::from(addresses)) as u8);
            slow_client(address(server), from, slow, stop.clone())
        })
        .collect();
    // Let them take what they can first.
    std::thread::sleep(Duration::from_millis(1500));
    let mut answers = Vec::new();
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        let started = Instant::now();
        let (status, _) = post_json(
            &server.url("/v1/translate"),
            &json!({ "q": "ich", "max_len": 3 }),
        );
        answers.push((status, started.elapsed()));
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, Ordering::Relaxed);
    for attacker in attackers {
        attacker.join().unwrap();
    }
    answers
}

#[test]
fn a_slowloris_of_twice_the_connections_from_one_address_keeps_to_its_share() {
    // Its share: a quarter of 8 by default.
    let server = Server::start(&["--max-connections", "8", "--header-timeout-ms", "3000"]);
    let answers = served_beside_slow_clients(&server, (16, Slow::Head, 1), 5);
    assert_all_served(&answers);
}

#[test]
fn a_slowloris_holding_every_connection_is_shed_for_real_clients() {
    // One client may hold them all: the real one gets in by shedding the connection that
    // has waited longest for its head.
    let server = Server::start(&[
        "--max-connections",
        "8",
        "--max-connections-per-client",
        "8",
        "--header-timeout-ms",
        "3000",
    ]);
    let answers = served_beside_slow_clients(&server, (16, Slow::Head, 1), 5);
    assert_all_served(&answers);
}

#[test]
fn bodies_trickling_in_from_many_addresses_are_shed_for_real_clients() {
    // Eight addresses, each at its share of 8 connections, send bodies at 5 bytes a second:
    // every connection is answering a request, none waits for a head. Before, the real
    // client got 503 until the request timeout (30 s) freed one.
    let server = Server::start(&["--max-connections", "8", "--header-timeout-ms", "3000"]);
    let answers = served_beside_slow_clients(&server, (16, Slow::Body, 8), 5);
    assert_all_served(&answers);
}

#[test]
fn bodies_that_burst_then_trickle_are_shed_for_real_clients() {
    // A burst bought standing for good when slowness was the average since the body began:
    // 20,000 bytes held a connection 40 s.
    let server = Server::start(&["--max-connections", "8", "--header-timeout-ms", "3000"]);
    let answers = served_beside_slow_clients(&server, (16, Slow::BurstThenBody, 8), 5);
    // Sixteen threads bursting 20 KB each time they get in keep the slots young: a connection
    // can be shed for the real client only once its burst's standing has run out (a second),
    // so now and then none is old enough and the real client is told to retry (503 with
    // Retry-After: 1). Never twice in a row, and at most one time in ten.
    assert!(answers.len() >= 10, "{answers:?}");
    let refused = answers.iter().filter(|(status, _)| *status == 503).count();
    assert!(refused * 10 <= answers.len(), "{answers:?}");
    for pair in answers.windows(2) {
        assert!(pair.iter().any(|(status, _)| *status == 200), "{answers:?}");
    }
    for (status, took) in &answers {
        assert!(*status == 200 || *status == 503, "{answers:?}");
        assert!(*took < Duration::from_secs(2), "{answers:?}");
    }
}

fn assert_all_served(answers: &[(u16, Duration)]) {
    assert!(answers.len() >= 10, "{answers:?}");
    for (status, took) in answers {
        assert_eq!(*status, 200, "{answers:?}");
        assert!(*took < Duration::from_secs(2), "{answers:?}");
    }
}
