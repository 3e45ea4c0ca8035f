//! Reconcile driver shared by all kinds, and per-kind observe/create/update/delete.
