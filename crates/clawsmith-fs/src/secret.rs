//! Secrets the front ends' local servers hand out (the web view's prefix, token and CSRF secret;
//! the MCP HTTP server's bearer token) and their comparison. They live in this crate because it
//! is the lowest layer every such server already depends on that reads the operating system's
//! random source; the web view needs nothing above it.

/// 128 bits from the operating system's random source, as 32 hex digits.
pub fn new_secret() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        filled +=
            rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty())
                .map_err(std::io::Error::from)?;
    }
    Ok(hex::encode(bytes))
}

/// Equality whose time does not depend on where the inputs first differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}
