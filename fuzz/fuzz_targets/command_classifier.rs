//! The disaster classifier on any text: never panics, never hangs, and answers the same twice.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = clawsmith_sandbox::classify::check_command(text);
    let second = clawsmith_sandbox::classify::check_command(text);
    assert_eq!(
        first, second,
        "the classifier is not deterministic for {text:?}"
    );
});
