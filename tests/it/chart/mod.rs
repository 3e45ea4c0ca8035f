//! The CRDs on the apiserver, the chart's RBAC with the real operator and as the kind registry
//! says it, and monitoring.

mod crds;
mod monitoring;
mod rbac;
mod registry_rbac;
