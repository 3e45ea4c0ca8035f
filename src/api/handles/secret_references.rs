use crate::api::models::{
    CreateSecretReferenceRequest, Created, SecretReference, SecretReferencesListQuery,
    UpdateSecretReferenceRequest,
};
use crate::api::routes::{SECRET_REFERENCE, SECRET_REFERENCES};

use super::collection::{DeletedByKey, Listed, ReadByKey, Remote, Written};

/// The organisation's secret references (`/ai_gw/admin/v2/secret-references`), by UUID or slug.
/// `auth_config` is write-only: reads return it masked (and the detail has no
/// `allowed_workspaces`). An update merges `auth_config` into the stored one; `manager_type`
/// cannot change. A delete is refused (400) while an integration or MCP integration maps a
/// field to the reference.
pub type SecretReferences<'c> = super::Endpoint<'c, SecretReference>;

impl Remote for SecretReference {
    const COLLECTION: &'static str = SECRET_REFERENCES;
    const ITEM: &'static str = SECRET_REFERENCE;
    const SECRET_WRITES: bool = true;
}

impl ReadByKey for SecretReference {}

impl Listed for SecretReference {
    type Query = SecretReferencesListQuery;

    fn id(&self) -> &str {
        &self.id
    }
}

impl Written for SecretReference {
    type Create = CreateSecretReferenceRequest;
    type Created = Created;
    type Update = UpdateSecretReferenceRequest;
    type Updated = ();
}

impl DeletedByKey for SecretReference {}
