//! Any bytes as the body of an agent or workflow request: the input shapes, the options and the
//! workflow bodies are read into a value or refused with an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

use agentry_app::input::{parse_input, parse_options};
use agentry_app::wire::{ExecuteRequest, ResumeRequest, SuspendRequest};

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        if let Ok(messages) = parse_input(v.get("input")) {
            assert!(!messages.is_empty());
        }
        let _ = parse_options(v.get("options"));
        // A chat transport's `messages` takes the place of `input`.
        let _ = parse_input(v.get("messages"));
        // The whole body as `input` (a string or an array of messages).
        let _ = parse_input(Some(&v));
    }
    let _ = serde_json::from_slice::<ExecuteRequest>(data);
    let _ = serde_json::from_slice::<ResumeRequest>(data);
    let _ = serde_json::from_slice::<SuspendRequest>(data);
});
