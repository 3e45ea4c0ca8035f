//! The management + data-plane API emulator (axum).
