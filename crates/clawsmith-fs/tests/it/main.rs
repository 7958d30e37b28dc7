//! Integration tests of clawsmith-fs: the workspace handle, the seven tools, the escape suite and
//! the races.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod attack;
mod escape;
mod hidden;
mod manifest;
mod property;
mod race;
mod search;
mod support;
mod tools;
mod watch;
mod workspace;
