pub mod config;
pub mod config_refs;
pub mod connection;
pub mod deployment;
pub mod guardrail;
pub mod policy;
pub mod rate_limits_policy;
pub mod usage_limits_policy;
