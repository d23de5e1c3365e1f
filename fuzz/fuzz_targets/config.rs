//! Any text as a config file: parsing and validation return a config or an error, never panic,
//! and an accepted config survives a round trip through its resolved TOML.
#![no_main]

use libfuzzer_sys::fuzz_target;
use transformer::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = Config::parse(text, "fuzz.toml") {
        let resolved = config.to_toml().expect("a valid config serialises");
        let again = Config::parse(&resolved, "resolved.toml").expect("resolved TOML parses");
        assert_eq!(again.to_toml().unwrap(), resolved);
    }
});
