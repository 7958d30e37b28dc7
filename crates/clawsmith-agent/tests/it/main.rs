//! Integration tests: real HTTP (the scripted provider on 127.0.0.1), real tools, a real SQLite
//! store in a temp dir.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_loop;
mod provider;
mod subagent;
mod support;
mod traces;
mod worktree;
