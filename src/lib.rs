//! aigw: a Kubernetes operator that keeps an AI gateway's management API in line with custom resources.

pub mod api;
pub mod argocd;
pub mod controller;
pub mod emulator;
pub mod gitops;
pub mod registry;
pub mod resources;

/// Unit tests count their allocations, so a test can bound the memory a function needs
/// (`gitops::line_diff`).
#[cfg(test)]
#[global_allocator]
static COUNTING: gitops::line_diff::peak::Counting = gitops::line_diff::peak::Counting;
