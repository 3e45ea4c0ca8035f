//! The emulator's workspaces and IAM scopes over real HTTP (FACTS-rest §1, FACTS-more §7): the
//! three-call create (a missing scope is `400 AB01`), data-plane visibility only once the scope
//! binds the slug, the scope PUT as a full replacement, `{}` updates with the explicit clearing
//! forms, the icon on names, archive on delete (the default workspace refuses), writes on the
//! admin plane only, and the families SCM does not serve answering the OPA denial.

use crate::support;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::emu::{Emu, assert_ab01, text};

const ADMIN: &str = "/ai_gw/admin/v2/workspaces";
const DATA: &str = "/ai_gw/v2/workspaces";
const SCOPES: &str = "/iam/v1/scopes";

fn slugs(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|row| text(&row["slug"]))
        .collect()
}

impl Emu {
    /// Scope, workspace, bind: answers the workspace receipt.
    async fn provision(&self, name: &str, scope: &str) -> Value {
        let (status, _) = self
            .post(
                SCOPES,
                json!({"name": scope, "description": "token-1", "resources": []}),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        let (status, receipt) = self
            .post(ADMIN, json!({"name": name, "scope_name": scope}))
            .await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        let bind = json!({"name": scope, "description": "token-1", "resources": [
            {"resource_type": "workspace", "resource_id": receipt["slug"], "metadata": []}]});
        let (status, _) = self.put(&format!("{SCOPES}/{scope}"), bind).await;
        assert_eq!(status, StatusCode::OK);
        receipt
    }
}

/// The row of `rows` with `slug` (a panic when there is none).
fn with_slug(rows: &Value, slug: &str) -> Value {
    let rows = rows.as_array().expect("rows");
    rows.iter()
        .find(|r| r["slug"] == slug)
        .cloned()
        .unwrap_or_else(|| panic!("no row {slug} in {rows:?}"))
}

impl Emu {
    /// PUTs `body` to `item`, then reads it back.
    async fn put_then_get(&self, item: &str, body: Value) -> Value {
        self.put(item, body).await;
        self.get(item).await.1
    }
}
#[tokio::test]
async fn a_workspace_is_made_in_three_calls_and_shows_on_the_data_plane_once_bound() {
    let emu = Emu::start().await;
    let (status, error) = emu
        .post(
            ADMIN,
            json!({"name": "Payments", "scope_name": "ws_payments_abc123"}),
        )
        .await;
    assert_ab01(status, &error, "scope");
    for missing in ["name", "scope_name"] {
        let mut body = json!({"name": "Payments", "scope_name": "s"});
        body.as_object_mut().expect("body").remove(missing);
        let (status, error) = emu.post(ADMIN, body).await;
        assert_ab01(status, &error, missing);
    }

    let (status, scope) = emu
        .post(
            SCOPES,
            json!({"name": "ws_payments_abc123", "resources": []}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{scope}");
    assert_eq!(
        scope["description"], "",
        "an unset description reads as \"\""
    );
    let tsg = text(&scope["tsg_id"]);
    assert!(tsg.bytes().all(|b| b.is_ascii_digit()), "{tsg}");
    assert_eq!(scope["id"], format!("ws_payments_abc123:{tsg}"));
    let (status, error) = emu
        .post(SCOPES, json!({"name": "ws_payments_abc123"}))
        .await;
    assert_ab01(status, &error, "already exists");

    let (status, receipt) = emu
        .post(
            ADMIN,
            json!({"name": "Payments", "scope_name": "ws_payments_abc123", "organisation_id": "1234567890",
                   "description": "card traffic", "icon": "💳", "users": []}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{receipt}");
    let mut fields: Vec<&String> = receipt.as_object().expect("receipt").keys().collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "created_at",
            "defaults",
            "description",
            "id",
            "last_updated_at",
            "name",
            "object",
            "scope_name",
            "slug",
            "users"
        ],
        "the receipt lacks status, is_default, icon and the limits"
    );
    let (id, slug) = (text(&receipt["id"]), text(&receipt["slug"]));
    assert!(slug.starts_with("ws-paymen-"), "{slug}");

    // Not bound yet: the admin plane sees it, the data plane neither lists nor reads it.
    let (_, admin_list) = emu.get(ADMIN).await;
    assert!(slugs(&admin_list).contains(&slug), "{admin_list}");
    let (_, data_list) = emu.get(DATA).await;
    assert!(!slugs(&data_list).contains(&slug), "{data_list}");
    assert_eq!(
        data_list["total"], 1,
        "only the default workspace: {data_list}"
    );
    let (status, error) = emu.get(&format!("{DATA}/{slug}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
    assert_eq!(error["error"]["code"], "AB03", "{error}");

    // The bind is a full replacement: a description left out is gone.
    let bind = json!({"name": "ws_payments_abc123", "resources": [
        {"resource_type": "workspace", "resource_id": slug}]});
    let (status, bound) = emu.put(&format!("{SCOPES}/ws_payments_abc123"), bind).await;
    assert_eq!(status, StatusCode::OK, "{bound}");
    assert_eq!(bound["resources"][0]["metadata"], json!([]));
    let (status, error) = emu
        .put(
            &format!("{SCOPES}/ws_payments_abc123"),
            json!({"name": "other", "resources": []}),
        )
        .await;
    assert_ab01(status, &error, "name");
    let (_, scopes) = emu.get(SCOPES).await;
    assert_eq!(scopes["count"], 1, "{scopes}");
    assert_eq!(scopes["items"][0]["resources"][0]["resource_id"], slug);

    let (_, data_list) = emu.get(DATA).await;
    assert!(slugs(&data_list).contains(&slug), "{data_list}");
    for key in [id.as_str(), slug.as_str()] {
        for base in [ADMIN, DATA] {
            let (status, read) = emu.get(&format!("{base}/{key}")).await;
            assert_eq!(status, StatusCode::OK, "{read}");
            assert_eq!(read["name"], "💳 Payments", "the icon is prepended");
            assert_eq!(read["is_default"], 0);
            assert!(read["status"].is_null(), "the detail's status is null");
            assert_eq!(read["scope_name"], "ws_payments_abc123");
            assert!(
                fields_are_uuid(&read["organisation_id"]),
                "reads carry the internal UUID: {read}"
            );
        }
    }
    let row = &with_slug(&data_list["data"], &slug);
    assert_eq!(row["status"], "active");
    assert_eq!(row["icon"], "💳");

    // Unbinding hides it again.
    let (status, _) = emu
        .put(
            &format!("{SCOPES}/ws_payments_abc123"),
            json!({"name": "ws_payments_abc123", "resources": []}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = emu.get(&format!("{DATA}/{slug}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = emu.delete(&format!("{SCOPES}/ws_payments_abc123")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = emu.get(&format!("{SCOPES}/ws_payments_abc123")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

fn fields_are_uuid(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.len() == 36 && s.matches('-').count() == 4)
}

#[tokio::test]
async fn updates_answer_empty_and_clear_only_with_the_explicit_forms() {
    let emu = Emu::start().await;
    let (status, config) = emu
        .post(
            "/ai_gw/v2/configs",
            json!({"name": "default route", "config": {"retry": {"attempts": 2}}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{config}");
    let receipt = emu.provision("Search", "ws_search_q1w2e3").await;
    let item = format!("{ADMIN}/{}", text(&receipt["slug"]));

    let (status, error) = emu.put(&item, json!({})).await;
    assert_ab01(status, &error, "No update fields provided");
    let (status, error) = emu.put(&item, json!({"security_settings": {}})).await;
    assert_ab01(status, &error, "No update fields provided");
    let (status, error) = emu.put(&item, json!({"scope_name": "another_scope"})).await;
    assert_ab01(status, &error, "scope_name");
    let (status, error) = emu
        .put(&item, json!({"defaults": {"config_id": "pc-nope-000000"}}))
        .await;
    assert_ab01(status, &error, "config_id");

    let set = json!({
        "description": "search traffic", "icon": "🔎",
        "defaults": {"config_id": config["slug"], "metadata": {"team": "search"}, "allow_config_override": true},
        "usage_limits": [{"credit_limit": 100, "type": "cost"}],
        "rate_limits": [{"type": "requests", "unit": "rpm", "value": 60}],
    });
    let (status, answer) = emu.put(&item, set).await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    let (_, read) = emu.get(&item).await;
    assert_eq!(read["defaults"]["config_id"], config["slug"]);
    assert_eq!(read["defaults"]["metadata"], json!({"team": "search"}));
    assert!(
        read["defaults"].get("allow_config_override").is_none(),
        "not echoed: {read}"
    );
    let policy_id = text(&read["usage_limits"][0]["id"]);
    assert_eq!(read["rate_limits"][0]["value"], 60);

    // A credit change keeps the policy's id; a type change makes a new one.
    let limit = |type_: &str| json!({"usage_limits": [{"credit_limit": 200, "type": type_}]});
    let read = emu.put_then_get(&item, limit("cost")).await;
    assert_eq!(read["usage_limits"][0]["id"], policy_id.as_str());
    assert_eq!(read["usage_limits"][0]["credit_limit"], 200);
    let read = emu.put_then_get(&item, limit("tokens")).await;
    assert_ne!(read["usage_limits"][0]["id"], policy_id.as_str());

    // What does not clear: `usage_limits: []`, a blank description.
    let (status, _) = emu
        .put(&item, json!({"usage_limits": [], "description": ""}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, read) = emu.get(&item).await;
    assert_eq!(read["usage_limits"].as_array().map(Vec::len), Some(1));
    assert_eq!(read["description"], "search traffic");

    // The explicit forms do.
    let clear = json!({"defaults": {"config_id": null, "metadata": {}}, "usage_limits": null,
                       "rate_limits": [], "icon": ""});
    let (status, _) = emu.put(&item, clear).await;
    assert_eq!(status, StatusCode::OK);
    let (_, read) = emu.get(&item).await;
    assert_eq!(read["defaults"], json!({"config_id": null, "metadata": {}}));
    assert!(read["usage_limits"].is_null(), "{read}");
    assert_eq!(read["rate_limits"], json!([]));
    assert!(read["icon"].is_null());
    assert_eq!(read["name"], "Search", "no icon, no decoration");
}

#[tokio::test]
async fn delete_archives_and_the_default_workspace_refuses() {
    let emu = Emu::start().await;
    let receipt = emu.provision("Batch", "ws_batch_z9y8x7").await;
    let slug = text(&receipt["slug"]);

    // Writes live on the admin plane only.
    let (status, _) = emu
        .send(
            emu.call(Method::PUT, &format!("{DATA}/{slug}"))
                .json(&json!({"name": "x"})),
        )
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _) = emu
        .send(emu.call(Method::DELETE, &format!("{DATA}/{slug}")))
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    let (status, answer) = emu.delete(&format!("{ADMIN}/{slug}")).await;
    assert_eq!((status, answer), (StatusCode::OK, json!({})));
    for base in [ADMIN, DATA] {
        let (status, error) = emu.get(&format!("{base}/{slug}")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{error}");
        assert_eq!(error["data"]["errorCode"], "AB08");
    }
    let (status, _) = emu.delete(&format!("{ADMIN}/{slug}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, active) = emu.get(ADMIN).await;
    assert!(!slugs(&active).contains(&slug));
    let (_, archived) = emu.get(&format!("{ADMIN}?status=archived")).await;
    assert_eq!(slugs(&archived), vec![slug.clone()]);
    assert_eq!(archived["data"][0]["status"], "archived");

    emu.faults(json!({"missing_as_ab03": true})).await;
    let (status, _) = emu.get(&format!("{ADMIN}/{slug}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "missing_as_ab03 applies");
    emu.faults(json!({})).await;

    let state = emu.state().await;
    let default_id = text(&state["default_workspace_id"]);
    let (status, default) = emu.get(&format!("{DATA}/{default_id}")).await;
    assert_eq!(status, StatusCode::OK, "{default}");
    assert_eq!(default["is_default"], 1);
    let (status, error) = emu.delete(&format!("{ADMIN}/{default_id}")).await;
    assert_ab01(status, &error, "default workspace");
    let (status, _) = emu.get(&format!("{ADMIN}/{default_id}")).await;
    assert_eq!(status, StatusCode::OK, "still there");

    let state = emu.state().await;
    let archived = with_slug(&state["workspaces"], &slug);
    assert_eq!(archived["status"], "archived");
    assert_eq!(archived["writes"], 2, "create and archive");
    assert_eq!(state["scopes"][0]["writes"], 2, "create and bind");
}

#[tokio::test]
async fn seeded_workspaces_and_scopes_behave_like_made_ones() {
    let emu = Emu::start().await;
    let (status, seeded) = emu
        .seed(json!({
            "scopes": [{"name": "ws_old_aaaaaa", "resources": [
                {"resource_type": "workspace", "resource_id": "ws-old-111111"}]}],
            "workspaces": [
                {"name": "Old", "slug": "ws-old-111111", "scope_name": "ws_old_aaaaaa"},
                {"name": "Gone", "slug": "ws-gone-222222", "status": "archived"},
            ],
        }))
        .await;
    assert_eq!(status, StatusCode::OK, "{seeded}");
    assert_eq!(seeded["scopes"][0]["name"], "ws_old_aaaaaa");
    let (status, _) = emu.get(&format!("{DATA}/ws-old-111111")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = emu.get(&format!("{ADMIN}/ws-gone-222222")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    emu.control(Method::DELETE, "/_emulator/state", None).await;
    let (_, list) = emu.get(ADMIN).await;
    assert_eq!(
        list["total"], 1,
        "only the default workspace is left: {list}"
    );
    let (_, scopes) = emu.get(SCOPES).await;
    assert_eq!(scopes["count"], 0);
}

#[tokio::test]
async fn families_the_api_does_not_serve_answer_the_opa_denial() {
    let emu = Emu::start().await;
    let probes = [
        (Method::GET, "/ai_gw/v2/prompts"),
        (Method::POST, "/ai_gw/v2/prompts"),
        (Method::GET, "/ai_gw/admin/v2/prompts/partials"),
        (Method::GET, "/ai_gw/v2/collections"),
        (Method::GET, "/ai_gw/v2/labels"),
        (Method::GET, "/ai_gw/v2/virtual-keys"),
        (Method::GET, "/ai_gw/admin/v2/users"),
        (Method::GET, "/ai_gw/v2/users/invites"),
        (Method::GET, "/ai_gw/admin/v2/admin/users/invites"),
        (Method::GET, "/ai_gw/admin/v2/workspaces/ws-a/users"),
        (Method::POST, "/ai_gw/admin/v2/admin/workspaces/ws-a/users"),
        (Method::GET, "/ai_gw/v2/scim/workspaces"),
        (Method::DELETE, "/ai_gw/admin/v2/scim/workspaces/m-1"),
        (Method::PUT, "/ai_gw/v2/model-configs/pricing/openai/gpt-4o"),
    ];
    for (method, path) in probes {
        let response = emu.answer(method.clone(), path).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{method} {path}");
        assert_eq!(
            response
                .headers()
                .get("x-opa-decision")
                .map(|v| v.as_bytes()),
            Some(&b"false"[..]),
            "{method} {path}"
        );
        let body: Value = response.json().await.expect("json");
        assert_eq!(body, json!({"msg": "Access denied"}));
    }
    let unauthenticated = reqwest::get(emu.url("/ai_gw/v2/prompts"))
        .await
        .expect("request");
    assert_eq!(unauthenticated.status(), StatusCode::UNAUTHORIZED);
}
