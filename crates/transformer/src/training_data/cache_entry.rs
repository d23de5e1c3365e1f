//! Writing a cache entry whole: filled in a hidden staging directory of its own, synced,
//! then published by one rename; staging that a killed run left is cleared.

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The files of an encoded corpus's entry: its ids, the offsets between its pairs, and what
/// it holds with the checksums of both.
pub(super) const IDS_FILE: &str = "ids.bin";
pub(super) const OFFSETS_FILE: &str = "offsets.bin";
pub(super) const META_FILE: &str = "meta.json";

/// Fills a hidden staging directory beside `dir` and renames it to `dir`: readers see a whole
/// entry or none. Another process that published the same entry first wins (its entry is the
/// same). Staging directories of processes no longer running are removed first.
pub(super) fn publish(
    dir: &Path,
    fill: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let parent = dir.parent().expect("cache entries have a parent");
    std::fs::create_dir_all(parent)?;
    remove_abandoned_staging(parent);
    let name = dir
        .file_name()
        .expect("named")
        .to_string_lossy()
        .into_owned();
    let staging = parent.join(format!(".{name}.staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir(&staging)?;
    let outcome = fill(&staging).and_then(|()| {
        File::open(&staging)?.sync_all()?;
        match std::fs::rename(&staging, dir) {
            Ok(()) => Ok(()),
            Err(_) if dir.join(META_FILE).is_file() => {
                std::fs::remove_dir_all(&staging)?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    });
    if outcome.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    outcome
}

/// Removes `.NAME.staging-PID` directories whose process has ended (killed mid-write).
pub(super) fn remove_abandoned_staging(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((_, pid)) = name.rsplit_once(".staging-") else {
            continue;
        };
        let alive = Path::new("/proc").join(pid).exists();
        if name.starts_with('.') && pid.parse::<u32>().is_ok() && !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

pub(super) fn write_synced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
}
