use crate::api::client::Call;
use crate::api::error::ApiError;
use crate::api::models::{
    ApiPlane, CreateWorkspaceRequest, IamScope, IamScopeList, IamScopeWrite, ListQuery, Listing,
    UpdateWorkspaceRequest, Workspace, WorkspaceCreated, WorkspacesListQuery,
};
use crate::api::routes::{
    ADMIN_WORKSPACE, ADMIN_WORKSPACES, DATA_WORKSPACE, DATA_WORKSPACES, IAM_SCOPE, IAM_SCOPES,
    Route, Verb,
};

use super::collection::{DeletedByKey, ReadByKey, Remote};

/// Workspaces (`/workspaces`), addressed by UUID or slug: reads on either plane, writes on the
/// admin plane. Creating one is three calls: [`IamScopes::create`], [`Workspaces::create`],
/// then [`IamScopes::replace`] with [`IamScopeWrite::binding`].
pub type Workspaces<'c> = super::Endpoint<'c, Workspace, ApiPlane>;

impl Workspaces<'_> {
    fn routes(&self) -> (&'static str, &'static str) {
        match self.plane {
            ApiPlane::Data => (DATA_WORKSPACES, DATA_WORKSPACE),
            ApiPlane::Admin => (ADMIN_WORKSPACES, ADMIN_WORKSPACE),
        }
    }

    /// Writes go to the admin plane only.
    fn admin_only(&self) -> Result<(), ApiError> {
        match self.plane {
            ApiPlane::Admin => Ok(()),
            ApiPlane::Data => Err(ApiError::validation(
                "plane",
                "workspace writes are served on the admin plane only",
            )),
        }
    }

    /// Every workspace that matches, all pages.
    pub async fn list(&self, query: &WorkspacesListQuery) -> Result<Vec<Workspace>, ApiError> {
        Ok(self.listing(query).await?.items)
    }

    /// Like [`Self::list`], saying whether the pages prove the whole list.
    pub async fn listing(
        &self,
        query: &WorkspacesListQuery,
    ) -> Result<Listing<Workspace>, ApiError> {
        super::paged(
            self.client,
            self.routes().0,
            &[],
            query.to_pairs(),
            |w: &Workspace| w.id.as_str(),
            super::Reading::Proof,
        )
        .await
    }

    /// By UUID or slug. An archived workspace answers 404; on the data plane one outside the
    /// caller's scope answers 403 `AB03`.
    pub async fn get(&self, key: &str) -> Result<Workspace, ApiError> {
        let call = super::on(Verb::Get, self.routes().1, key)?;
        self.client.json(call).await
    }

    /// Not retried when the answer is lost: look it up (by name or by its scope) first.
    pub async fn create(&self, req: &CreateWorkspaceRequest) -> Result<WorkspaceCreated, ApiError> {
        self.admin_only()?;
        let call = super::post(ADMIN_WORKSPACES, req)?;
        self.client.json(call).await
    }

    /// Partial; the API answers `{}` (read it again to see the result).
    pub async fn update(&self, key: &str, req: &UpdateWorkspaceRequest) -> Result<(), ApiError> {
        self.admin_only()?;
        let call = super::send(Verb::Put, ADMIN_WORKSPACE, key, req)?;
        self.client.empty(call).await
    }

    /// Archives (there is no hard delete); the default workspace refuses.
    pub async fn archive(&self, key: &str) -> Result<(), ApiError> {
        self.admin_only()?;
        let call = super::on(Verb::Delete, ADMIN_WORKSPACE, key)?;
        self.client.empty(call).await
    }
}

/// SCM IAM scopes (`/iam/v1/scopes`, on the management host), keyed by name.
pub type IamScopes<'c> = super::Endpoint<'c, IamScope>;

impl Remote for IamScope {
    const COLLECTION: &'static str = IAM_SCOPES;
    const ITEM: &'static str = IAM_SCOPE;
}

impl ReadByKey for IamScope {}

impl DeletedByKey for IamScope {}

impl IamScopes<'_> {
    /// Every scope (the API does not page them).
    pub async fn list(&self) -> Result<Vec<IamScope>, ApiError> {
        let call = Call::new(Route::mgmt(Verb::Get, IAM_SCOPES, &[]));
        let list: IamScopeList = self.client.json(call).await?;
        Ok(list.items)
    }

    pub async fn create(&self, req: &IamScopeWrite) -> Result<IamScope, ApiError> {
        let call = super::post(IAM_SCOPES, req)?;
        self.client.json(call).await
    }

    /// A full replacement of scope `name`: `req.resources` becomes all of its resources.
    pub async fn replace(&self, name: &str, req: &IamScopeWrite) -> Result<IamScope, ApiError> {
        let call = super::send(Verb::Put, IAM_SCOPE, name, req)?;
        if req.name != name {
            return Err(ApiError::validation("name", "must be the scope's name"));
        }
        self.client.json(call).await
    }
}
