pub mod claims;
pub mod connections;
pub mod followers;
pub mod installation;
pub mod relay;
