//! Integration tests of clawsmith-checkpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod concurrency;
mod diff;
mod fork;
mod open;
mod retention;
mod session;
mod support;
mod turn;
mod undo;
