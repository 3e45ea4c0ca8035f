//! aigw: a Kubernetes operator that keeps an AI gateway's management API in line with custom resources.

pub mod api;
pub mod controller;
pub mod emulator;
pub mod gitops;
pub mod resources;
