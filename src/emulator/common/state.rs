//! What every route shares: the options, the caller's identity, request statistics, the fault
//! switches and the shutdown signal. One std `Mutex` per collection, never held across an await.

use std::{
    collections::{BTreeMap, HashMap},
    ops::Deref,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use tokio::sync::watch;

use super::{
    errors::EmulatorError,
    faults::{Faults, RateWindow},
    ids::new_id,
    options::EmulatorOptions,
};

/// What the routes of a kind with one store reach: the state every route shares (also through
/// `Deref`) and the kind's store.
pub struct KindState<S> {
    pub common: Arc<Common>,
    pub store: Arc<Mutex<S>>,
}

impl<S> Clone for KindState<S> {
    fn clone(&self) -> Self {
        Self {
            common: Arc::clone(&self.common),
            store: Arc::clone(&self.store),
        }
    }
}

impl<S> Deref for KindState<S> {
    type Target = Common;

    fn deref(&self) -> &Common {
        &self.common
    }
}

/// One write request as the write log keeps it (`GET /_emulator/writes`): which object, which
/// replica sent it (the `x-aigw-replica` header) and when it was in flight, in milliseconds
/// since the emulator started.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WriteRecord {
    /// The request's path; for a POST, the path and the `slug` (or `name`) of the body.
    pub object: String,
    pub method: String,
    pub writer: String,
    pub status: u16,
    pub started_ms: u64,
    pub ended_ms: u64,
}

/// How many writes the log keeps (the oldest go first).
pub const WRITE_LOG_CAP: usize = 500_000;

/// Counts per `"<METHOD> <path template>"`, then per status code.
pub type Stats = HashMap<String, BTreeMap<u16, u64>>;

pub struct Common {
    pub options: EmulatorOptions,
    /// The organisation every object belongs to (reads return this internal UUID).
    pub organisation_id: String,
    /// Workspace used when a create request names none.
    pub default_workspace_id: String,
    /// The user the bearer token stands for (`owner_id`, `updated_by`, `created_by`).
    pub user_id: String,
    pub oauth_tokens: Mutex<HashMap<String, Instant>>,
    pub stats: Mutex<Stats>,
    pub writes: Mutex<std::collections::VecDeque<WriteRecord>>,
    /// The origin of [`WriteRecord`]'s times.
    pub started: Instant,
    pub faults: Mutex<Faults>,
    pub rate_window: Mutex<RateWindow>,
    /// Flips to true when the server shuts down; hung (timeout-fault) requests watch it.
    pub shutdown: watch::Receiver<bool>,
    seq: AtomicU64,
}

impl Common {
    pub fn new(options: EmulatorOptions, shutdown: watch::Receiver<bool>) -> Self {
        Self {
            options,
            organisation_id: new_id(),
            default_workspace_id: new_id(),
            user_id: new_id(),
            oauth_tokens: Mutex::default(),
            stats: Mutex::default(),
            writes: Mutex::default(),
            started: Instant::now(),
            faults: Mutex::default(),
            rate_window: Mutex::default(),
            shutdown,
            seq: AtomicU64::new(0),
        }
    }

    /// A monotonically increasing number that orders lists by creation.
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// A snapshot of the fault settings, for handlers whose answers they shape.
    pub fn faults(&self) -> Faults {
        lock(&self.faults).clone()
    }

    /// The error for a config, deployment, policy (or a policy's entity), API key, integration or
    /// provider that does not exist, e.g.
    /// `missing("config pc-x")`: 404 `AB08`, or 403 `AB03` under the `missing_as_ab03` fault.
    pub fn missing(&self, what: &str) -> EmulatorError {
        if lock(&self.faults).missing_as_ab03 {
            EmulatorError::NotVisible(format!("{what} is not visible with this token"))
        } else {
            EmulatorError::not_found(format!("{what} not found"))
        }
    }
}

/// Locks a collection; a handler that panicked mid-update cannot leave it worse than a crash would.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
