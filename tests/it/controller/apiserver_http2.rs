//! The operator's apiserver client speaks HTTP/2 to the real kube-apiserver (ALPN), watches and
//! requests together as streams of one connection, and `--kube-http1` speaks HTTP/1.1.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aigw::controller::runtime::apiserver::{self, Protocol};
use futures::StreamExt;
use http::Version;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use kube::config::KubeConfigOptions;
use kube::{Api, Config};
use serde_json::json;

use crate::support;

/// A client of the local control plane speaking `protocol`, and the HTTP version of every answer
/// it gets.
async fn client(protocol: Protocol) -> (kube::Client, Arc<Mutex<Vec<Version>>>) {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(support::kubeconfig_path()).expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("invalid kubeconfig");
    let versions = Arc::new(Mutex::new(Vec::new()));
    let seen = versions.clone();
    let client = apiserver::builder(config, protocol)
        .expect("kube client")
        .with_layer(&tower::util::MapResponseLayer::new(
            move |response: http::Response<Box<kube::client::DynBody>>| {
                seen.lock().unwrap().push(response.version());
                response
            },
        ))
        .build();
    (client, versions)
}

/// Opens three watches and, while they run, lists, creates and reads: every answer comes back in
/// `protocol`'s version.
async fn watches_and_requests(protocol: Protocol, expected: Version) {
    let (client, versions) = client(protocol).await;
    let namespace = format!("http-{}", uuid::Uuid::new_v4().simple());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap(),
        )
        .await
        .expect("create the namespace");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let mut watches = Vec::new();
    for _ in 0..3 {
        let stream = maps
            .watch(&WatchParams::default().timeout(30).disable_bookmarks(), "0")
            .await
            .expect("watch");
        watches.push(stream.boxed());
    }
    for i in 0..3 {
        let map: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("m{i}")}})).unwrap();
        maps.create(&PostParams::default(), &map)
            .await
            .expect("create");
    }
    // Each watch, opened before the creates, sees all three while the others stay open.
    for watch in &mut watches {
        for _ in 0..3 {
            let event = tokio::time::timeout(Duration::from_secs(20), watch.next())
                .await
                .expect("a watch event within 20 s")
                .expect("the watch ended")
                .expect("a watch event");
            assert!(matches!(event, WatchEvent::Added(_)), "{event:?}");
        }
    }
    assert_eq!(
        maps.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        3
    );
    support::drop_namespace(&client, &namespace).await;
    let versions = versions.lock().unwrap().clone();
    assert!(versions.len() >= 9, "answers seen: {versions:?}");
    assert!(
        versions.iter().all(|v| *v == expected),
        "every answer in {expected:?}: {versions:?}"
    );
}

#[tokio::test]
async fn the_operator_client_speaks_http2_to_the_apiserver() {
    watches_and_requests(Protocol::Http2, Version::HTTP_2).await;
}

#[tokio::test]
async fn kube_http1_speaks_http_1_1() {
    watches_and_requests(Protocol::Http1, Version::HTTP_11).await;
}

/// Watches past a connection's streams open a second connection instead of waiting for a stream
/// to end (kube-apiserver allows 100 a connection; here the pool allows 2), and each stream is
/// given back when its watch ends.
#[tokio::test]
async fn watches_past_a_connections_streams_open_another_connection() {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(support::kubeconfig_path()).expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("invalid kubeconfig");
    let (builder, pool) = apiserver::pooled(config, 2).expect("kube client");
    let client = builder.build();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.list(&ListParams::default()).await.expect("list");
    assert_eq!(
        pool.streams_in_flight(),
        vec![0],
        "a list's stream ends with its answer"
    );
    let mut watches = Vec::new();
    for _ in 0..3 {
        let stream = namespaces
            .watch(&WatchParams::default().timeout(60), "0")
            .await
            .expect("watch");
        watches.push(stream.boxed());
    }
    assert_eq!(
        pool.streams_in_flight(),
        vec![2, 1],
        "three watches on two connections"
    );
    // A request while every stream of the first connection is a watch is answered.
    tokio::time::timeout(
        Duration::from_secs(10),
        namespaces.list(&ListParams::default()),
    )
    .await
    .expect("a list answered beside three watches")
    .expect("list");
    drop(watches);
    assert_eq!(
        pool.streams_in_flight(),
        vec![0, 0],
        "every watch's stream given back"
    );
}
