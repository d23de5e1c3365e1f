//! Which vector instructions the kernels may use: what this CPU has (CPUID, asked once), capped
//! by `TRANSFORMER_MAX_ISA` so that the paths of a smaller CPU run, and can be tested and
//! measured, on any larger one. Every kernel that picks instructions asks here
//! ([`Isa::runs`]), never CPUID directly.
//!
//! The levels are ordered as oneDNN's `ONEDNN_MAX_CPU_ISA` orders them: a cap of `avx2`
//! leaves AVX2 and FMA (a Zen 3, or Haswell to Comet Lake); `avx2-vnni` adds AVX-VNNI
//! (Alder Lake to Core Ultra: `vpdpbusd` on 256 bits); `avx512` adds AVX-512 F/BW/VL (Skylake
//! servers); `avx512-vnni`, `avx512-bf16` and `amx` add the rest of a Sapphire Rapids. A
//! level runs only where the CPU has it and the cap reaches it: a Zen 5 runs `avx512-bf16`
//! but not `avx2-vnni`'s VEX encoding unless it has that too (it does), whatever the cap.
//!
//! The cap covers our kernels. candle's own matrix products go through the gemm crate, which
//! asks CPUID itself: its AVX-512 kernels are compiled in by this crate's `gemm-avx512`
//! feature (on by default), so a build without that feature is what caps them at AVX2 + FMA
//! ([`gemm_isa`] says which a process runs).

use std::sync::OnceLock;

/// A level of vector instructions, smallest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// x86-64's baseline (SSE2), or any other architecture: plain Rust loops.
    Baseline,
    /// AVX2 and FMA.
    Avx2,
    /// AVX2, FMA and AVX-VNNI (VEX-encoded `vpdpbusd`).
    Avx2Vnni,
    /// AVX-512 F, BW and VL (with AVX2 and FMA).
    Avx512,
    /// AVX-512 VNNI (EVEX-encoded `vpdpbusd`).
    Avx512Vnni,
    /// AVX512-BF16 (`vdpbf16ps`).
    Avx512Bf16,
    /// AMX tiles (BF16 and INT8).
    Amx,
}

/// The variable that caps the levels the kernels use.
pub const CAP_VARIABLE: &str = "TRANSFORMER_MAX_ISA";

/// Every level, smallest first.
pub const ALL: [Isa; 7] = [
    Isa::Baseline,
    Isa::Avx2,
    Isa::Avx2Vnni,
    Isa::Avx512,
    Isa::Avx512Vnni,
    Isa::Avx512Bf16,
    Isa::Amx,
];

/// `TRANSFORMER_MAX_ISA` holds a value that names no level.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{CAP_VARIABLE}={value:?} is not an instruction set; use one of {}",
    names()
)]
pub struct UnknownIsa {
    pub value: String,
}

impl Isa {
    /// Its name in `TRANSFORMER_MAX_ISA`, logs and the benchmark's JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Avx2 => "avx2",
            Self::Avx2Vnni => "avx2-vnni",
            Self::Avx512 => "avx512",
            Self::Avx512Vnni => "avx512-vnni",
            Self::Avx512Bf16 => "avx512-bf16",
            Self::Amx => "amx",
        }
    }

    /// The level a name stands for: [`Isa::name`], any case, `_` for `-`; `avx_vnni` too.
    pub fn parse(value: &str) -> Result<Self, UnknownIsa> {
        let wanted = value.trim().to_ascii_lowercase().replace('_', "-");
        let wanted = match wanted.as_str() {
            "avx-vnni" => "avx2-vnni",
            "sse2" | "generic" => "baseline",
            other => other,
        };
        ALL.into_iter()
            .find(|isa| isa.name() == wanted)
            .ok_or_else(|| UnknownIsa {
                // Shown as given, cut short: an error line, not an echo of anything.
                value: match value.chars().nth(40) {
                    Some(_) => format!("{}...", value.chars().take(40).collect::<String>()),
                    None => value.to_string(),
                },
            })
    }

    /// Whether kernels of this level run here: the CPU has it and the cap reaches it.
    pub fn runs(self) -> bool {
        static RUNS: OnceLock<[bool; ALL.len()]> = OnceLock::new();
        RUNS.get_or_init(|| ALL.map(|isa| isa <= cap() && cpu_has(isa)))[self as usize]
    }

    /// Whether the CPU has this level's instructions, whatever the cap.
    pub fn on_this_cpu(self) -> bool {
        cpu_has(self)
    }
}

/// The highest level kernels use here (the cap, or below it what the CPU has).
pub fn best() -> Isa {
    ALL.into_iter()
        .rev()
        .find(|isa| isa.runs())
        .unwrap_or(Isa::Baseline)
}

/// The cap `TRANSFORMER_MAX_ISA` sets, if any; an error for a value that names no level.
pub fn requested_cap() -> Result<Option<Isa>, UnknownIsa> {
    // Empty or blank is unset, as for the shell's `VAR= command`.
    match std::env::var_os(CAP_VARIABLE).filter(|v| !v.to_string_lossy().trim().is_empty()) {
        None => Ok(None),
        Some(value) => Isa::parse(&value.to_string_lossy()).map(Some),
    }
}

