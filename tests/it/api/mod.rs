//! The API client and the emulator over real HTTP, and the emulator against the OpenAPI contract.

mod api_keys_client;
mod client;
mod contract_openapi;
mod crd_fidelity;
mod emulator;
mod emulator_api_keys;
mod emulator_gateway;
mod emulator_integrations;
mod emulator_mcp;
mod emulator_secret_references;
mod emulator_usage_limits;
mod emulator_workspaces;
mod integrations_client;
mod mcp_client;
mod workspaces_client;
