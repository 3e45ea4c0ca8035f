//! Custom resource types: one module per kind.
