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

#[derive(Debug, Default)]
pub struct Failpoints {
    armed: Mutex<HashSet<String>>,
}

impl Failpoints {
    pub fn arm(&self, name: &str) {
        self.armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string());
    }

    /// Never returns when `name` is armed, as if the process had died here.
    pub async fn hit(&self, name: &str) {
        let armed = self
            .armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name);
        if armed {
            tracing::warn!(failpoint = name, "failpoint hit: freezing this reconcile");
            std::future::pending::<()>().await;
        }
    }
}
