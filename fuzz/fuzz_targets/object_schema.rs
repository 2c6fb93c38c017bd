//! Any JSON as the `schema` of `/agents/:id/object`: the offline model builds an instance or
//! refuses the schema, never a panic, a hang or an allocation beyond the limits; an instance it
//! builds serialises to at most `MAX_GENERATED_BYTES`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

use agentry_agents::offline::instance_of;
use agentry_engine::schema::{MAX_GENERATED_BYTES, check_generation_limits};

fuzz_target!(|data: &[u8]| {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    // What the HTTP layer checks before a model sees the schema; the generator must hold the
    // limits on its own too, so it runs whatever the check says.
    let _ = check_generation_limits(&schema);
    let generated: Result<Value, String> = instance_of(&schema, "x");
    if let Ok(v) = generated {
        let bytes = serde_json::to_vec(&v).expect("a generated value serialises");
        assert!(
            bytes.len() as u64 <= MAX_GENERATED_BYTES,
            "{} bytes generated for {schema}",
            bytes.len()
        );
    }
});
