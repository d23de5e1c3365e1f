//! The encoded corpus: pairs in and out at either width, and offsets and ids that a
//! damaged cache entry could hold refused.

use super::*;
use crate::training_data::epoch_plan::stable_sort_by_length;

#[test]
fn pairs_come_back_as_they_went_in_at_either_width() {
    let pairs = vec![
        EncodedPair {
            src: vec![1, 70_000, 2],
            tgt: vec![1, 5, 2],
        },
        EncodedPair {
            src: vec![],
            tgt: vec![1, 2],
        },
    ];
    let wide = EncodedCorpus::from_pairs(&pairs, IdWidth::U32);
    assert_eq!(
        (wide.len(), wide.lens(0), wide.lens(1)),
        (2, (3, 3), (0, 2))
    );
    assert_eq!(wide.pair(0), pairs[0]);
    assert_eq!(wide.pair(1), pairs[1]);
    let narrow = EncodedCorpus::from_pairs(&pairs[1..], IdWidth::U16);
    assert_eq!(narrow.pair(0), pairs[1]);
    assert_eq!(wide.all_ids().count(), 8);
}

#[test]
fn offsets_that_do_not_match_the_ids_are_refused() {
    let mut offsets = Vec::new();
    for o in [0u64, 2, 5] {
        offsets.extend_from_slice(&o.to_le_bytes());
    }
    let short = EncodedCorpus::new(
        Bytes::Owned(vec![0; 8]),
        IdWidth::U16,
        Bytes::Owned(offsets),
        0,
    );
    assert!(short.is_err());
}

/// Offsets as `offsets.bin` holds them.
fn offsets(values: &[u64]) -> Bytes {
    Bytes::Owned(values.iter().flat_map(|o| o.to_le_bytes()).collect())
}

#[test]
fn offsets_that_go_backwards_are_refused_though_they_end_at_the_ids_end() {
    // Two pairs over 6 ids; a middle offset of 2^40 (or 1, before 3) made a span whose
    // length wrapped round, and the epoch plan asked for 34 GB.
    for middle in [1u64 << 40, 1] {
        let corpus = EncodedCorpus::new(
            Bytes::Owned(vec![0; 12]),
            IdWidth::U16,
            offsets(&[0, 3, middle, 4, 6]),
            0,
        );
        let err = corpus.err().expect("refused").to_string();
        assert!(err.contains("the offsets go backwards at pair"), "{err}");
    }
}

#[test]
fn offsets_raised_so_that_their_bytes_wrap_round_are_refused() {
    // Every offset but the first raised by 2^63: still going forwards, and the last
    // times the width (2) wraps round to the ids' 12 bytes.
    let high = 1u64 << 63;
    let corpus = EncodedCorpus::new(
        Bytes::Owned(vec![0; 12]),
        IdWidth::U16,
        offsets(&[0, high + 3, high + 3, high + 4, high + 6]),
        0,
    );
    let err = corpus.err().expect("refused").to_string();
    assert!(err.contains("the offsets end at id"), "{err}");
}

#[test]
fn ids_past_a_vocabulary_are_named_with_their_pair_and_side() {
    let pairs = vec![
        EncodedPair {
            src: vec![1, 5, 2],
            tgt: vec![1, 3, 2],
        },
        EncodedPair {
            src: vec![1, 2],
            tgt: vec![1, 65_535, 2],
        },
    ];
    let corpus = EncodedCorpus::from_pairs(&pairs, IdWidth::U16);
    corpus.check_ids(6, 65_536).unwrap();
    let err = corpus.check_ids(6, 60).unwrap_err().to_string();
    assert_eq!(
        err,
        "pair 1's target holds id 65535, past its vocabulary of 60"
    );
    let err = corpus.check_ids(5, 65_536).unwrap_err().to_string();
    assert_eq!(err, "pair 0's source holds id 5, past its vocabulary of 5");
}

#[test]
fn the_counting_sort_is_stable() {
    let items = [5u32, 3, 9, 1, 7, 2];
    let sorted = stable_sort_by_length(&items, |i| (i % 3) as usize);
    let mut expected = items.to_vec();
    expected.sort_by_key(|&i| i % 3);
    assert_eq!(sorted, expected);
}
