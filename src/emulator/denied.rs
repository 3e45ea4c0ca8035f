//! The families SCM does not serve (FACTS-rest §0): prompts, prompt partials, collections,
//! labels, virtual keys, users and user invites, workspace members and SCIM workspace mappings
//! answer every method on both planes, under the SCM and the upstream (`/admin/…`) prefixes,
//! with the policy denial the SDK's probes saw: `403`, header `x-opa-decision: false`, body
//! `{"msg": "Access denied"}`. So do writes of model pricing (a read-only public catalogue
//! elsewhere). A denial is not a 404: a client must not take it for "gone".

use axum::{
    Json, Router,
    http::{HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{MethodRouter, any, post},
};
use serde_json::json;

/// The collection paths denied under each plane, with and without the upstream `/admin`.
const FAMILIES: &[&str] = &[
    "/prompts",
    "/prompts/{*rest}",
    "/collections",
    "/collections/{*rest}",
    "/labels",
    "/labels/{*rest}",
    "/virtual-keys",
    "/virtual-keys/{*rest}",
    "/users",
    "/users/{*rest}",
    "/scim/workspaces",
    "/scim/workspaces/{*rest}",
    "/admin/users",
    "/admin/users/{*rest}",
    "/admin/workspaces",
    "/admin/workspaces/{*rest}",
    "/workspaces/{workspaceRef}/users",
    "/workspaces/{workspaceRef}/users/{*rest}",
];

const PLANES: &[&str] = &["/ai_gw/v2", "/ai_gw/admin/v2"];

/// The denial every route here answers.
pub async fn opa_denied() -> Response {
    let mut response =
        (StatusCode::FORBIDDEN, Json(json!({"msg": "Access denied"}))).into_response();
    response
        .headers_mut()
        .insert("x-opa-decision", HeaderValue::from_static("false"));
    response
}

/// Every denied route.
pub fn routes<S>() -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    let mut router = Router::new();
    for plane in PLANES {
        for family in FAMILIES {
            router = router.route(&format!("{plane}{family}"), any(opa_denied));
        }
    }
    let pricing_writes: MethodRouter<S> = post(opa_denied).put(opa_denied).delete(opa_denied);
    router.route(
        "/ai_gw/v2/model-configs/pricing/{provider}/{model}",
        pricing_writes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_denial_carries_the_opa_header() {
        let response = opa_denied().await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        assert_eq!(response.headers()["x-opa-decision"], "false");
    }
}
