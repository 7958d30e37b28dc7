//! Integration tests of clawsmith-sandbox: the disaster-check corpus, the runner's limits and
//! sandbox, the `run_command` tool and the background command service.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod classify_corpus;
