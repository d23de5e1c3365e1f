//! The resolver against its rule: layering, blame, every bound's message.

use super::*;

/// Settings named as a command line would name them.
const FLAGS: SettingNames = SettingNames {
    beam: "--beam",
    length_penalty: "--length-penalty",
    max_len: "--max-len",
    n_best: "--n-best",
};

/// `requests` settled on a model of 10 target tokens and 64 positions, behind a door whose
/// widest beam is `door_beam`.
fn resolve(
    requests: &[DecodeRequest],
    door_beam: Option<usize>,
) -> Result<DecodeSettings, Refused> {
    DecodeSettings::settle(
        &DecodeConfig::default(),
        requests.to_vec(),
        10,
        64,
        door_beam,
    )
}

/// A request that sets nothing yet.
fn asks() -> DecodeRequest {
    DecodeRequest::by(FLAGS)
}

/// `request` named as `names` says.
fn named(request: DecodeRequest, names: SettingNames) -> DecodeRequest {
    DecodeRequest { names, ..request }
}

fn flags(request: DecodeRequest) -> DecodeRequest {
    named(request, FLAGS)
}

#[test]
fn each_layer_overrides_the_ones_below_setting_by_setting() {
    let saved = DecodeConfig {
        beam: 4,
        length_penalty: 0.6,
        max_len: Some(30),
        ..DecodeConfig::default()
    };
    let asked = DecodeRequest {
        beam: Some(2),
        ..asks()
    };
    let options = resolve(
        &[DecodeRequest::of_config(&saved, "c.toml"), flags(asked)],
        None,
    )
    .unwrap();
    assert_eq!(
        options,
        DecodeSettings {
            beam: 2,
            length_penalty: 0.6,
            max_len: Some(30),
            n_best: 1,
            ..DecodeSettings::default()
        }
    );
    assert_eq!(resolve(&[], None).unwrap(), DecodeSettings::default());
}

#[test]
fn every_bound_is_refused_by_the_name_its_layer_uses() {
    let too_wide = DecodeRequest {
        beam: Some(13),
        ..asks()
    };
    let error = resolve(&[flags(too_wide.clone())], None)
        .unwrap_err()
        .message;
    assert!(
        error.starts_with("--beam 13 is more than the 10 target tokens"),
        "{error}"
    );
    let error = resolve(&[named(too_wide, FIELDS)], None)
        .unwrap_err()
        .message;
    assert!(error.starts_with("beam 13 is more than"), "{error}");
    let saved = DecodeConfig {
        beam: 11,
        ..DecodeConfig::default()
    };
    let error = resolve(&[DecodeRequest::of_config(&saved, "run/config.toml")], None)
        .unwrap_err()
        .message;
    assert!(
        error.starts_with("decode.beam = 11 in run/config.toml is more"),
        "{error}"
    );
    let five = DecodeRequest {
        beam: Some(5),
        ..asks()
    };
    let error = resolve(&[named(five, FIELDS)], Some(4))
        .unwrap_err()
        .message;
    assert!(
        error.starts_with("beam 5 is wider than this server's limit of 4"),
        "{error}"
    );
    let huge_alpha = DecodeRequest {
        length_penalty: Some(1e39),
        ..asks()
    };
    let error = resolve(&[flags(huge_alpha)], None).unwrap_err().message;
    assert!(
        error.starts_with(
            "--length-penalty 1e39 would take the length penalty ((5 + len) / 6)^alpha out \
             of f32's range at the model's 64 positions; use a value between -32.75 and \
             32.75"
        ),
        "{error}"
    );
    let long = DecodeRequest {
        max_len: Some(65),
        ..asks()
    };
    let error = resolve(&[flags(long.clone())], None).unwrap_err().message;
    assert!(error.contains("--max-len 65 is more than the model's 64 positions"));
    assert_eq!(
        resolve(
            &[flags(DecodeRequest {
                max_len: Some(64),
                ..long
            })],
            None
        )
        .unwrap()
        .max_len,
        Some(64)
    );
}

#[test]
fn more_hypotheses_widen_a_beam_set_below_but_not_the_same_layers() {
    let alternatives = DecodeRequest {
        n_best: Some(3),
        ..asks()
    };
    let lt = named(alternatives, LIBRETRANSLATE_FIELDS);
    let options = resolve(std::slice::from_ref(&lt), None).unwrap();
    assert_eq!((options.beam, options.n_best), (3, 3));
    let wide_default = DecodeConfig {
        beam: 5,
        ..DecodeConfig::default()
    };
    let options = resolve(&[DecodeRequest::of_config(&wide_default, "c"), lt], None).unwrap();
    assert_eq!((options.beam, options.n_best), (5, 3));
    let both = DecodeRequest {
        beam: Some(2),
        n_best: Some(3),
        ..asks()
    };
    let error = resolve(&[named(both, FIELDS)], None).unwrap_err().message;
    assert!(error.starts_with("n_best 3 is more than beam 2"), "{error}");
    let many = DecodeRequest {
        n_best: Some(11),
        ..asks()
    };
    let error = resolve(&[named(many, LIBRETRANSLATE_FIELDS)], None)
        .unwrap_err()
        .message;
    assert_eq!(
        error,
        "alternatives needs a beam of 11 (one hypothesis per beam), and that is more than \
         the 10 target tokens the model chooses from; ask for fewer (alternatives)"
    );
}

#[test]
fn a_bad_value_a_higher_layer_replaces_is_never_checked_and_blame_falls_on_its_layer() {
    let saved = DecodeConfig {
        beam: 99,
        length_penalty: 1e39,
        max_len: Some(500),
        ..DecodeConfig::default()
    };
    let config = DecodeRequest::of_config(&saved, "ck/config.toml");
    let error = resolve(std::slice::from_ref(&config), None).unwrap_err();
    assert!(error.in_config, "{error}");
    let every_flag = DecodeRequest {
        beam: Some(2),
        length_penalty: Some(0.6),
        max_len: Some(10),
        n_best: None,
        ..asks()
    };
    let options = resolve(&[config.clone(), flags(every_flag)], None).unwrap();
    assert_eq!((options.beam, options.length_penalty), (2, 0.6));
    let bad_flag = DecodeRequest {
        beam: Some(2),
        length_penalty: Some(0.6),
        max_len: Some(65),
        n_best: None,
        ..asks()
    };
    let error = resolve(&[config, flags(bad_flag)], None).unwrap_err();
    assert!(
        !error.in_config && error.message.starts_with("--max-len 65"),
        "{error}"
    );
}
