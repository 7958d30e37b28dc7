//! Lays out the `clawsmith` binary's start-up code together.
//!
//! A `clawsmith call` executes ~1,500 functions spread over the binary's 21 MB of code, and the
//! kernel maps code into a process 64 KB at a time, on the first touch of each window: 119 such
//! page faults a call (~2.5 µs each on the bench machine) went to code alone. `order/clawsmith.txt`
//! lists the functions those start-ups run (written by `cargo xtask order-file` from callgrind
//! runs of the release binary), and the linker places them first, in ~3 MB: the code's faults
//! fall to a few dozen. The order changes where functions sit, never what they do; a name the
//! build no longer has is skipped, so a stale list costs speed only.
//!
//! Only for release-profile builds (`release`, `profiling`) on x86_64 Linux with glibc, whose
//! default linker is the LLD rustup's toolchain ships (`gcc-ld/ld.lld` in its sysroot; GNU ld
//! does not read an ordering file): a toolchain without it, or a build whose `RUSTFLAGS` say
//! anything about linking (a linker of its own, link arguments), links as before. `CLAWSMITH_LINK_MAP=PATH` also writes the linker's map
//! there: `cargo xtask order-file` reads the names from it.

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
    if env("PROFILE") != "release" || !lld_by_default || own_linker || !toolchain_has_lld() {
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

/// Whether the compiler's sysroot holds the LLD it links with by default on this target.
// Asking rustc for its sysroot is a build script's own business, not a tool's command: the
// workspace's rule that only clawsmith-sandbox spawns processes is about tools.
#[allow(clippy::disallowed_methods)]
fn toolchain_has_lld() -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(output) = std::process::Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
    else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&output.stdout);
    let host = std::env::var("HOST").unwrap_or_default();
    Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(host)
        .join("bin/gcc-ld/ld.lld")
        .is_file()
}
