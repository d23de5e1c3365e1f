//! Any bytes as a TSV corpus or as the source side of parallel files: reading returns pairs or
//! an error, never panics, and every kept pair has two non-empty sides.
#![no_main]

use libfuzzer_sys::fuzz_target;
use transformer::config::CorpusSource;
use transformer::corpus::read_corpus;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let tsv = dir.path().join("pairs.tsv");
    std::fs::write(&tsv, data).unwrap();
    if let Ok((pairs, report)) = read_corpus(&CorpusSource::Tsv(tsv.clone())) {
        assert_eq!(report.kept, pairs.len());
        assert!(pairs.iter().all(|p| !p.src.is_empty() && !p.tgt.is_empty()));
    }
    let tgt = dir.path().join("tgt.txt");
    std::fs::write(&tgt, "one line\n").unwrap();
    let _ = read_corpus(&CorpusSource::Parallel { src: tsv, tgt });
});
