//! Tables of capability declarations, risks and permission rules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod capabilities;
mod properties;
mod protected;
mod rules;
