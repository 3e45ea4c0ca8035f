pub mod claims;
pub mod connections;
