//! Bounded capture of a command's merged output: the first and last halves of the cap, with an
//! explicit marker between them when bytes were dropped. Memory stays at the cap however much
//! the command prints.

use std::collections::VecDeque;

/// Head-and-tail capture of a byte stream.
#[derive(Debug)]
pub struct BoundedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl BoundedOutput {
    /// Keeps at most `cap` bytes.
    pub fn new(cap: usize) -> BoundedOutput {
        let head_cap = cap / 2 + cap % 2;
        BoundedOutput {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap / 2,
            total: 0,
        }
    }

    /// Appends a chunk.
    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if self.head.len() < self.head_cap {
            let take = chunk.len().min(self.head_cap - self.head.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        if self.tail_cap == 0 || chunk.is_empty() {
            return;
        }
        if chunk.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend(chunk[chunk.len() - self.tail_cap..].iter().copied());
            return;
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(chunk.iter().copied());
    }

    /// Bytes seen in total.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Bytes dropped.
    pub fn omitted_bytes(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    /// The kept text (lossy UTF-8) with the marker, and whether anything was dropped.
    pub fn finish(self) -> (String, bool) {
        let omitted = self.omitted_bytes();
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if omitted > 0 {
            text.push_str(&format!(
                "\n[... output truncated: {omitted} of {} bytes omitted ...]\n",
                self.total
            ));
        }
        let tail: Vec<u8> = self.tail.into_iter().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        (text, omitted > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_stays_at_the_cap() {
        let cap = 64 * 1024;
        let mut out = BoundedOutput::new(cap);
        let chunk = vec![b'y'; 64 * 1024 + 7];
        for _ in 0..800 {
            out.push(&chunk);
        }
        assert_eq!(out.total_bytes(), 800 * chunk.len() as u64);
        assert!(
            out.head.capacity() + out.tail.capacity() <= 2 * cap,
            "retained capacity"
        );
        let (text, truncated) = out.finish();
        assert!(truncated);
        assert!(text.len() < cap + 100);
    }

    #[test]
    fn keeps_head_and_tail() {
        let cases: &[(usize, &[&str], &str, bool)] = &[
            (10, &["hello"], "hello", false),
            (10, &["0123456789"], "0123456789", false),
            (
                4,
                &["0123456789"],
                "01\n[... output truncated: 6 of 10 bytes omitted ...]\n89",
                true,
            ),
            (
                4,
                &["01", "23", "45", "67", "89"],
                "01\n[... output truncated: 6 of 10 bytes omitted ...]\n89",
                true,
            ),
            (
                0,
                &["abc"],
                "\n[... output truncated: 3 of 3 bytes omitted ...]\n",
                true,
            ),
        ];
        for (cap, chunks, expected, truncated) in cases {
            let mut out = BoundedOutput::new(*cap);
            for chunk in *chunks {
                out.push(chunk.as_bytes());
            }
            assert_eq!(
                out.finish(),
                ((*expected).to_owned(), *truncated),
                "{cap} {chunks:?}"
            );
        }
    }
}