/// The cap in force, read once: `TRANSFORMER_MAX_ISA`, or none (an unknown value is warned
/// about and caps nothing; the binary refuses it before any kernel runs).
pub fn cap() -> Isa {
    static CAP: OnceLock<Isa> = OnceLock::new();
    *CAP.get_or_init(|| match requested_cap() {
        Ok(cap) => cap.unwrap_or(Isa::Amx),
        Err(unknown) => {
            log::warn!("{unknown}; no cap applied");
            Isa::Amx
        }
    })
}

/// The level candle's matrix products (the gemm crate) run at here: AVX-512 where this build
/// compiles gemm's AVX-512 kernels in (`gemm-avx512`) and the CPU has AVX-512F, whatever the
/// cap; AVX2 + FMA where the CPU has FMA; else the baseline.
pub fn gemm_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if cfg!(feature = "gemm-avx512") && has!("avx512f") {
            return Isa::Avx512;
        }
        if has!("fma") {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

fn names() -> String {
    let names: Vec<_> = ALL.iter().map(|isa| isa.name()).collect();
    names.join(", ")
}

#[cfg(target_arch = "x86_64")]
fn cpu_has(isa: Isa) -> bool {
    use std::arch::is_x86_feature_detected as has;
    let avx2 = || has!("avx2") && has!("fma");
    let avx512 = || avx2() && has!("avx512f") && has!("avx512bw") && has!("avx512vl");
    match isa {
        Isa::Baseline => true,
        Isa::Avx2 => avx2(),
        Isa::Avx2Vnni => avx2() && has!("avxvnni"),
        Isa::Avx512 => avx512(),
        Isa::Avx512Vnni => avx512() && has!("avx512vnni"),
        Isa::Avx512Bf16 => avx512() && has!("avx512bf16"),
        // CPUID leaf 7: AMX-TILE (edx bit 24); the engines check their own kinds and whether
        // the operating system grants the tiles.
        Isa::Amx => avx512() && (std::arch::x86_64::__cpuid_count(7, 0).edx >> 24) & 1 == 1,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_has(isa: Isa) -> bool {
    isa == Isa::Baseline
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_reads_back_from_its_name_in_any_spelling() {
        for isa in ALL {
            assert_eq!(Isa::parse(isa.name()), Ok(isa));
            assert_eq!(
                Isa::parse(&isa.name().to_uppercase().replace('-', "_")),
                Ok(isa)
            );
        }
        assert_eq!(Isa::parse("AVX_VNNI"), Ok(Isa::Avx2Vnni));
        assert_eq!(Isa::parse(" avx2 "), Ok(Isa::Avx2));
        let wrong = Isa::parse("avx3").unwrap_err();
        assert_eq!(
            wrong.to_string(),
            "TRANSFORMER_MAX_ISA=\"avx3\" is not an instruction set; use one of baseline, avx2, \
             avx2-vnni, avx512, avx512-vnni, avx512-bf16, amx"
        );
    }

    #[test]
    fn the_best_level_runs_and_is_under_the_cap_and_on_this_cpu() {
        let best = best();
        assert!(best.runs() && best <= cap() && best.on_this_cpu());
        assert!(Isa::Baseline.runs());
        // Nothing above the cap runs, whatever the CPU has.
        assert!(ALL.iter().all(|isa| !isa.runs() || *isa <= cap()));
        if let Ok(Some(asked)) = requested_cap() {
            assert_eq!(cap(), asked);
        }
    }

    /// The paths of smaller CPUs are tested here too: this test binary runs its kernel tests
    /// again under each cap below what this CPU has (`TRANSFORMER_MAX_ISA`), so that a CI
    /// machine with AVX-512 tests the AVX2, AVX-VNNI and plain paths as well.
    #[test]
    fn the_kernel_tests_pass_under_every_cap_below_this_cpu() {
        // Only from the uncapped run: the runs it starts are capped.
        if std::env::var_os(CAP_VARIABLE).is_some() {
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let below: Vec<Isa> = ALL
            .into_iter()
            .filter(|isa| *isa < best() && isa.on_this_cpu())
            .collect();
        for isa in below {
            let run = std::process::Command::new(&exe)
                .args(["kernels::", "--test-threads=2"])
                .env(CAP_VARIABLE, isa.name())
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&run.stdout);
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert!(
                run.status.success(),
                "under {}:\n{stdout}\n{stderr}",
                isa.name()
            );
            let passed = stdout
                .lines()
                .find_map(|line| line.strip_prefix("test result: ok. "))
                .and_then(|rest| rest.split(' ').next()?.parse::<usize>().ok());
            assert!(
                passed.is_some_and(|n| n > 40),
                "under {}: {stdout}",
                isa.name()
            );
        }
    }
}
