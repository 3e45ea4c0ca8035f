//! The client of the Kubernetes apiserver: kube's request stack over a connection that speaks
//! HTTP/2 when the apiserver offers it (TLS ALPN), as client-go does.
//!
//! kube's own client speaks HTTP/1.1 only, so every watch holds a TCP and TLS connection of its
//! own, and a burst of concurrent writes opens more that then sit idle in the pool. A sharded
//! replica at 10,000 Configs held 300 to 740 of them, about 35 KB of buffers each (Benchmark
//! chapter). Over HTTP/2 every watch and request is a stream of one connection.
//!
//! The apiserver limits the streams of one connection (kube-apiserver: 100 unless
//! `--http2-max-streams-per-connection` says otherwise), and a watch holds a stream while it
//! runs: a request sent past the limit waits for a stream to end, and a watch may not end for
//! minutes. hyper's client never opens a second HTTP/2 connection to a host, so [`Pool`] does:
//! it counts the streams in flight on each connection and opens another when every one has
//! [`STREAMS_PER_CONNECTION`] (Go's client, and so client-go, does the same). A sharded
//! replica with 240 watches needs five connections. The Leases have a client of their own
//! (HTTP/1.1, `aigw operator`), so a renewal never waits behind watches.
//!
//! `--kube-http1` goes back to one connection per request for an apiserver or proxy that
//! misbehaves with HTTP/2. With a proxy (`proxy-url` in the kubeconfig) or an exec credential
//! plugin, kube's own stack is used.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::{Body, ClientBuilder, ConfigExt, DynBody};
use tower::util::BoxService;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

/// The request stack of a client (kube's `GenericService`, which kube does not export).
pub type GenericService = BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

/// How often an idle HTTP/2 connection is pinged, and how long a ping may go unanswered before
/// the connection (and every watch on it) is dropped and dialled again: client-go's
/// `ReadIdleTimeout` and `PingTimeout`.
const PING_EVERY: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// The flow-control windows of a stream and of a connection: Go's (and so client-go's). A body
/// nobody reads (a watch whose consumer waits) holds at most its stream's window, so the
/// connection's window never runs out for the other streams on it; the windows are credit the
/// apiserver may send ahead, not memory allocated.
const STREAM_WINDOW: u32 = 4 << 20;
const CONNECTION_WINDOW: u32 = 1 << 30;

/// Streams [`Pool`] sends on one connection at once, well below kube-apiserver's default limit of
/// 100 (and of proxies in front of it, often lower), so that a request never waits for a watch to
/// end.
pub const STREAMS_PER_CONNECTION: usize = 50;

/// Which HTTP versions the client offers the apiserver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/2 where the apiserver agrees to it (ALPN), HTTP/1.1 otherwise.
    Http2,
    /// HTTP/1.1 only (kube's own client).
    Http1,
}

/// A client of the apiserver that `config` names, speaking `protocol`.
pub fn client(config: kube::Config, protocol: Protocol) -> Result<kube::Client, kube::Error> {
    Ok(builder(config, protocol)?.build())
}

/// [`client`]'s builder, for a caller that adds layers of its own: kube's layers (base URI,
/// retries of 5xx, authentication, extra headers) over a [`Pool`].
pub fn builder(
    mut config: kube::Config,
    protocol: Protocol,
) -> Result<ClientBuilder<GenericService>, kube::Error> {
    // kube's own stack for what only it handles: proxies, and exec plugins (their client
    // certificates expire, and kube marks the client with that time).
    if protocol == Protocol::Http1 || config.proxy_url.is_some() || config.auth_info.exec.is_some()
    {
        identify(&mut config);
        return ClientBuilder::try_from(config);
    }
    Ok(pooled(config, STREAMS_PER_CONNECTION)?.0)
}

/// The `User-Agent` of every request to the apiserver, as client-go sends its binary's name
/// and version: the apiserver's audit log and metrics tell aigw's requests apart by it, and a
/// write that names no field manager is recorded under its first word (`aigw`), not `unknown`.
pub const USER_AGENT: &str = concat!("aigw/", env!("CARGO_PKG_VERSION"));

/// The parameters of a patch that names `manager` as its field manager, so `managedFields`
/// say which part of aigw wrote each field (a write naming none is recorded under the
/// User-Agent's first word).
pub fn written_by(manager: &str) -> kube::api::PatchParams {
    kube::api::PatchParams {
        field_manager: Some(manager.to_string()),
        ..Default::default()
    }
}

/// Adds [`USER_AGENT`] to the headers `config` sends, unless it has one of its own.
fn identify(config: &mut kube::Config) {
    if !config
        .headers
        .iter()
        .any(|(name, _)| name == http::header::USER_AGENT)
    {
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(USER_AGENT),
        ));
    }
}

/// An HTTP/2 [`builder`] whose connections carry at most `streams` each, and its [`Pool`].
pub fn pooled(
    mut config: kube::Config,
    streams: usize,
) -> Result<(ClientBuilder<GenericService>, Pool<Connector>), kube::Error> {
    identify(&mut config);
    let pool = Pool::new(connector(&config)?, streams);
    let retry = config
        .default_retry
        .then(|| tower::retry::RetryLayer::new(kube::client::retry::RetryPolicy::server_retry()));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .service(pool.clone())
        .boxed();
    Ok((ClientBuilder::new(service, config.default_namespace), pool))
}

