//! A `transformer serve` process on loopback and a real HTTP client (ureq) for the tests
//! that talk to it: every request has a client timeout.
#![allow(dead_code)] // not every test crate serves

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

use super::{succeeded, transformer};

/// The tiny model trained once for every test of this file.
pub fn tiny_checkpoint() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-tiny");
        let _ = std::fs::remove_dir_all(&dir);
        succeeded(
            transformer()
                .args(["train", "--device", "cpu", "--quiet", "--config"])
                .arg("configs/tiny.toml")
                .arg("--out")
                .arg(&dir),
        );
        dir
    })
}

/// A running server, killed when dropped.
pub struct Server {
    child: Child,
    pub url: String,
    stderr: Mutex<BufReader<ChildStderr>>,
}

impl Server {
    /// A server of the tiny model, with `extra` arguments.
    pub fn start(extra: &[&str]) -> Self {
        Self::start_with(tiny_checkpoint(), extra)
    }

    /// A server of `checkpoint`, with `extra` arguments.
    pub fn start_with(checkpoint: &Path, extra: &[&str]) -> Self {
        Self::start_env(checkpoint, extra, &[])
    }

    /// A server of `checkpoint`, with `extra` arguments and the environment variables `env`.
    // Once it listens the child belongs to `Server`, whose drop kills and reaps it; before
    // that only a failing test leaves it behind.
    #[allow(clippy::zombie_processes)]
    pub fn start_env(checkpoint: &Path, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_transformer"))
            .args(["serve", "--device", "cpu", "--port", "0", "--checkpoint"])
            .arg(checkpoint)
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            if stderr.read_line(&mut line).unwrap() == 0 {
                let _ = child.kill();
                let _ = child.wait();
                panic!("serve exited before listening");
            }
            if let Some(at) = line.find("http://") {
                let url = line[at..].split_whitespace().next().unwrap().to_string();
                return Self {
                    child,
                    url,
                    stderr: Mutex::new(stderr),
                };
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Sends SIGTERM and returns the exit status and the rest of stderr.
    pub fn stop(self) -> (std::process::ExitStatus, String) {
        self.stop_after_signals(1)
    }

    /// Sends SIGTERM, and again a moment later, and returns as `stop` does.
    pub fn stop_twice(self) -> (std::process::ExitStatus, String) {
        self.stop_after_signals(2)
    }

    fn stop_after_signals(mut self, count: usize) -> (std::process::ExitStatus, String) {
        for i in 0..count {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(300));
            }
            assert_eq!(
                unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) },
                0
            );
        }
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut *self.stderr.lock().unwrap(), &mut rest).unwrap();
        (self.child.wait().unwrap(), rest)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// Status and body of a POST.
pub fn post(url: &str, content_type: &str, body: &str) -> (u16, String) {
    let mut response = agent()
        .post(url)
        .header("Content-Type", content_type)
        .send(body)
        .unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    (response.status().as_u16(), text)
}

pub fn post_json(url: &str, body: &Value) -> (u16, Value) {
    let (status, text) = post(url, "application/json", &body.to_string());
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub fn get(url: &str) -> (u16, Vec<u8>) {
    let mut response = agent().get(url).call().unwrap();
    let bytes = response.body_mut().read_to_vec().unwrap();
    (response.status().as_u16(), bytes)
}

/// An error answer: the status, and its `error` message on one line.
pub fn assert_error(status: u16, body: &str, want_status: u16, want_in_message: &str) {
    assert_eq!(status, want_status, "{body}");
    let body: Value = serde_json::from_str(body).unwrap();
    let message = body["error"].as_str().unwrap();
    assert!(!message.contains('\n'), "{message}");
    assert!(
        message.contains(want_in_message),
        "{message:?} lacks {want_in_message:?}"
    );
}
