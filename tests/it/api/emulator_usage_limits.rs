//! The emulator's usage-limits policies over real HTTP: create, read, list and page, update,
//! archive, both reset forms, usage and its entities, resets, seeding, state and faults.

use std::sync::Arc;

use crate::support;
use aigw::api::{
    Client, ClientConfig, Condition, CreateUsageLimitsPolicyRequest, GroupBy, OneOrMany,
    PeriodicReset, PolicyStatus, StaticToken, UpdateUsageLimitsPolicyRequest, UsageLimitType,
};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::emu::{Emu, TOKEN, assert_ab, text};

const BASE: &str = "/ai_gw/v2/policies/usage-limits";
const WORKSPACE: &str = "6f0e4a2c-5a4e-4c1b-9a53-3c2f1f0d9b11";

impl Emu {
    /// Creates a policy and returns its path.
    async fn create_policy(&self, body: Value) -> String {
        let (status, receipt) = self.post(BASE, body).await;
        assert_eq!(status, StatusCode::OK, "{receipt}");
        format!("{BASE}/{}", text(&receipt["id"]))
    }

    /// Each of `queries` on the list `path` is refused: 400, `AB01`.
    async fn refuses_queries(&self, path: &str, queries: &[&str]) {
        for query in queries {
            let (status, body) = self.get(&format!("{path}?{query}")).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
            assert_eq!(body["data"]["errorCode"], "AB01", "{body}");
        }
    }

