//! The controllers (in process, and the real `aigw operator`) on a real kube-apiserver against the emulator.

mod api_key_replacement;
mod api_keys;
mod config_refs;
mod config_rollouts;
mod conformance;
mod controllers;
mod credentials_attacks;
mod drift;
mod exactly_once;
mod free_form_limits;
mod gate;
mod guardrails;
mod integrations;
mod leader;
mod mcp_integrations;
mod mcp_servers;
mod rotation;
mod secrecy;
mod secrecy_kinds;
mod secret_cache;
mod secret_references;
mod tenancy;
mod usage_limits;
mod workspace_holders;
mod workspace_refs;
mod workspaces;
