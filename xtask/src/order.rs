//! `cargo xtask order-file`: writes `crates/clawsmith-cli/order/clawsmith.txt`, the functions the
//! `clawsmith` binary's short-lived commands execute, which its build script hands to the linker
//! (`--symbol-ordering-file`) so that they sit together (see the CLI's `build.rs`).
//!
//! How: the release binary is built with the linker's map (`CLAWSMITH_LINK_MAP`), each sample
//! command runs once to warm its state and once under callgrind (`--dump-instr=yes`: every
//! executed instruction's address), and each address in the binary is looked up in the map's
//! `.text.<symbol>` input sections. The names come from the very build being ordered: a symbol's
//! hash depends on the profile and flags, so names from another build (the `profiling` profile)
//! matched under a third of them. The list is in the binary's address order. Needs valgrind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail, ensure};

/// Where the build script reads the list, and its folder.
const LIST: &str = "crates/clawsmith-cli/order/clawsmith.txt";
const LIST_DIR: &str = "crates/clawsmith-cli/order";

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    if let Some(other) = args.first() {
        bail!("unknown order-file option {other:?}; usage: order-file");
    }
    let status = Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .status();
    ensure!(
        status.is_ok_and(|status| status.success()),
        "order-file needs valgrind (apt-get install valgrind)"
    );
    let scratch = root.join("target").join("order-file");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .with_context(|| format!("clearing {}", scratch.display()))?;
    }
    std::fs::create_dir_all(&scratch)?;
    let map = scratch.join("clawsmith.map");
    println!("==> cargo build --release -p clawsmith-cli (with the linker's map)");
    let built = Command::new(env!("CARGO"))
        .current_dir(root)
        .args(["build", "--release", "-p", "clawsmith-cli"])
        .env("CLAWSMITH_LINK_MAP", &map)
        .status()
        .context("running cargo build")?;
    ensure!(built.success(), "the release build failed");
    let binary = root.join("target").join("release").join("clawsmith");
    let sections = text_sections(
        &std::fs::read_to_string(&map).with_context(|| format!("reading {}", map.display()))?,
    );
    ensure!(
        !sections.is_empty(),
        "no .text.<symbol> sections in {} (was the map written?)",
        map.display()
    );
    let mut executed = std::collections::BTreeSet::new();
    for (index, sample) in samples(&scratch)?.into_iter().enumerate() {
        println!("==> callgrind: clawsmith {}", sample.args.join(" "));
        // Once to create the state (a first open migrates the schema), once measured.
        sample.run(&binary, None)?;
        let out = scratch.join(format!("callgrind.{index}.out"));
        sample.run(&binary, Some(&out))?;
        let profile =
            std::fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
        executed.extend(addresses_in(&profile, "clawsmith"));
    }
    let names = functions_at(&sections, &executed);
    let size: u64 = names.iter().map(|(_, size, _)| size).sum();
    let mut list = String::new();
    for (_, _, name) in &names {
        list.push_str(name);
        list.push('\n');
    }
    let path = root.join(LIST);
    std::fs::create_dir_all(root.join(LIST_DIR))?;
    std::fs::write(&path, list).with_context(|| format!("writing {}", path.display()))?;
    println!(
        "wrote {LIST}: {} functions, {:.2} MB of code (of {} executed addresses); rebuild to apply",
        names.len(),
        size as f64 / 1e6,
        executed.len()
    );
    Ok(())
}

