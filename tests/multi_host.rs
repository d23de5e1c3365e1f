//! Data-parallel training across two hosts, for real: two network namespaces joined by a veth
//! pair stand for two machines. `mpirun` starts in host A, launches host B's rank through
//! OpenMPI's remote launcher (scripts/netns-rsh.sh in place of ssh), and the ranks talk over
//! TCP on the pair only (`--mca btl tcp,self`: no shared memory between the "hosts"). Two hosts
//! log the losses of one process accumulating two batches; a run stopped with Ctrl-C resumes
//! to them; a rank that stops answering ends the job after the collective timeout, with one
//! line that says so; and the link cut mid-run ends the job on both hosts within
//! [`CUT_BOUND`], `last/` still translating. The MPI jobs run entirely inside the namespaces
//! the tests make (the one-process runs and `translate` run outside, using no network), and
//! the namespaces are deleted at the end, passed or failed.
//!
//! Needs root (`ip netns`), as CI has; without root and without `CI` set, each test says why
//! it did nothing and passes. Built only with `--features mpi`:
//! `cargo test --release --features mpi --test multi_host`.
#![cfg(feature = "mpi")]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::data_parallel::{ran, step_losses, train_args, write_config, write_pairs};
use common::{succeeded, transformer};

/// How soon after the link between the hosts is cut the job has ended on both of them: OpenMPI
/// declares the other host's daemon lost after [`KEEPALIVE`]'s probes go unanswered (at most
/// 10 + 3 x 5 s), then stops every rank (26.6 s measured on 2 cores, also with the
/// distributed tests running alongside); the rest is slack for a loaded machine.
const CUT_BOUND: Duration = Duration::from_secs(60);

/// TCP keepalive on OpenMPI's own connections between mpirun and the other hosts' daemons
/// (the README's advice for several hosts): a probe after 10 s of silence, three unanswered
/// 5 s apart and the host is lost. On OpenMPI's defaults (300 s, 9 x 20 s) the same cut took
/// 487 s to notice.
const KEEPALIVE: [&str; 6] = [
    "oob_tcp_keepalive_time",
    "10",
    "oob_tcp_keepalive_intvl",
    "5",
    "oob_tcp_keepalive_probes",
    "3",
];

/// OpenMPI's remote launcher for namespaces.
const AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/netns-rsh.sh");

/// Two hosts: network namespaces A (mpirun and rank 0) and B (rank 1), each with `lo` up,
/// joined by one veth pair on a private /24 and nothing else. Dropping it kills whatever still
/// runs in them and deletes both, which deletes the pair.
struct Hosts {
    a: Host,
    b: Host,
    subnet: String,
    /// What the launcher wrote: one line per process it started (see scripts/netns-rsh.sh).
    launches: tempfile::NamedTempFile,
}

struct Host {
    namespace: String,
    veth: String,
    address: String,
}

impl Hosts {
    /// Two fresh hosts, named after this process and a counter; `None` (with the reason on
    /// stderr) where namespaces cannot be made, not as root, and not in CI.
    fn create() -> Option<Self> {
        static MADE: AtomicU32 = AtomicU32::new(0);
        let pid = std::process::id();
        let made = MADE.fetch_add(1, Ordering::Relaxed);
        let id = format!("{pid}x{made}");
        let net = pid.wrapping_mul(8).wrapping_add(made) % 250;
        let host = |side: &str, last: u8| Host {
            // Names of at most 15 bytes (interfaces' limit): "mh" + pid + "x" + count + side.
            namespace: format!("mh{id}{side}"),
            veth: format!("mh{id}{side}"),
            address: format!("10.231.{net}.{last}"),
        };
        let (a, b) = (host("a", 1), host("b", 2));
        if let Err(error) = ip(&["netns", "add", &a.namespace]) {
            return unavailable(&error);
        }
        // From here on, dropping `hosts` deletes whatever was made.
        let hosts = Self {
            a,
            b,
            subnet: format!("10.231.{net}.0/24"),
            launches: tempfile::NamedTempFile::new().unwrap(),
        };
        let (a, b) = (&hosts.a, &hosts.b);
        ip(&["netns", "add", &b.namespace]).unwrap();
        // The pair is made in the namespaces: it never appears on this machine's own network.
        ip(&[
            "link",
            "add",
            &a.veth,
            "netns",
            &a.namespace,
            "type",
            "veth",
            "peer",
            "name",
            &b.veth,
            "netns",
            &b.namespace,
        ])
        .unwrap();
        for host in [a, b] {
            let address = format!("{}/24", host.address);
            host.ip(&["addr", "add", &address, "dev", &host.veth]);
            host.ip(&["link", "set", &host.veth, "up"]);
            host.ip(&["link", "set", "lo", "up"]);
        }
        Some(hosts)
    }

