//! Integration tests of clawsmith-mcp: a real rmcp client against the server (in-process over a
//! duplex pipe), and the MCP client against a real external server process (the
//! `clawsmith-mcp-fixture` binary of this crate).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
mod config;
mod process;
mod server;
mod support;
