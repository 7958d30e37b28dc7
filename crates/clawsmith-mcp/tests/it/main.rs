//! Integration tests of clawsmith-mcp: a real rmcp client against the server (in-process over a
//! duplex pipe), and the MCP client against a real external server process (the
//! `clawsmith-mcp-fixture` binary of this crate), and against a remote server over HTTP (the
//! Python MCP SDK's, behind a scripted OAuth authorization server).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
mod config;
mod process;
mod remote;
mod server;
mod support;
