pub mod backoff;
pub mod census;
pub mod events;
pub mod failpoints;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod unreadable;
