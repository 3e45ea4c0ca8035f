//! Secret reads come from watch caches (issue 30): a mixed set — a Deployment with delivered
//! credentials, an ApiKey, a Config with a Secret-backed value and an Integration whose key
//! is a labelled Secret of the operator's namespace — makes no apiserver GET of any Secret, at
//! creation, at steady state or when a referenced Secret changes: the Config's Secret is
//! labelled aigw.io/referenced by aigw and read from the values cache that label selects, the
//! Integration's from the cache of the Secrets labelled cluster-readable.

use crate::support;

use std::time::Duration;

use aigw::controller::state::secret_cache::{Cached, REFERENCED_LABEL};
use aigw::resources::{ApiKey, Config, Deployment, Integration};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::json;
use support::harness::Harness;
use support::objects::{Conditions, create, gateway, secret};

const WAIT: Duration = Duration::from_secs(30);
/// The drift interval: a reconcile of each object every second or so, for the steady state.
const DRIFT: Duration = Duration::from_secs(1);
const STEADY: Duration = Duration::from_secs(10);

/// The Secret GETs the operator sent since `from` (an index into [`Harness::secret_gets`]),
/// leaving out its hash key (read once at start, before the controllers).
fn gets_since(h: &Harness, from: usize) -> Vec<String> {
    h.secret_gets()
        .into_iter()
        .skip(from)
        .filter(|g| !g.contains("/secrets/aigw-hash-key "))
        .collect()
}

#[tokio::test]
async fn a_mixed_set_reads_no_secret_from_the_apiserver_at_steady_state() {
    let h = Harness::start_with_secret_namespace("sec-gets", DRIFT).await;
    let start = h.secret_gets().len();
    let secrets = h.env.api::<Secret>();
    // The Config's Secret, unlabelled (a namespaced resource reads any Secret of its
    // namespace), and the Integration's key, labelled for cluster-scoped readers.
    support::create(&secrets, &secret("db", &[("password", "s3cr3t-db-Kq8")])).await;
    let mut key = secret("upstream", &[("api-key", "sk-upstream-Zr4Tn6")]);
    key.metadata.labels = Some([("aigw.io/cluster-readable".into(), "true".into())].into());
    support::create(&secrets, &key).await;
    // Created before the resources, as a user applies them: the operator's metadata cache
    // holds them before any resource names them (else a read could not tell "created a moment
    // ago" from "missing", and would ask the apiserver, as it should).
    for name in ["db", "upstream"] {
        support::wait_until(WAIT, || async {
            matches!(
                h.ctx.secrets.metadata(&h.env.namespace, name).await,
                Cached::Found(Some(_))
            )
            .then_some(())
        })
        .await
        .expect("the metadata cache holds the Secret");
    }

    create::<Deployment>(&h.env, "gw", gateway("gw", "gw-creds")).await;
    let key_spec = json!({"name": "svc", "kind": "service", "scopes": ["completions.write"],
        "secretRef": {"name": "svc-key"}});
    create::<ApiKey>(&h.env, "svc", key_spec).await;
    let config_spec = json!({"name": "routing", "config": {"provider": "openai"},
        "secretRefs": [{"path": "/api_key", "secretKeyRef": {"name": "db", "key": "password"}}]});
    create::<Config>(&h.env, "routing", config_spec).await;
    let integrations = Api::<Integration>::all(h.env.client.clone());
    let integration = json!({"slug": h.cluster_name("openai"), "name": "OpenAI",
        "aiProviderId": "open-ai", "keySecretRef": {"name": "upstream", "key": "api-key"}});
    h.create_cluster::<Integration>("openai", integration).await;

    h.wait_for::<Deployment>("gw", WAIT, |d| d.ready()).await;
    h.wait_for::<ApiKey>("svc", WAIT, |k| k.ready()).await;
    let config = h.wait_for::<Config>("routing", WAIT, |c| c.ready()).await;
    let slug = config.status.and_then(|s| s.slug).expect("status.slug");
    let name = h.cluster_name("openai");
    assert!(
        support::ready_within(&integrations, &name, WAIT).await,
        "the Integration is Ready"
    );

    // At creation: no GET of any Secret (the caches say whether a delivered one exists and
    // whose it is, and hold the values of the referenced ones), and no fallback counted.
    let created = gets_since(&h, start);
    eprintln!(
        "Secret GETs at creation of 4 resources: {} {created:?}; fallbacks {:?}",
        created.len(),
        h.ctx.secrets.fallbacks()
    );
    assert!(created.is_empty(), "{created:?}");
    assert!(
        h.ctx.secrets.fallbacks().is_empty(),
        "{:?}",
        h.ctx.secrets.fallbacks()
    );
    // The Config's Secret carries aigw's label; the Integration's, in the Connection secret
    // namespace, only its user's (aigw writes nothing there).
    let label = |s: &Secret| s.metadata.labels.clone().unwrap_or_default();
    let db = secrets.get("db").await.unwrap();
    assert_eq!(
        label(&db).get(REFERENCED_LABEL).map(String::as_str),
        Some("true")
    );
    // Its managedFields name aigw's writer of the label.
    let labeller = db.metadata.managed_fields.iter().flatten().find(|entry| {
        let fields = entry.fields_v1.as_ref().map(|f| f.0.to_string());
        fields.is_some_and(|f| f.contains(REFERENCED_LABEL))
    });
    assert_eq!(
        labeller.and_then(|entry| entry.manager.as_deref()),
        Some("aigw/secret-references")
    );
    let upstream = secrets.get("upstream").await.unwrap();
    assert!(!label(&upstream).contains_key(REFERENCED_LABEL));

    // At steady state (a reconcile of each about every second): none at all.
    let mark = h.secret_gets().len();
    tokio::time::sleep(STEADY).await;
    let steady = gets_since(&h, mark);
    eprintln!(
        "Secret GETs in {STEADY:?} of steady state: {} {steady:?}",
        steady.len()
    );
    assert!(steady.is_empty(), "{steady:?}");

    // A changed referenced Secret is applied from the values cache (the replace drops aigw's
    // label, as a user's apply of their manifest may: aigw labels it again), no GET.
    let mark = h.secret_gets().len();
    secrets
        .replace(
            "db",
            &PostParams::default(),
            &secret("db", &[("password", "s3cr3t-db-new-Wm2")]),
        )
        .await
        .unwrap();
    let path = format!("/ai_gw/v2/configs/{slug}");
    support::wait_until(WAIT, || async {
        let remote = h.get(&path).await;
        let document = remote["config"].as_str().unwrap_or_default().to_string();
        document.contains("s3cr3t-db-new-Wm2").then_some(())
    })
    .await
    .expect("the new value is applied");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let changed = gets_since(&h, mark);
    assert!(changed.is_empty(), "{changed:?}");
    assert!(
        h.ctx.secrets.fallbacks().is_empty(),
        "{:?}",
        h.ctx.secrets.fallbacks()
    );
    h.stop().await;
}
