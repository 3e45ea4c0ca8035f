//! The book builds, and keeps up with the code.

mod book;
mod readme;