/// How a [`Pool`] dials the apiserver.
pub type Connector = hyper_timeout::TimeoutConnector<hyper_rustls::HttpsConnector<HttpConnector>>;

/// TCP, then TLS offering `h2` and `http/1.1`, with the kubeconfig's certificates and timeouts.
fn connector(config: &kube::Config) -> Result<Connector, kube::Error> {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_connect_timeout(config.connect_timeout);
    // HTTP/2 writes a request's HEADERS and DATA frames apart: with Nagle's algorithm the DATA
    // waits for the peer's delayed ACK (40 ms on Linux). Go's dialer, and so client-go's, sets it.
    tcp.set_nodelay(true);
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http();
    let tls = match &config.tls_server_name {
        Some(name) => {
            let name = name.clone().try_into().map_err(|e| {
                kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(e))
            })?;
            tls.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name))
        }
        None => tls,
    };
    let mut connector =
        hyper_timeout::TimeoutConnector::new(tls.enable_all_versions().wrap_connector(tcp));
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    Ok(connector)
}

/// HTTP/2 connections to the apiserver, each carrying at most `streams` requests and watches at
/// once: a request goes to the first connection with a stream to spare, or to a new one.
///
/// A stream is counted from the request until its answer's body is dropped (a watch: until the
/// watch ends). Each connection is a hyper client of its own, which keeps one connection, dials
/// it again when it drops and pings it while idle.
#[derive(Clone)]
pub struct Pool<C> {
    connector: C,
    streams: usize,
    connections: Arc<Mutex<Vec<Connection<C>>>>,
}

struct Connection<C> {
    client: hyper_util::client::legacy::Client<C, Body>,
    in_flight: Arc<AtomicUsize>,
}

impl<C: Connect + Clone + Send + Sync + 'static> Pool<C> {
    pub fn new(connector: C, streams: usize) -> Self {
        Self {
            connector,
            streams: streams.max(1),
            connections: Arc::default(),
        }
    }

    /// The connection this request goes to, its stream counted.
    fn take_stream(&self) -> (hyper_util::client::legacy::Client<C, Body>, Stream) {
        let mut connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        let spare = connections
            .iter()
            .position(|c| c.in_flight.load(Ordering::Acquire) < self.streams);
        let index = spare.unwrap_or_else(|| {
            let client = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .pool_timer(TokioTimer::new())
                .http2_keep_alive_interval(PING_EVERY)
                .http2_keep_alive_timeout(PING_TIMEOUT)
                .http2_keep_alive_while_idle(true)
                .http2_initial_stream_window_size(STREAM_WINDOW)
                .http2_initial_connection_window_size(CONNECTION_WINDOW)
                .build(self.connector.clone());
            connections.push(Connection {
                client,
                in_flight: Arc::default(),
            });
            connections.len() - 1
        });
        let connection = &connections[index];
        connection.in_flight.fetch_add(1, Ordering::AcqRel);
        let stream = Stream(connection.in_flight.clone());
        (connection.client.clone(), stream)
    }

    /// Connections opened so far, and the streams in flight on each.
    pub fn streams_in_flight(&self) -> Vec<usize> {
        let connections = self.connections.lock().unwrap_or_else(|e| e.into_inner());
        connections
            .iter()
            .map(|c| c.in_flight.load(Ordering::Acquire))
            .collect()
    }
}

impl<C: Connect + Clone + Send + Sync + 'static> Service<Request<Body>> for Pool<C> {
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let (client, stream) = self.take_stream();
        Box::pin(async move {
            let response = client.request(request).await?;
            Ok(response.map(|body| {
                Box::new(Counted {
                    body,
                    _stream: stream,
                }) as Box<DynBody>
            }))
        })
    }
}

/// One stream in flight on a connection of a [`Pool`], given back when dropped.
struct Stream(Arc<AtomicUsize>);

impl Drop for Stream {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body, its stream in flight until it is dropped.
struct Counted {
    body: Incoming,
    _stream: Stream,
}

impl HttpBody for Counted {
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body)
            .poll_frame(cx)
            .map_err(BoxError::from)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> kube::Config {
        kube::Config::new("https://127.0.0.1:6443".parse().expect("a URL"))
    }

    #[test]
    fn every_client_names_aigw_as_its_user_agent_unless_told_otherwise() {
        let user_agents = |config: &kube::Config| -> Vec<String> {
            config
                .headers
                .iter()
                .filter(|(name, _)| name == http::header::USER_AGENT)
                .map(|(_, value)| value.to_str().unwrap_or_default().to_string())
                .collect()
        };
        let mut plain = config();
        identify(&mut plain);
        identify(&mut plain);
        assert_eq!(user_agents(&plain), [USER_AGENT]);
        assert!(USER_AGENT.starts_with("aigw/"));

        let mut own = config();
        own.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static("mine/1"),
        ));
        identify(&mut own);
        assert_eq!(user_agents(&own), ["mine/1"]);
    }
}
