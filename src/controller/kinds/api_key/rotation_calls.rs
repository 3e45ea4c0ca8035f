//! What an API key supplies to the one rotation protocol ([`crate::controller::driver::rotation`]): the
//! rotate call, with the transition during which the previous value keeps working, and the
//! check that the Secret still holds the key.

use std::collections::BTreeMap;

use crate::api::RotateApiKeyRequest;
use crate::controller::driver::Cx;
use crate::controller::driver::gate::Op;
use crate::controller::driver::rotation::{Issued, Rotates};
use crate::controller::error::{Error, Halt};
use crate::controller::runtime::failpoints::AFTER_API_KEY_ROTATE;
use crate::resources::api_key::{ApiKey, ApiKeyStatus, SECRET_KEY};
use crate::resources::rotation::Rotation;

use super::{API_KEY_ID_ANNOTATION, PREVIOUS_EXPIRES_ANNOTATION};

impl Rotates for ApiKey {
    const ROTATING_REASON: &'static str = "RotatingKey";
    const AFTER_ROTATE: &'static str = AFTER_API_KEY_ROTATE;
    const SECRET_FIELD: &'static str = "spec.secretRef";
    const STORED: &'static str = "the Secret holds the key's current value";

    fn rotation(&self) -> Option<&Rotation> {
        self.spec.rotation.as_ref().map(|r| &r.schedule)
    }

    fn secret_name(&self) -> &str {
        &self.spec.secret_ref.name
    }

    fn what(id: &str) -> String {
        format!("API key {id}")
    }

    /// Rotates with `spec.rotation.transitionPeriod` (the API's default when unset): the
    /// previous value works until the answer's `key_transition_expires_at`.
    async fn call_rotate(&self, cx: &Cx<'_, Self>, id: &str) -> Result<Issued, Halt> {
        let transition = self.spec.transition_period().map_err(Error::InvalidSpec)?;
        let request = transition
            .map(RotateApiKeyRequest::with_transition)
            .unwrap_or_default();
        let rotated = cx
            .api(Op::Rotate)
            .await?
            .api_keys(self.spec.kind.to_api())
            .rotate(id, &request)
            .await
            .map_err(|e| Error::api(format!("rotate API key {id}"), e))?;
        let mut annotations = vec![(API_KEY_ID_ANNOTATION, id.to_string())];
        let note = match rotated.key_transition_expires_at {
            Some(expires) => {
                let note = format!("; the previous value works until {expires}");
                annotations.push((PREVIOUS_EXPIRES_ANNOTATION, expires));
                note
            }
            None => String::new(),
        };
        Ok(Issued {
            values: vec![(SECRET_KEY, rotated.key)],
            annotations,
            note,
            incomplete: None,
        })
    }

    fn settle(status: &mut ApiKeyStatus, annotations: &BTreeMap<String, String>) {
        status.previous_key_expires_at = annotations.get(PREVIOUS_EXPIRES_ANNOTATION).cloned();
    }

    /// A key whose rotated value was lost is replaced rather than rotated again: rotating
    /// again would leave the lost value working through the new transition, held by nobody.
    /// A new key is created into the Secret (whose value keeps working meanwhile), the
    /// workloads are rolled, then this key goes ([`crate::controller::driver::issuing`]).
    fn give_up_lost(status: &mut ApiKeyStatus, id: &str) -> Option<String> {
        // One replacement at a time: a key replacing another whose value never reached the
        // Secret (its delivery failed) is rotated into it instead, so the replaced key stays
        // recorded until it is deleted.
        if status.replaced_key.is_some() {
            return None;
        }
        status.replaced_key = Some(id.to_string());
        status.replacements += 1;
        status.id = None;
        status.remote_updated_at = None;
        status.previous_key_expires_at = None;
        Some(format!(
            "the answer to the rotation of API key {id} was lost, and with it the new value: a new key replaces it, and it is deleted once the Secret holds the new one"
        ))
    }
}
