//! Integration tests of clawsmith-checkpoint.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod at_rest;
mod blob_files;
mod concurrency;
mod crash;
mod diff;
mod fork;
mod hostile;
mod migration;
mod open;
mod property;
mod retention;
mod session;
mod support;
mod tools;
mod turn;
mod undo;
