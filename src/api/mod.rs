//! Wire models and HTTP client for the management API. No Kubernetes here.
