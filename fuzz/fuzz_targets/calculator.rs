//! The `calculate` tool's arithmetic on any text: an answer or an error, never a panic, a stack
//! overflow or a hang; over `MAX_EXPRESSION_CHARS` characters is always an error, and an answer is
//! always a finite number.
#![no_main]

use libfuzzer_sys::fuzz_target;

// A standalone module (std only): included by path, so the fuzz build does not pull in the
// server crate and its TLS stack.
#[allow(dead_code)]
#[path = "../../crates/agentry-server/src/calc.rs"]
mod calc;

fuzz_target!(|data: &[u8]| {
    let Ok(expr) = std::str::from_utf8(data) else {
        return;
    };
    match calc::evaluate(expr) {
        Ok(v) => {
            assert!(v.is_finite(), "{expr:?} gave {v}");
            assert!(
                expr.chars().count() <= calc::MAX_EXPRESSION_CHARS,
                "{expr:?} is over the limit yet evaluated"
            );
        }
        Err(e) => assert!(!e.is_empty()),
    }
});