/// One command to profile, with its own state directory and workspace.
struct Sample {
    args: Vec<String>,
    state: PathBuf,
    stdin: Option<String>,
    /// A file written before each run (an edit's target, back to its text before the edit).
    reset: Option<(PathBuf, &'static str)>,
}

impl Sample {
    fn run(&self, binary: &Path, callgrind_out: Option<&Path>) -> Result<()> {
        if let Some((file, text)) = &self.reset {
            std::fs::write(file, text).with_context(|| format!("writing {}", file.display()))?;
        }
        let mut command = match callgrind_out {
            Some(out) => {
                let mut valgrind = Command::new("valgrind");
                valgrind
                    .args(["--tool=callgrind", "--dump-instr=yes", "-q"])
                    .arg(format!("--callgrind-out-file={}", out.display()))
                    .arg(binary);
                valgrind
            }
            None => Command::new(binary),
        };
        command
            .arg("--state-dir")
            .arg(&self.state)
            .args(&self.args)
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().context("starting a sample command")?;
        if let (Some(text), Some(mut stdin)) = (&self.stdin, child.stdin.take()) {
            use std::io::Write;
            stdin.write_all(text.as_bytes())?;
        }
        let output = child.wait_with_output()?;
        ensure!(
            output.status.success(),
            "clawsmith {} failed: {}",
            self.args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(())
    }
}

/// The short-lived starts that matter: `call` of the file tools the bench rows time (a read, a
/// search, an edit) and an MCP server answering one `read_file`.
fn samples(scratch: &Path) -> Result<Vec<Sample>> {
    let workspace = scratch.join("workspace");
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(
        workspace.join("ten-kb.txt"),
        "0123456789abcdef\n".repeat(10 * 1024 / 17),
    )?;
    let ws = workspace.display().to_string();
    let call = |name: &str, tool: &str, arguments: &str| Sample {
        args: [
            "call",
            "--workspace",
            &ws,
            "--mode",
            "full",
            tool,
            arguments,
        ]
        .map(str::to_owned)
        .to_vec(),
        state: scratch.join(format!("state-{name}")),
        stdin: None,
        reset: None,
    };
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"order-file","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"ten-kb.txt"}}}"#,
    ];
    Ok(vec![
        call("read", "read_file", r#"{"path":"ten-kb.txt"}"#),
        call("search", "search_files", r#"{"query":"abcdef"}"#),
        Sample {
            reset: Some((workspace.join("edit.txt"), "before\n")),
            ..call(
                "edit",
                "edit_file",
                r#"{"path":"edit.txt","old_string":"before","new_string":"after"}"#,
            )
        },
        Sample {
            args: ["mcp", "--workspace", &ws, "--mode", "full"]
                .map(str::to_owned)
                .to_vec(),
            state: scratch.join("state-mcp"),
            stdin: Some(requests.join("\n") + "\n"),
            reset: None,
        },
    ])
}

/// A `.text.<symbol>` input section of the linker's map: its address, size and symbol.
#[derive(Debug, PartialEq)]
struct Section {
    address: u64,
    size: u64,
    symbol: String,
}

/// The `.text.<symbol>` input sections of an LLD map (`VMA LMA Size Align Out In Symbol`
/// columns; an input section's line ends with `file:(section)`), sorted by address. GCC's
/// `.text.unlikely.`, `.text.startup.`, `.text.hot.` and `.text.exit.` prefixes name the same
/// symbol.
fn text_sections(map: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = map
        .lines()
        .filter_map(|line| {
            let mut columns = line.split_whitespace();
            let address = u64::from_str_radix(columns.next()?, 16).ok()?;
            let _lma = columns.next()?;
            let size = u64::from_str_radix(columns.next()?, 16).ok()?;
            let _align = columns.next()?;
            let input = columns.next()?;
            let section = input.rsplit_once(":(")?.1.strip_suffix(')')?;
            let mut symbol = section.strip_prefix(".text.")?;
            for prefix in ["unlikely.", "startup.", "hot.", "exit."] {
                symbol = symbol.strip_prefix(prefix).unwrap_or(symbol);
            }
            (columns.next().is_none() && !symbol.is_empty()).then(|| Section {
                address,
                size,
                symbol: symbol.to_owned(),
            })
        })
        .collect();
    sections.sort_by_key(|section| section.address);
    sections
}

/// The instruction addresses a callgrind profile (`--dump-instr=yes`, positions `instr line`)
/// records in the object whose file name is `object`. Positions are absolute (`0x…`) or relative
/// to the previous one (`+N`, `-N`, `*`); an `ob=` line names the object of the lines after it
/// (by a number defined by the first `ob=`/`cob=`/`jump` line that names it).
fn addresses_in(profile: &str, object: &str) -> Vec<u64> {
    let mut objects: BTreeMap<&str, &str> = BTreeMap::new();
    let mut current = false;
    let mut last: u64 = 0;
    let mut found = Vec::new();
    for line in profile.lines() {
        if let Some(rest) = line
            .strip_prefix("ob=")
            .or_else(|| line.strip_prefix("cob="))
        {
            let (id, name) = match rest.split_once(')') {
                Some((id, name)) => (id.trim_start_matches('('), name.trim()),
                None => (rest, rest),
            };
            if !name.is_empty() {
                objects.insert(id, name);
            }
            if line.starts_with("ob=") {
                current = objects
                    .get(id)
                    .is_some_and(|name| name.rsplit('/').next() == Some(object));
            }
            continue;
        }
        let Some(position) = line.split_whitespace().next() else {
            continue;
        };
        let address = if let Some(hex) = position.strip_prefix("0x") {
            u64::from_str_radix(hex, 16).ok()
        } else if let Some(delta) = position.strip_prefix('+') {
            parse_number(delta).map(|delta| last.wrapping_add(delta))
        } else if let Some(delta) = position.strip_prefix('-') {
            parse_number(delta).map(|delta| last.wrapping_sub(delta))
        } else if position == "*" {
            Some(last)
        } else {
            None
        };
        if let Some(address) = address {
            last = address;
            if current {
                found.push(address);
            }
        }
    }
    found
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The sections holding any of `addresses`, in address order: (address, size, symbol), each
/// symbol once (a GCC function's cold part, `.text.unlikely.<name>`, names it again).
fn functions_at<'a>(
    sections: &'a [Section],
    addresses: &std::collections::BTreeSet<u64>,
) -> Vec<(u64, u64, &'a str)> {
    let mut seen = std::collections::BTreeSet::new();
    let mut hit = Vec::new();
    for section in sections {
        if addresses
            .range(section.address..section.address + section.size)
            .next()
            .is_some()
            && seen.insert(section.symbol.as_str())
        {
            hit.push((section.address, section.size, section.symbol.as_str()));
        }
    }
    hit
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "\
             VMA              LMA     Size Align Out     In      Symbol
          6ac9c0           6ac9c0  1431dd3    64 .text
          6ac9c0           6ac9c0       26    16         /x/Scrt1.o:(.text)
          6ac9c0           6ac9c0        0     1                 _start
          add5a0           add5a0      b1b    16         /t/deps/a.rcgu.o:(.text._ZN9clawsmith5state10open_store17h2e0adcecf892d063E)
          add5a0           add5a0      b1b     1                 clawsmith::state::open_store::h2e0adcecf892d063
          ade0c0           ade0c0      277    16         /t/deps/a.rcgu.o:(.text._ZN9clawsmith5state14ensure_outside17hcdb59c0a73234f00E)
          b00000           b00000      100    16         /t/sqlite3.o:(.text.sqlite3VdbeExec)
          b80000           b80000       10    16         /t/sqlite3.o:(.text.unlikely.sqlite3VdbeExec)
          c00000           c00000       40     8         /t/deps/a.rcgu.o:(.rodata._ZN4core3fmt5write17h0000000000000000E)
";

    #[test]
    fn the_map_gives_each_text_section_its_symbol_in_address_order() {
        let sections = text_sections(MAP);
        let symbols: Vec<_> = sections
            .iter()
            .map(|section| (section.address, section.size, section.symbol.as_str()))
            .collect();
        assert_eq!(
            symbols,
            [
                (
                    0xadd5a0,
                    0xb1b,
                    "_ZN9clawsmith5state10open_store17h2e0adcecf892d063E"
                ),
                (
                    0xade0c0,
                    0x277,
                    "_ZN9clawsmith5state14ensure_outside17hcdb59c0a73234f00E"
                ),
                (0xb00000, 0x100, "sqlite3VdbeExec"),
                (0xb80000, 0x10, "sqlite3VdbeExec"),
            ]
        );
    }

    const PROFILE: &str = "\
# callgrind format
positions: instr line
events: Ir
ob=(4) /usr/lib/x86_64-linux-gnu/libm.so.6
fn=(450) fma
0x32720 49 1
+7 * 1
ob=(7) /work/main/target/release/clawsmith
fn=(1) open_store
0xadd5a8 0 3
+16 * 2
cob=(4)
cfn=(450)
calls=1 0x32720 49
* * 5
-8 * 1
ob=(4)
fn=(451) sin
0x40000 1 1
ob=(7)
fn=(2) other
0xb00010 0 1
fn=(3) other.cold
0xb80004 0 1
";

    #[test]
    fn only_the_named_objects_positions_are_taken_absolute_and_relative() {
        assert_eq!(
            addresses_in(PROFILE, "clawsmith"),
            [0xadd5a8, 0xadd5b8, 0xadd5b8, 0xadd5b0, 0xb00010, 0xb80004]
        );
        assert_eq!(
            addresses_in(PROFILE, "libm.so.6"),
            [0x32720, 0x32727, 0x40000]
        );
        assert!(addresses_in(PROFILE, "libc.so.6").is_empty());
    }

    #[test]
    fn a_function_is_listed_once_when_any_of_its_addresses_ran_cold_part_or_not() {
        let sections = text_sections(MAP);
        let executed = addresses_in(PROFILE, "clawsmith").into_iter().collect();
        let names: Vec<_> = functions_at(&sections, &executed)
            .into_iter()
            .map(|(_, _, name)| name)
            .collect();
        assert_eq!(
            names,
            [
                "_ZN9clawsmith5state10open_store17h2e0adcecf892d063E",
                "sqlite3VdbeExec"
            ]
        );
    }
}
