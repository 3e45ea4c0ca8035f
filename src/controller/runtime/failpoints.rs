//! Named points where a test can freeze a reconcile, to stand in for the process dying at that
//! exact moment (the test then drops the operator and starts a new one). Nothing arms them in
//! production; an unarmed point costs one lock.

use std::collections::HashSet;
use std::sync::Mutex;

/// After the rotation PUT returned new credentials, before they are written to the Secret.
pub const AFTER_ROTATE_PUT: &str = "deployment/after-rotate-put";
/// After the create POST returned the credentials, before they are written to the Secret.
pub const AFTER_CREATE_POST: &str = "deployment/after-create-post";
/// After a recovered create's id was saved, before the rotation that fills its Secret.
pub const AFTER_RECOVERY_SAVED: &str = "issuing/after-recovery-saved";
/// After an API key's rotate call returned the new value, before it is written to the Secret.
pub const AFTER_API_KEY_ROTATE: &str = "api-key/after-rotate";
/// After an API key's create returned its value, before it is written to the Secret.
pub const AFTER_API_KEY_CREATE: &str = "api-key/after-create";
/// Before a create whose intent is recorded looks up what the earlier create made.
pub const BEFORE_CREATE_LOOKUP: &str = "issuing/before-create-lookup";
/// After a recovery fenced the Secret and the status, before it deletes the object an earlier
/// create made.
pub const BEFORE_RECOVERY_DELETE: &str = "issuing/before-recovery-delete";
/// After a recovery deleted the object an earlier create made (its value nowhere), before the
/// create that replaces it.
pub const AFTER_RECOVERY_DELETE: &str = "issuing/after-recovery-delete";

#[derive(Debug, Default)]
pub struct Failpoints {
    armed: Mutex<HashSet<String>>,
    /// The armed points a reconcile has reached.
    reached: Mutex<HashSet<String>>,
    released: tokio::sync::Notify,
}

impl Failpoints {
    pub fn arm(&self, name: &str) {
        self.armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string());
    }

    /// True once a reconcile has reached `name` while it was armed.
    pub fn reached(&self, name: &str) -> bool {
        self.reached
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }

    /// Lets the reconciles frozen at `name` go on, as a process stalled there (paused, cut off)
    /// would once it resumes.
    pub fn release(&self, name: &str) {
        self.armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.released.notify_waiters();
    }

    /// Returns only once `name` is not armed: never, unless [`Failpoints::release`]d, as if the
    /// process had died here.
    pub async fn hit(&self, name: &str) {
        let mut logged = false;
        loop {
            // Registered before the check, so a release in between is not missed.
            let released = self.released.notified();
            let armed = self
                .armed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(name);
            if !armed {
                return;
            }
            if !logged {
                tracing::warn!(failpoint = name, "failpoint hit: freezing this reconcile");
                self.reached
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.to_string());
                logged = true;
            }
            released.await;
        }
    }
}