    /// `mpirun -np 2 OPTIONS transformer` with rank 0 in A and rank 1 in B, over TCP on the
    /// pair only.
    fn mpirun(&self, options: &[&str]) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.a.namespace, "mpirun"])
            .args(["--oversubscribe", "-np", "2", "-H"])
            .arg(format!("{}:1,{}:1", self.a.address, self.b.address))
            // TCP only: shared memory would join the "hosts" through this machine's memory.
            .args(["--mca", "btl", "tcp,self"])
            .args(["--mca", "btl_tcp_if_include", &self.subnet])
            .args(["--mca", "oob_tcp_if_include", &self.subnet])
            .args(["--mca", "plm_rsh_agent", AGENT]);
        for pair in KEEPALIVE.chunks(2) {
            command.arg("--mca").args(pair);
        }
        command
            .args(["-x", "RAYON_NUM_THREADS=1"])
            // OpenMPI refuses to start as root without both (CI runs as root).
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env(
                "NETNS_RSH_HOSTS",
                format!(
                    "{}={} {}={}",
                    self.a.address, self.a.namespace, self.b.address, self.b.namespace
                ),
            )
            .env("NETNS_RSH_LOG", self.launches.path())
            .env_remove("TRANSFORMER_COLLECTIVE_TIMEOUT_S")
            .args(options)
            .arg(assert_cmd::cargo::cargo_bin("transformer"));
        command
    }

    /// Checks that the launcher started `jobs` processes, each in B's network namespace (the
    /// kernel's inode of it, as /run/netns/B names it): rank 1 ran on the other "host".
    fn assert_launched_in_b(&self, jobs: usize) {
        let inode = std::fs::metadata(format!("/run/netns/{}", self.b.namespace))
            .unwrap()
            .ino();
        let expected = format!("{} {} net:[{inode}]", self.b.address, self.b.namespace);
        let log = std::fs::read_to_string(self.launches.path()).unwrap();
        assert_eq!(log.lines().collect::<Vec<_>>(), vec![expected; jobs]);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for host in [&self.a, &self.b] {
            if !Path::new("/run/netns").join(&host.namespace).exists() {
                continue;
            }
            host.kill_everything();
            if let Err(error) = ip(&["netns", "delete", &host.namespace]) {
                eprintln!("warning: {error}");
            }
        }
    }
}

impl Host {
    /// `ip -n NAMESPACE args`, which must succeed.
    fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", &self.namespace];
        all.extend(args);
        ip(&all).unwrap();
    }

    /// The processes in this namespace.
    fn pids(&self) -> Vec<i32> {
        let Ok(output) = Command::new("ip")
            .args(["netns", "pids", &self.namespace])
            .output()
        else {
            return Vec::new();
        };
        String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect()
    }

    /// The processes in this namespace whose command is `name`.
    fn processes_named(&self, name: &str) -> Vec<i32> {
        self.pids()
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim_end() == name)
            })
            .collect()
    }

    /// Kills every process in this namespace (only this test's processes enter it) and waits
    /// until they are gone.
    fn kill_everything(&self) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            let pids = self.pids();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                // SAFETY: kill(2) on a process in a namespace this test made.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("warning: processes still run in {}", self.namespace);
    }

    /// Bytes this host's end of the pair has sent.
    fn bytes_sent(&self) -> u64 {
        let output = Command::new("ip")
            .args([
                "-n",
                &self.namespace,
                "-s",
                "-j",
                "link",
                "show",
                "dev",
                &self.veth,
            ])
            .output()
            .unwrap();
        let links: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        links[0]["stats64"]["tx"]["bytes"].as_u64().unwrap()
    }
}

