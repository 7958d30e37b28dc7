//! Integration tests of clawsmith-core: every call goes through the full pipeline with a real
//! SQLite store in a temp dir.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod artifacts;
mod capture;
mod codes;
mod commits;
mod crash;
mod hidden;
mod hooks;
mod normalize;
mod parallel;
mod protected;
mod repository;
mod search;
mod table;
mod todos;
mod traces;
