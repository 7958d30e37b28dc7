//! A8 with real processes (filled in below).
