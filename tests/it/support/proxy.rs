//! Proxies in front of the emulator, for tests that change what the operator sees of the API:
//! forward a request, answer one, serve the proxy.

/// Sends what a proxy received on to the emulator (its credentials and content type with it);
/// the status and body of the answer.
pub async fn forward(
    client: &reqwest::Client,
    upstream: &str,
    parts: &axum::http::request::Parts,
    path: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut out = client
        .request(parts.method.clone(), format!("{upstream}{path}"))
        .body(body.to_vec());
    for (name, value) in &parts.headers {
        if name == "authorization" || name == "content-type" || name.as_str().starts_with("x-") {
            out = out.header(name.as_str(), value.as_bytes());
        }
    }
    let answer = out.send().await.unwrap();
    let status = answer.status().as_u16();
    (status, answer.bytes().await.unwrap().to_vec())
}

/// A JSON answer of a proxy.
pub fn json_answer(
    status: u16,
    body: impl Into<axum::body::Body>,
) -> axum::response::Response<axum::body::Body> {
    axum::response::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap()
}

/// Serves a proxy on a free local port; its URL.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}
