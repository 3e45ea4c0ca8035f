//! What every kind of the emulator shares, importing none of them: the options and the state
//! every route sees (`state`), errors in the API's envelope with its `AB` codes (`errors`), request
//! fields and identifiers (`fields`), secret mappings (`mappings`), paging and policy fields (`policy_fields`), the
//! store of records by id or slug (`records`), the routes of a collection (`routes`), read shapes
//! (`normalise`), the fault switches (`faults`) and the middleware that applies them with the
//! statistics (`middleware`), bearer and OAuth2 authentication (`auth`), ids and slugs (`ids`),
//! the API's clock (`clock`), the killable listener (`listener`) and the workspace access rows of
//! integrations (`access`).

pub mod access;
pub mod auth;
pub mod clock;
pub mod errors;
pub mod faults;
pub mod fields;
pub mod ids;
pub mod listener;
pub mod mappings;
pub mod middleware;
pub mod normalise;
pub mod options;
pub mod policy_fields;
pub mod records;
pub mod routes;
pub mod state;
