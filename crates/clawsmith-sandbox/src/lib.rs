//! # clawsmith-sandbox
//!
//! The only crate of clawsmith that spawns processes (SPEC C1–C4).
//!
//! ## Main types
//! - [`classify::check_command`]: the disaster check (C1), a pure function over the command text
//!   that runs before anything else and that no approval overrides.
pub mod classify;
