//! Integration tests of the wire shapes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod golden;
mod roundtrip;
