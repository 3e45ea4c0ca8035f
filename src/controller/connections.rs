//! Which management API client an object uses, from its `spec.connectionRef`.

use crate::api::Client;

use super::error::Error;

/// Resolves connection names to API clients. The operator's flags define the client used
/// for the connection named `default`.
pub struct Connections {
    default: Option<Client>,
}

impl Connections {
    pub fn new(default: Option<Client>) -> Self {
        Self { default }
    }

    /// The client for `name`, as seen from an object in `namespace`.
    pub async fn client_for(&self, _namespace: &str, name: &str) -> Result<Client, Error> {
        match (&self.default, name) {
            (Some(client), "default") => Ok(client.clone()),
            (None, "default") => Err(Error::Connection(
                "no connection named default: start the operator with --management-url and --token-file".into(),
            )),
            (_, other) => Err(Error::Connection(format!("connection {other} not found"))),
        }
    }
}
