//! The emulator's write log (`GET /_emulator/writes`) read for the sharding promise: every
//! object written by one replica at a time. Used by the shards integration test and by the
//! chaos suite's sharded mode.

use std::collections::BTreeMap;

use serde_json::Value;

/// The objects that two replicas wrote at overlapping times, and how often an object's writer
/// changed. Every write must name its replica.
pub fn overlaps(writes: &[Value]) -> (Vec<String>, usize) {
    let mut by_object: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for write in writes {
        let writer = write["writer"].as_str().unwrap_or_default();
        assert!(!writer.is_empty(), "a write without its replica: {write}");
        by_object
            .entry(write["object"].as_str().unwrap_or_default())
            .or_default()
            .push(write);
    }
    let mut overlapping = Vec::new();
    let mut switches = 0;
    for (object, writes) in by_object {
        for pair in writes.windows(2) {
            if pair[0]["writer"] != pair[1]["writer"] {
                switches += 1;
            }
        }
        for (i, a) in writes.iter().enumerate() {
            for b in &writes[i + 1..] {
                let apart = a["ended_ms"].as_u64() < b["started_ms"].as_u64()
                    || b["ended_ms"].as_u64() < a["started_ms"].as_u64();
                if a["writer"] != b["writer"] && !apart {
                    overlapping.push(format!("{object}: {a} and {b}"));
                }
            }
        }
    }
    (overlapping, switches)
}

/// Panics when two replicas wrote one object at once; prints how many writes and changes of
/// writer the log holds.
pub fn assert_no_overlap(writes: &[Value]) {
    let (overlapping, switches) = overlaps(writes);
    println!(
        "write log: {} writes, {switches} changes of writer, {} overlapping",
        writes.len(),
        overlapping.len()
    );
    assert!(
        overlapping.is_empty(),
        "two replicas wrote one object at once:\n{}",
        overlapping.join("\n")
    );
}
