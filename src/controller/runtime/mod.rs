pub mod backoff;
pub mod events;
pub mod failpoints;
pub mod health;
pub mod leader;
pub mod metrics;
