//! The CRDs on the apiserver, the chart's RBAC with the real operator, and monitoring.

mod crds;
mod monitoring;
mod rbac;
