//! The integration tests: one binary (one link of the library, `support` compiled once), its
//! modules grouped by layer:
//!
//! - `api`: the API client and the emulator over real HTTP, and the emulator's contract with the
//!   published OpenAPI description (no apiserver).
//! - `controller`: the controllers and the real `aigw operator` against a real kube-apiserver
//!   and the emulator, kind by kind and guarantee by guarantee.
//! - `gitops`: `aigw validate`/`plan`/`export`/`history`, the GitOps modes and promotion.
//! - `chart`: the CRDs on the apiserver, the chart's RBAC with the real operator, monitoring.
//! - `docs`: the book builds and keeps up with the code.
//!
//! All of them share one process and run in parallel: each test works in namespaces of its own
//! (`support::TestEnv`), and a test that needs the cluster to itself says so
//! (`support::exclusive_cluster`). `chaos` and `bench` stay separate targets (`make chaos`,
//! `make bench`).

mod api;
mod chart;
mod controller;
mod docs;
mod gitops;
mod support;