    /// Counts usage the way gateway traffic would; returns the entity row.
    async fn use_budget(&self, policy_path: &str, value_key: &str, usage: f64) -> Value {
        let id = policy_path.rsplit('/').next().unwrap_or_default();
        let (status, row) = self
            .control(
                Method::POST,
                &format!("/_emulator/usage-limits/{id}/usage"),
                Some(json!({"value_key": value_key, "usage": usage})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{row}");
        row
    }

    /// The dump of one policy from `GET /_emulator/state`.
    async fn dumped_policy(&self, policy_path: &str) -> Value {
        let id = policy_path.rsplit('/').next().unwrap_or_default();
        self.state_record("usage_limits", "id", id).await
    }
}

fn rows(list: &Value) -> usize {
    list["data"].as_array().map_or(0, Vec::len)
}

fn budget(credit_limit: Value) -> Value {
    json!({"name": "team budget", "type": "cost", "credit_limit": credit_limit,
           "conditions": [{"key": "workspace_id", "value": WORKSPACE}, {"key": "metadata.team", "value": ["a", "b"]}],
           "group_by": [{"key": "api_key"}, {"key": "metadata.user_id"}]})
}

/// The entity row `entity` has `(current_usage, status)` and its alerts sent as `alerts`
/// (threshold, exhausted).
fn assert_entity(entity: &Value, usage: (Value, Value), alerts: (Value, Value)) {
    assert_eq!(
        (entity["current_usage"].clone(), entity["status"].clone()),
        usage
    );
    let sent = (
        entity["is_threshold_alerts_sent"].clone(),
        entity["is_exhausted_alerts_sent"].clone(),
    );
    assert_eq!(sent, alerts, "0/1 integers, as live");
}
#[tokio::test]
async fn create_validates_and_reads_back_the_live_shape() {
    let emu = Emu::start().await;
    let cases = [
        ("type", json!({"type": null})),
        ("type", json!({"type": "requests"})),
        ("credit_limit", json!({"credit_limit": null})),
        ("credit_limit", json!({"credit_limit": -1})),
        ("conditions", json!({"conditions": []})),
        ("group_by", json!({"group_by": []})),
        ("group_by", json!({"group_by": [{"key": "model"}]})),
        ("alert_threshold", json!({"alert_threshold": 100})),
        ("periodic_reset", json!({"periodic_reset": "daily"})),
        ("periodic_reset_days", json!({"periodic_reset_days": 366})),
        ("description", json!({"description": "d".repeat(501)})),
    ];
    for (field, patch) in cases {
        let mut body = budget(json!(100));
        for (key, value) in patch.as_object().expect("patch") {
            body[key] = value.clone();
        }
        let (status, error) = emu.post(BASE, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {error}");
        assert_ab(&error, "AB01", field);
    }

    let mut body = budget(json!(100));
    body["alert_threshold"] = json!(80);
    body["periodic_reset"] = json!("monthly");
    body["workspace_id"] = json!(WORKSPACE);
    let (status, receipt) = emu.post(BASE, body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(receipt["object"], "policy_usage_limits");
    assert_eq!(receipt.as_object().map(|r| r.len()), Some(2), "{receipt}");
    let (status, read) = emu.get(&format!("{BASE}/{}", text(&receipt["id"]))).await;
    assert_eq!(status, StatusCode::OK);
    let state = emu.state().await;
    let expected = json!({
        "id": receipt["id"], "name": "team budget", "description": null,
        "conditions": budget(json!(0))["conditions"], "group_by": budget(json!(0))["group_by"],
        "type": "cost", "credit_limit": 100, "alert_threshold": 80, "periodic_reset": "monthly",
        "periodic_reset_days": null, "next_usage_reset_at": null, "last_reset_at": null,
        "status": "active", "workspace_id": WORKSPACE, "organisation_id": state["organisation_id"],
        "created_at": read["created_at"], "last_updated_at": read["created_at"],
        "created_by": read["created_by"], "object": "policy_usage_limits",
    });
    assert_eq!(read, expected);
    assert!(read["created_by"].is_string());
    assert!(
        read.get("value_key_usage_map").is_none(),
        "only with include_usage"
    );
    let (status, _) = emu
        .get(&format!(
            "{BASE}/{}?include_usage=maybe",
            text(&receipt["id"])
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn list_filters_pages_and_defaults_to_active() {
    let emu = Emu::start().await;
    for n in 0..5 {
        let mut body = budget(json!(n * 10));
        body["type"] = json!(if n < 3 { "cost" } else { "tokens" });
        if n == 4 {
            body["workspace_id"] = json!("ws-other");
        }
        emu.create_policy(body).await;
    }
    let (_, all) = emu.get(BASE).await;
    assert_eq!(
        (all["object"].clone(), all["total"].clone(), rows(&all)),
        (json!("list"), json!(5), 5)
    );
    assert_eq!(all["data"][0]["credit_limit"], json!(0), "creation order");
    let (_, page) = emu.get(&format!("{BASE}?page_size=2&current_page=1")).await;
    assert_eq!((page["total"].clone(), rows(&page)), (json!(5), 2));
    assert_eq!(page["data"][0]["credit_limit"], json!(20));
    let (_, last) = emu.get(&format!("{BASE}?page_size=2&current_page=2")).await;
    assert_eq!(rows(&last), 1);
    let (_, tokens) = emu.get(&format!("{BASE}?type=tokens")).await;
    assert_eq!(tokens["total"], json!(2));
    let (_, other) = emu.get(&format!("{BASE}?workspace_id=ws-other")).await;
    assert_eq!(other["total"], json!(1));
    let (_, default) = emu.get(&format!("{BASE}?page_size=0")).await;
    assert_eq!(rows(&default), 5, "0 means the default of 100");
    emu.refuses_queries(
        BASE,
        &[
            "page_size=-1",
            "current_page=x",
            "type=requests",
            "status=deleted",
        ],
    )
    .await;
    let (status, body) = emu.get(&format!("{BASE}?workspace_id=has%20space")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["param"], "workspace_id", "{body}");
}

#[tokio::test]
async fn update_answers_empty_object_and_keeps_immutable_fields() {
    let emu = Emu::start().await;
    let mut body = budget(json!(100));
    body["alert_threshold"] = json!(50);
    body["periodic_reset"] = json!("weekly");
    let path = emu.create_policy(body).await;
    let (_, before) = emu.get(&path).await;

    for (field, value) in [
        ("type", json!("tokens")),
        ("group_by", json!([{"key": "workspace_id"}])),
        ("workspace_id", json!("ws-2")),
    ] {
        let (status, error) = emu.put(&path, json!({ field: value })).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}");
        assert_ab(&error, "AB01", field);
    }
    for (field, update) in [
        ("credit_limit", json!({"credit_limit": null})),
        ("alert_threshold", json!({"credit_limit": 40})),
        (
            "next_usage_reset_at",
            json!({"next_usage_reset_at": "soon"}),
        ),
        ("conditions", json!({"conditions": []})),
        ("name", json!({"name": "n".repeat(256)})),
    ] {
        let (status, error) = emu.put(&path, update).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{field}: {error}");
        assert_ab(&error, "AB01", field);
    }
    let (_, unchanged) = emu.get(&path).await;
    assert_eq!(unchanged, before, "a refused update changes nothing");

    let update = json!({
        "type": "cost", "name": "renamed", "description": "for team a", "credit_limit": 200.5,
        "alert_threshold": null, "periodic_reset": null, "periodic_reset_days": null,
        "next_usage_reset_at": "2030-01-01T00:00:00Z",
        "conditions": [{"key": "api_key", "value": "k1", "excludes": ["k2"]}],
    });
    let (status, body) = emu.put(&path, update).await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["name"], "renamed");
    assert_eq!(read["description"], "for team a");
    assert_eq!(read["credit_limit"], json!(200.5));
    assert_eq!(read["alert_threshold"], Value::Null, "null clears it");
    assert_eq!(read["periodic_reset"], Value::Null);
    assert_eq!(read["next_usage_reset_at"], "2030-01-01T00:00:00Z");
    assert_eq!(read["conditions"][0]["excludes"], json!(["k2"]));
    assert_eq!(read["group_by"], before["group_by"]);
    assert!(
        text(&read["last_updated_at"]) > text(&before["last_updated_at"]),
        "{read}"
    );
    assert_eq!(read["created_at"], before["created_at"]);

    let (status, body) = emu.put(&path, json!({"description": null})).await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["description"], Value::Null);
    assert_eq!(read["name"], "renamed", "absent fields stay");
}

#[tokio::test]
async fn both_periodic_reset_forms_are_a_400_and_one_replaces_the_other() {
    let emu = Emu::start().await;
    let mut body = budget(json!(100));
    body["periodic_reset"] = json!("monthly");
    body["periodic_reset_days"] = json!(30);
    let error = emu.post_refused(BASE, body).await;
    assert_ab(&error, "AB01", "periodic_reset_days");

    let mut body = budget(json!(100));
    body["periodic_reset_days"] = json!(30);
    let path = emu.create_policy(body).await;
    let (_, read) = emu.get(&path).await;
    assert_eq!(
        (
            read["periodic_reset"].clone(),
            read["periodic_reset_days"].clone()
        ),
        (Value::Null, json!(30))
    );
    let (status, error) = emu
        .put(
            &path,
            json!({"periodic_reset": "weekly", "periodic_reset_days": 7}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_ab(&error, "AB01", "periodic_reset");
    for days in [json!(0), json!(366), json!(1.5), json!("7")] {
        let (status, _) = emu.put(&path, json!({"periodic_reset_days": days})).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{days}");
    }

    emu.put(&path, json!({"periodic_reset": "weekly"})).await;
    let (_, read) = emu.get(&path).await;
    assert_eq!(
        (
            read["periodic_reset"].clone(),
            read["periodic_reset_days"].clone()
        ),
        (json!("weekly"), Value::Null),
        "one form at a time"
    );
    emu.put(
        &path,
        json!({"periodic_reset": null, "periodic_reset_days": 14}),
    )
    .await;
    let (_, read) = emu.get(&path).await;
    assert_eq!(
        (
            read["periodic_reset"].clone(),
            read["periodic_reset_days"].clone()
        ),
        (Value::Null, json!(14))
    );
}

#[tokio::test]
async fn delete_archives_and_only_status_archived_still_finds_it() {
    let emu = Emu::start().await;
    let path = emu.create_policy(budget(json!(10))).await;
    emu.use_budget(&path, "k", 1.0).await;
    emu.delete_archives(&path).await;
    let (_, active) = emu.get(BASE).await;
    assert_eq!(active["total"], json!(0));
    let (_, listed) = emu.get(&format!("{BASE}?status=archived")).await;
    assert_eq!(listed["data"][0]["status"], "archived");

    let (status, _) = emu.delete(&path).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a second DELETE");
    let (status, _) = emu.put(&path, json!({"name": "x"})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = emu.get(&format!("{path}/entities")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let id = path.rsplit('/').next().unwrap_or_default();
    let (status, _) = emu
        .control(
            Method::POST,
            &format!("/_emulator/usage-limits/{id}/usage"),
            Some(json!({"value_key": "k", "usage": 1})),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "archived policies count no usage"
    );
    assert_eq!(emu.dumped_policy(&path).await["status"], "archived");
}

#[tokio::test]
async fn usage_exhausts_entities_that_page_filter_and_reset() {
    let emu = Emu::start().await;
    let mut body = budget(json!(10));
    body["alert_threshold"] = json!(8);
    let path = emu.create_policy(body).await;
    let first = emu.use_budget(&path, "key-a", 4.5).await;
    assert_entity(&first, (json!(4.5), json!("active")), (json!(0), json!(0)));
    let again = emu.use_budget(&path, "key-a", 5.5).await;
    assert_eq!(again["id"], first["id"], "one entity per value");
    assert_entity(
        &again,
        (json!(10), json!("exhausted")),
        (json!(1), json!(1)),
    );
    for (key, usage) in [("key-b", 1.0), ("KEY-c", 12.0), ("other", 0.5)] {
        emu.use_budget(&path, key, usage).await;
    }
    let (status, bad) = emu
        .control(
            Method::POST,
            "/_emulator/usage-limits/00000000-0000-0000-0000-000000000000/usage",
            Some(json!({"value_key": "k", "usage": 1})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{bad}");
    for body in [json!({"usage": 1}), json!({"value_key": "k", "usage": -1})] {
        let id = path.rsplit('/').next().unwrap_or_default();
        let (status, _) = emu
            .control(
                Method::POST,
                &format!("/_emulator/usage-limits/{id}/usage"),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }

    let (_, usage) = emu.get(&format!("{path}?include_usage=true")).await;
    assert_eq!(
        usage["value_key_usage_map"]["key-a"],
        json!({"current_usage": 10, "status": "exhausted", "is_threshold_alerts_sent": 1, "is_exhausted_alerts_sent": 1})
    );
    assert_eq!(
        usage["value_key_usage_map"].as_object().map(|m| m.len()),
        Some(4)
    );

    let entities = format!("{path}/entities");
    let (_, page) = emu
        .get(&format!("{entities}?page_size=3&current_page=1"))
        .await;
    assert_eq!(
        (page["object"].clone(), page["total"].clone(), rows(&page)),
        (json!("list"), json!(4), 1)
    );
    assert_eq!(page["data"][0]["value_key"], "other");
    let row = &page["data"][0];
    for field in [
        "id",
        "value_key",
        "current_usage",
        "status",
        "is_threshold_alerts_sent",
        "is_exhausted_alerts_sent",
        "last_used_at",
        "object",
    ] {
        assert!(row.get(field).is_some(), "{field} in {row}");
    }
    let (_, exhausted) = emu.get(&format!("{entities}?status=exhausted")).await;
    assert_eq!(exhausted["total"], json!(2));
    let (_, found) = emu.get(&format!("{entities}?search=key-")).await;
    assert_eq!(found["total"], json!(3), "case-insensitive substring");
    emu.refuses_queries(
        &entities,
        &[
            "page_size=0",
            "page_size=101",
            "current_page=-1",
            "status=archived",
        ],
    )
    .await;

    let reset = format!("{entities}/{}/reset", text(&first["id"]));
    let (status, body) = emu.put(&reset, json!({})).await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (_, usage) = emu.get(&format!("{path}?include_usage=true")).await;
    assert_eq!(
        usage["value_key_usage_map"]["key-a"],
        json!({"current_usage": 0, "status": "active", "is_threshold_alerts_sent": 0, "is_exhausted_alerts_sent": 0})
    );
    assert!(usage["last_reset_at"].is_string());
    let (status, missing) = emu
        .put(&format!("{entities}/no-such-entity/reset"), json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_ab(&missing, "AB08", "no-such-entity");

    let (status, body) = emu
        .put(&path, json!({"reset_usage_for_value": "KEY-c"}))
        .await;
    assert_eq!((status, body), (StatusCode::OK, json!({})));
    let (_, exhausted) = emu.get(&format!("{entities}?status=exhausted")).await;
    assert_eq!(exhausted["total"], json!(0));

    let dumped = emu.dumped_policy(&path).await;
    assert_eq!(
        dumped["resets"],
        json!(2),
        "one entity reset, one reset_usage_for_value"
    );
    assert_eq!(dumped["entities"].as_array().map(Vec::len), Some(4));

    let (_, stats) = emu.control(Method::GET, "/_emulator/stats", None).await;
    let requests = &stats["requests"];
    assert_eq!(
        requests["PUT /ai_gw/v2/policies/usage-limits/{policyUsageLimitsId}/entities/{entityId}/reset"],
        json!({"200": 1, "404": 1})
    );
    assert!(
        requests
            .as_object()
            .is_some_and(|all| all.keys().all(|key| !key.contains("/_emulator"))),
        "{stats}"
    );
}

#[tokio::test]
async fn a_changed_credit_limit_re_evaluates_exhaustion() {
    let emu = Emu::start().await;
    let path = emu.create_policy(budget(json!(10))).await;
    emu.use_budget(&path, "k", 12.0).await;
    emu.put(&path, json!({"credit_limit": 20})).await;
    let (_, entities) = emu.get(&format!("{path}/entities")).await;
    assert_eq!(entities["data"][0]["status"], "active");
    assert_eq!(
        entities["data"][0]["is_exhausted_alerts_sent"],
        json!(1),
        "alerts stay sent"
    );
    emu.put(&path, json!({"credit_limit": 12})).await;
    let (_, entities) = emu.get(&format!("{path}/entities")).await;
    assert_eq!(entities["data"][0]["status"], "exhausted");
}

#[tokio::test]
async fn seeded_policies_take_read_shapes_and_show_in_state() {
    let emu = Emu::start().await;
    let id = "11111111-2222-4333-8444-555555555555";
    let seed = json!({"usage_limits": [
        {"id": id, "name": "seeded", "type": "tokens", "credit_limit": 1000, "periodic_reset_days": 7,
         "conditions": [{"key": "api_key", "value": "k"}], "group_by": [{"key": "api_key"}],
         "resets": 3,
         "entities": [{"id": "e-1", "value_key": "key-1", "current_usage": 1000, "status": "exhausted",
                       "is_exhausted_alerts_sent": 1}]},
        {"type": "cost", "status": "archived",
         "conditions": [{"key": "api_key", "value": "k"}], "group_by": [{"key": "api_key"}],
         "value_key_usage_map": {"key-2": {"current_usage": 3, "status": "active"}}},
    ]});
    let (status, created) = emu.seed(seed).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(created["usage_limits"][0], json!({"id": id}));
    let archived = text(&created["usage_limits"][1]["id"]);

    let (_, list) = emu.get(BASE).await;
    assert_eq!(list["total"], json!(1), "the archived one is not listed");
    assert_eq!(list["data"][0]["periodic_reset_days"], json!(7));
    let (_, read) = emu.get(&format!("{BASE}/{id}?include_usage=true")).await;
    assert_eq!(read["value_key_usage_map"]["key-1"]["status"], "exhausted");
    let (_, entities) = emu.get(&format!("{BASE}/{id}/entities")).await;
    assert_eq!(entities["data"][0]["id"], "e-1");
    let (status, _) = emu
        .get(&format!(
            "{BASE}/{archived}?status=archived&include_usage=true"
        ))
        .await;
    assert_eq!(status, StatusCode::OK);

    let state = emu.state().await;
    let policies = state["usage_limits"].as_array().expect("usage_limits");
    assert_eq!(policies.len(), 2, "archived ones included");
    assert_eq!(policies[0]["resets"], json!(3));
    assert_eq!(policies[1]["entities"][0]["value_key"], "key-2");
    assert_eq!(policies[1]["status"], "archived");

    let (status, error) = emu
        .seed(json!({"usage_limits": [{"type": "requests"}]}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");

    emu.control(Method::DELETE, "/_emulator/state", None).await;
    assert_eq!(emu.state().await["usage_limits"], json!([]));
    let (status, _) = emu.get(&format!("{BASE}/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn lists_lag_and_reads_normalise_like_rate_limits() {
    let emu = Emu::start().await;
    let seed = json!({"usage_limits": [{"type": "cost", "conditions": [{"key": "api_key", "value": "k"}],
                                        "group_by": [{"key": "api_key"}]}]});
    emu.seed(seed).await;
    emu.faults(json!({"list_lag_ms": 60_000})).await;
    let path = emu.create_policy(budget(json!(10.0))).await;
    let (_, list) = emu.get(BASE).await;
    assert_eq!(list["total"], json!(1), "only the seeded policy: {list}");
    let (status, _) = emu.get(&path).await;
    assert_eq!(status, StatusCode::OK, "readable at once");

    emu.faults(json!({"normalise": true})).await;
    let (_, read) = emu.get(&path).await;
    assert_eq!(read["conditions"][0]["key"], "metadata.team");
    assert_eq!(read["group_by"][0]["key"], "metadata.user_id");
    assert_eq!(read["credit_limit"], json!(10), "10.0 comes back as 10");

    emu.faults(json!({"missing_as_ab03": true})).await;
    let missing = format!("{BASE}/00000000-0000-0000-0000-000000000000");
    for method in [Method::GET, Method::PUT, Method::DELETE] {
        let request = emu
            .call(method.clone(), &missing)
            .json(&json!({"name": "x"}));
        let (status, body) = emu.send(request).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method}");
        assert_eq!(body["error"]["code"], "AB03", "{body}");
    }
    emu.faults(json!({})).await;
    let (_, list) = emu.get(BASE).await;
    assert_eq!(list["total"], json!(2));
}

#[tokio::test]
async fn aigw_client_round_trips_a_policy_and_its_usage() {
    let emu = Emu::start().await;
    let client = Client::new(ClientConfig::new(
        emu.running.management_url(),
        emu.running.gateway_url(),
        Arc::new(StaticToken::new(TOKEN)),
    ))
    .expect("client builds");
    let policies = client.usage_limits();
    let created = policies
        .create(&CreateUsageLimitsPolicyRequest {
            name: Some("client".into()),
            conditions: vec![Condition {
                key: "workspace_id".into(),
                value: OneOrMany::One(WORKSPACE.into()),
                excludes: None,
            }],
            group_by: vec![GroupBy {
                key: "api_key".into(),
            }],
            limit_type: UsageLimitType::Cost,
            credit_limit: 50.0,
            alert_threshold: Some(40.0),
            periodic_reset: Some(PeriodicReset::Monthly),
            periodic_reset_days: None,
            workspace_id: Some(WORKSPACE.into()),
        })
        .await
        .expect("create");
    let path = format!("{BASE}/{}", created.id);
    emu.use_budget(&path, "key-1", 60.0).await;

    let read = policies.get(&created.id).await.expect("get");
    assert_eq!(read.limit.credit_limit, 50.0);
    let usage = read.limit.value_key_usage_map.expect("include_usage");
    assert_eq!(usage["key-1"]["status"], "exhausted");

    // The client states every clearable field, `null` included.
    policies
        .update(
            &created.id,
            &UpdateUsageLimitsPolicyRequest {
                credit_limit: Some(100.0),
                periodic_reset_days: Some(10),
                ..Default::default()
            },
        )
        .await
        .expect("update");
    let read = policies.get(&created.id).await.expect("get");
    assert_eq!(
        (
            read.limit.alert_threshold,
            read.limit.periodic_reset,
            read.limit.periodic_reset_days
        ),
        (None, None, Some(10))
    );

    let entities = policies.entities(&created.id).await.expect("entities");
    assert!(entities.complete);
    assert_eq!(entities.items.len(), 1);
    policies
        .reset_entity(&created.id, &entities.items[0].id)
        .await
        .expect("reset");
    assert_eq!(emu.dumped_policy(&path).await["resets"], json!(1));
    let listed = policies.list(&Default::default()).await.expect("list");
    assert_eq!(listed.len(), 1);

    policies.delete(&created.id).await.expect("delete");
    let archived = policies
        .get_with_status(&created.id, PolicyStatus::Archived)
        .await
        .expect("archived read");
    assert_eq!(archived.status, PolicyStatus::Archived);
    assert!(policies.get(&created.id).await.is_err(), "404 by default");
}
