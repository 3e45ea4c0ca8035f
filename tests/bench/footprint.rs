//! `make bench` runs it first (test `footprint::bench_cache_footprint`, N=10,000): the bytes the
//! operator's watch cache holds per Ready Config, measured by counting this process's
//! allocations while N Configs as the apiserver serves them (a Ready status as aigw writes it,
//! its claim annotation, finalizer, create intent) are decoded, made the cached copy
//! ([`aigw::controller::process::as_cached`]) and put in a reflector store. Parts are measured
//! apart (metadata, spec, status) so a change to one shows where it lands. Requested bytes, not
//! the allocator's size classes: RSS is higher by the rounding and fragmentation.
//!
//! No control plane, no operator: seconds, in a debug build too (layouts are the same).
//! Writes `footprint.json` beside the other figures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use aigw::controller::driver::Managed;
use aigw::resources::Config;
use aigw::resources::config::{ConfigSpec, ConfigStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;

use super::*;

/// Counts the bytes held: every allocation adds its size, every free takes it off.
struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A Ready Config as the apiserver serves it to aigw's watch, after a create by installation
/// `aigw` (managedFields left out: the cache drops them first thing).
pub fn ready_config(i: usize) -> Value {
    let uuid = |salt: usize| format!("{:08x}-4f28-4b4d-8927-{:012x}", i, salt * 1_000_003 + i);
    json!({
        "apiVersion": "aigw.io/v1alpha1", "kind": "Config",
        "metadata": {
            "name": format!("c-{i:05}"), "namespace": "bench-config-7f3a2c",
            "uid": uuid(1), "resourceVersion": format!("{}", 100_000 + i), "generation": 1,
            "creationTimestamp": "2026-11-29T04:36:06Z",
            "finalizers": ["aigw.io/finalizer"],
            "annotations": {
                "aigw.io/installation": "aigw",
                "aigw.io/create-intent": format!("{{\"pendingCreate\":\"2026-11-29T04:36:06Z\",\"createAttempt\":{{\"name\":\"bench {i}\",\"bodyHash\":\"hmac-sha256:a6b191c79bc5e7be95f75d2f7ecb2a1222c829d152a4cd856a4e3eb95a1be320\",\"intent\":\"{}\"}}}}", uuid(2)),
            },
        },
        "spec": {"name": format!("bench {i}"), "config": document(i),
                 "deletionPolicy": "Delete", "managementPolicy": "Full"},
        "status": {
            "conditions": [
                {"lastTransitionTime": "2026-11-29T04:36:06Z", "message": "Config is in sync with the management API",
                 "observedGeneration": 1, "reason": "Reconciled", "status": "True", "type": "Ready"},
                {"lastTransitionTime": "2026-11-29T04:36:06Z", "message": "", "observedGeneration": 1,
                 "reason": "Reconciled", "status": "False", "type": "Reconciling"},
                {"lastTransitionTime": "2026-11-29T04:36:06Z", "message": "", "observedGeneration": 1,
                 "reason": "Reconciled", "status": "False", "type": "Stalled"},
            ],
            "createSettled": uuid(2),
            "history": [{"appliedAt": "2026-11-29T04:36:07Z", "generation": 1, "versionId": uuid(3)}],
            "id": uuid(4), "installation": "aigw", "lastAppliedAt": "2026-11-29T04:36:07Z",
            "observedGeneration": 1, "slug": format!("pc-bench-{i:06x}"), "versionId": uuid(3),
        },
    })
}

/// Bytes held per object after `make` ran N times, what it made kept alive.
fn per_object<T>(texts: &[Vec<u8>], make: impl Fn(&[u8]) -> T) -> f64 {
    let before = HELD.load(Ordering::Relaxed);
    let kept: Vec<T> = texts.iter().map(|text| make(text)).collect();
    let after = HELD.load(Ordering::Relaxed);
    let bytes = (after - before) as f64 - (kept.capacity() * std::mem::size_of::<T>()) as f64;
    drop(kept);
    bytes / texts.len() as f64 + std::mem::size_of::<T>() as f64
}

#[tokio::test]
async fn bench_cache_footprint() {
    let n: usize = support::env_or("N", 10_000);
    let texts: Vec<Vec<u8>> = (0..n)
        .map(|i| serde_json::to_vec(&ready_config(i)).expect("a Config as JSON"))
        .collect();
    let part = |name: &str| -> Vec<Vec<u8>> {
        texts
            .iter()
            .map(|t| {
                let v: Value = serde_json::from_slice(t).expect("JSON");
                serde_json::to_vec(&v[name]).expect("JSON")
            })
            .collect()
    };
    let cached = |text: &[u8]| {
        let mut config: Config = serde_json::from_slice(text).expect("a Config");
        aigw::controller::process::as_cached(&mut config, Config::prepare);
        config
    };
    let (metadata, spec, status) = (part("metadata"), part("spec"), part("status"));
    let meta_bytes = per_object(&metadata, |t| {
        let mut meta: ObjectMeta = serde_json::from_slice(t).expect("metadata");
        if let Some(a) = meta.annotations.as_mut() {
            a.remove("aigw.io/create-intent");
        }
        meta
    });
    let spec_bytes = per_object(&spec, |t| {
        serde_json::from_slice::<ConfigSpec>(t).expect("a spec")
    });
    let status_bytes = per_object(&status, |t| {
        serde_json::from_slice::<ConfigStatus>(t).expect("a status")
    });
    let object_bytes = per_object(&texts, cached);

    // The store: each object in an Arc, keyed by its ObjectRef.
    let (reader, mut writer) = reflector::store::<Config>();
    let before = HELD.load(Ordering::Relaxed);
    for text in &texts {
        writer.apply_watcher_event(&Event::Apply(cached(text)));
    }
    let store_bytes = (HELD.load(Ordering::Relaxed) - before) as f64 / n as f64;
    assert_eq!(reader.state().len(), n, "every Config is in the store");

    // The claim index the operator keeps beside the store, from the same events.
    let stores = aigw::controller::state::claims::StoreList::<Config>::default();
    let stream = stores.register(reader.clone());
    let objects: Vec<_> = reader.state();
    let before = HELD.load(Ordering::Relaxed);
    for object in &objects {
        stores.index_event(stream, &Event::Apply(Config::clone(object)));
    }
    let claims_bytes = (HELD.load(Ordering::Relaxed) - before) as f64 / n as f64;

    let figures = json!({
        "n": n,
        "bytes_per_object": {
            "metadata_as_cached": round(meta_bytes, 0),
            "spec": round(spec_bytes, 0),
            "status": round(status_bytes, 0),
            "config_as_cached": round(object_bytes, 0),
            "in_the_store": round(store_bytes, 0),
            "claim_index": round(claims_bytes, 0),
        },
        "size_of": {
            "Config": std::mem::size_of::<Config>(),
            "ObjectMeta": std::mem::size_of::<ObjectMeta>(),
            "ConfigSpec": std::mem::size_of::<ConfigSpec>(),
            "ConfigStatus": std::mem::size_of::<ConfigStatus>(),
        },
    });
    println!("{}", serde_json::to_string_pretty(&figures).expect("JSON"));
    let out = std::env::var("BENCH_OUT").unwrap_or_else(|_| "target/bench".into());
    std::fs::create_dir_all(&out).expect("the bench output folder");
    std::fs::write(
        format!("{out}/footprint.json"),
        serde_json::to_string_pretty(&figures).expect("JSON"),
    )
    .expect("writing footprint.json");
}
