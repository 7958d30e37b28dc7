//! Lays out the `clawsmith` binary's start-up code together (issue 15).
//!
//! A `clawsmith call` executes ~1,500 functions spread over the binary's 21 MB of code, and the
//! kernel maps code into a process 64 KB at a time, on the first touch of each window: 119 such
//! page faults a call (~2.5 µs each on the bench machine) went to code alone. `order/clawsmith.txt`
//! lists the functions those start-ups run (written by `cargo xtask order-file` from callgrind
//! runs of the release binary), and the linker places them first, in ~2 MB: the code's faults
//! fall to a few dozen. The order changes where functions sit, never what they do; a name the
//! build no longer has is skipped, so a stale list costs speed only.
//!
//! Only for release-profile builds (`release`, `profiling`) on x86_64 Linux with glibc, whose
//! default linker is LLD (the only one of the platform's linkers that reads an ordering file),
//! and not when the build chooses its own linker through `RUSTFLAGS`. `CLAWSMITH_LINK_MAP=PATH`
//! also writes the linker's map there: `cargo xtask order-file` reads the names from it.

use std::path::Path;

fn main() {
    let list = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("order")
        .join("clawsmith.txt");
    println!("cargo::rerun-if-changed={}", list.display());
    println!("cargo::rerun-if-env-changed=CLAWSMITH_LINK_MAP");
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    let lld_by_default = env("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && env("CARGO_CFG_TARGET_OS") == "linux"
        && env("CARGO_CFG_TARGET_ENV") == "gnu";
    let own_linker = env("CARGO_ENCODED_RUSTFLAGS").contains("link");
    if env("PROFILE") != "release" || !lld_by_default || own_linker {
        return;
    }
    if list.is_file() {
        println!(
            "cargo::rustc-link-arg-bin=clawsmith=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo::rustc-link-arg-bin=clawsmith=-Wl,--no-warn-symbol-ordering");
    }
    if let Ok(map) = std::env::var("CLAWSMITH_LINK_MAP") {
        println!("cargo::rustc-link-arg-bin=clawsmith=-Wl,--Map={map}");
    }
}