/// `ip args`: its stderr when it fails.
fn ip(args: &[&str]) -> Result<(), String> {
    let output = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    match output.status.success() {
        true => Ok(()),
        false => Err(format!(
            "`ip {}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}

/// No namespaces: a failure as root or in CI (which runs as root), a note elsewhere.
fn unavailable(error: &str) -> Option<Hosts> {
    // SAFETY: geteuid(2) has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root || std::env::var_os("CI").is_some() {
        panic!(
            "cannot make the test's network namespaces ({error}); the multi-host tests need \
             root (CAP_NET_ADMIN), as CI has"
        );
    }
    eprintln!("skipped: not root and CI is unset, so no network namespaces ({error})");
    None
}

fn assert_same_losses(alone: &[(u64, f64)], together: &[(u64, f64)]) {
    assert_eq!(alone.len(), together.len(), "{alone:?}\n{together:?}");
    for ((step, a), (other, b)) in alone.iter().zip(together) {
        assert_eq!(step, other);
        assert!(
            (a - b).abs() < 1e-6,
            "step {step}: {a} alone, {b} on two hosts"
        );
    }
}

/// The bytes of a step's f32 gradients: every weight of a checkpoint but the fixed position
/// tables (`pe`, buffers that are not trained).
fn gradient_bytes(weights: &Path) -> u64 {
    candle_core::safetensors::load(weights, &candle_core::Device::Cpu)
        .unwrap()
        .iter()
        .filter(|(name, _)| !name.ends_with(".pe"))
        .map(|(_, tensor)| 4 * tensor.elem_count() as u64)
        .sum()
}

/// `job`'s stderr, read on a thread so that a full pipe never stalls the job.
fn stderr_of(job: &mut Child) -> std::thread::JoinHandle<String> {
    let mut pipe = job.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
        text
    })
}

/// Waits for `job` to end, at most `bound` after `since`.
fn ended_within(job: &mut Child, since: Instant, bound: Duration) -> ExitStatus {
    loop {
        if let Some(status) = job.try_wait().unwrap() {
            return status;
        }
        if since.elapsed() > bound {
            let _ = job.kill();
            panic!("the job still runs {bound:?} later");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `job` has written a checkpoint in `run`/last/.
fn wait_for_checkpoint(job: &mut Child, run: &Path) {
    let waited = Instant::now();
    while !run.join("last/training_state.json").exists() {
        if let Some(status) = job.try_wait().unwrap() {
            panic!("the job ended ({status}) before its first checkpoint");
        }
        assert!(waited.elapsed() < Duration::from_secs(120), "no checkpoint");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_hosts_over_tcp_log_the_losses_of_one_process_accumulating_two_batches() {
    let Some(hosts) = Hosts::create() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    let (single, two) = (dir.path().join("single"), dir.path().join("two"));
    succeeded(transformer().args(train_args(&write_config(dir.path(), &pairs, 2, 3), &single)));
    ran(hosts
        .mpirun(&[])
        .args(train_args(&write_config(dir.path(), &pairs, 1, 3), &two)));
    let together = step_losses(&two);
    assert!(together.len() >= 9, "{together:?}");
    assert_same_losses(&step_losses(&single), &together);
    hosts.assert_launched_in_b(1);
    // Each step's gradient sum crossed the pair: host B sent at least half of the weights'
    // bytes a step (f32 gradients of every weight, in OpenMPI's all-reduce of two ranks).
    let weights = gradient_bytes(&two.join("last/model.safetensors"));
    let sent = hosts.b.bytes_sent();
    assert!(
        sent >= together.len() as u64 * weights / 2,
        "host B sent {sent} bytes in {} steps of {weights} bytes of gradients",
        together.len()
    );
}

#[test]
fn a_two_host_run_stopped_with_ctrl_c_resumes_to_the_losses_of_one_process() {
    let Some(hosts) = Hosts::create() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    // 30 epochs of 7 steps: Ctrl-C after step 10 lands mid-run.
    let (single, run) = (dir.path().join("single"), dir.path().join("run"));
    succeeded(transformer().args(train_args(
        &write_config(dir.path(), &pairs, 2, 30),
        &single,
    )));
    let mut job = hosts
        .mpirun(&[])
        .args(train_args(&write_config(dir.path(), &pairs, 1, 30), &run))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(job.stderr.take().unwrap()));
    let started = Instant::now();
    loop {
        let line = lines.next().expect("the run prints progress").unwrap();
        if line.starts_with("step 10/") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "no progress");
    }
    // One rank trains on each host.
    assert_eq!(hosts.a.processes_named("transformer").len(), 1);
    assert_eq!(hosts.b.processes_named("transformer").len(), 1);
    // SAFETY: kill(2) on the mpirun this test started (`ip netns exec` execs it).
    assert_eq!(unsafe { libc::kill(job.id() as i32, libc::SIGINT) }, 0);
    let interrupted = Instant::now();
    let _ = lines.count();
    job.wait().unwrap();
    assert!(interrupted.elapsed() < Duration::from_secs(30));
    let state = std::fs::read_to_string(run.join("last/training_state.json")).unwrap();
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    let stopped_at = state["position"]["step"].as_u64().unwrap();
    let alone = step_losses(&single);
    assert!(
        (4..alone.len() as u64).contains(&stopped_at),
        "stopped at step {stopped_at} of {}",
        alone.len()
    );
    ran(hosts
        .mpirun(&[])
        .args(["train", "--device", "cpu", "--resume"])
        .arg(&run));
    assert_same_losses(&alone, &step_losses(&run));
    hosts.assert_launched_in_b(2);
}

#[test]
fn a_rank_that_stops_answering_ends_the_job_after_the_collective_timeout_with_one_clear_line() {
    let Some(hosts) = Hosts::create() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    let run = dir.path().join("run");
    let mut job = hosts
        .mpirun(&["-x", "TRANSFORMER_COLLECTIVE_TIMEOUT_S=5"])
        .args(train_args(
            &write_config(dir.path(), &pairs, 1, 100_000),
            &run,
        ))
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = stderr_of(&mut job);
    wait_for_checkpoint(&mut job, &run);
    let rank_1 = hosts.b.processes_named("transformer");
    assert_eq!(rank_1.len(), 1, "{rank_1:?}");
    // SAFETY: kill(2) on a process in a namespace this test made.
    assert_eq!(unsafe { libc::kill(rank_1[0], libc::SIGSTOP) }, 0);
    let stopped = Instant::now();
    let status = ended_within(&mut job, stopped, Duration::from_secs(5 + 30));
    assert!(!status.success());
    let stderr = stderr.join().unwrap();
    // One line from the rank left waiting. (mpirun wakes the stopped rank to end it, with
    // SIGCONT, and it may say the same of its own call before it goes.)
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("error:"))
        .collect();
    assert_eq!(
        errors
            .iter()
            .filter(|line| line.contains("rank 0 "))
            .count(),
        1,
        "{stderr}"
    );
    assert!(errors[0].starts_with("error: rank 0 "), "{stderr}");
    assert!(errors.len() <= 2, "{stderr}");
    for needle in [
        "error: rank 0 of 2 waited ",
        " s for the other ranks in ",
        "the network between the hosts",
        "last/",
        "--resume",
        "TRANSFORMER_COLLECTIVE_TIMEOUT_S",
    ] {
        assert!(
            errors[0].contains(needle),
            "{needle:?} not in {}",
            errors[0]
        );
    }
    let waited: f64 = errors[0]
        .split_whitespace()
        .nth(6)
        .and_then(|seconds| seconds.parse().ok())
        .unwrap();
    assert!((5.0..35.0).contains(&waited), "{}", errors[0]);
    // mpirun ended the stopped rank on the other host too.
    let waited = Instant::now();
    while !hosts.b.pids().is_empty() {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "host B still runs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_link_cut_mid_run_ends_the_job_on_both_hosts_within_60_s_and_last_still_translates() {
    let Some(hosts) = Hosts::create() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let pairs = write_pairs(dir.path());
    let run = dir.path().join("run");
    let mut job = hosts
        .mpirun(&[])
        .args(train_args(
            &write_config(dir.path(), &pairs, 1, 100_000),
            &run,
        ))
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = stderr_of(&mut job);
    wait_for_checkpoint(&mut job, &run);
    std::thread::sleep(Duration::from_millis(500));
    hosts.a.ip(&["link", "set", &hosts.a.veth, "down"]);
    let cut = Instant::now();
    let status = ended_within(&mut job, cut, CUT_BOUND);
    let ended = cut.elapsed();
    assert!(!status.success());
    let stderr = stderr.join().unwrap();
    assert!(
        stderr.contains("lost communication with a remote daemon")
            && stderr.contains(&hosts.b.address),
        "{stderr}"
    );
    // Host B's daemon lost mpirun too, and ended its rank and itself.
    while !hosts.b.pids().is_empty() {
        assert!(
            cut.elapsed() < CUT_BOUND,
            "host B still runs {CUT_BOUND:?} after the cut"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "the job ended {:.1} s after the cut, host B {:.1} s after it",
        ended.as_secs_f64(),
        cut.elapsed().as_secs_f64()
    );
    let output = succeeded(
        transformer()
            .args(["translate", "--device", "cpu", "--checkpoint"])
            .arg(run.join("last"))
            .arg("ich du"),
    );
    assert!(!output.stdout.is_empty());
}
