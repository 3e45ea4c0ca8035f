pub mod claims;
pub mod connections;
pub mod followers;
pub mod installation;
pub mod relay;
pub mod secret_cache;
pub mod secret_values;
pub mod triggers;
