//! The routes of a collection the API serves the usual way: list and create on its path, read,
//! update and delete on `{path}/{id}`.

use axum::{Router, handler::Handler, routing::get};

/// `GET`/`POST base` (`list`, `create`) and `GET`/`PUT`/`DELETE base/{param}` (`read`,
/// `update`, `delete`).
pub fn crud<S, L, C, R, U, D, Tl, Tc, Tr, Tu, Td>(
    base: &str,
    param: &str,
    (list, create): (L, C),
    (read, update, delete): (R, U, D),
) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
    L: Handler<Tl, S>,
    C: Handler<Tc, S>,
    R: Handler<Tr, S>,
    U: Handler<Tu, S>,
    D: Handler<Td, S>,
    Tl: 'static,
    Tc: 'static,
    Tr: 'static,
    Tu: 'static,
    Td: 'static,
{
    Router::new().route(base, get(list).post(create)).route(
        &format!("{base}/{{{param}}}"),
        get(read).put(update).delete(delete),
    )
}
