//! Statements the docs make about the workspace's dependencies, checked against what Cargo says:
//!
//! - the layer map at the top of `docs/ARCHITECTURE.md` names each crate's direct workspace
//!   dependencies (normal and build), no more and no fewer;
//! - the layer table of `CONTRIBUTING.md` says what each crate *may* depend on, which is
//!   [`LAYERS`](super::LAYERS), the table the layering check enforces;
//! - ARCHITECTURE's invariant on the protocol crate names its normal dependencies exactly.
//!
//! A doc that drifts from the code is a bug; these checks make the drift fail `cargo xtask tidy`.

use std::collections::{BTreeMap, BTreeSet};

/// The prefix every workspace crate's name carries; the docs write names without it.
const PREFIX: &str = "clawsmith-";

/// The line of ARCHITECTURE.md that introduces the layer map (a fenced block follows it).
const MAP_INTRO: &str = "The crates are layered";

/// How ARCHITECTURE.md's invariant on protocol's dependencies begins and where its list ends.
const PROTOCOL_LINE: &str = "**Architecture Invariant:** protocol's normal dependencies are ";
const PROTOCOL_LIST_END: &str = ", and nothing else";

/// `crate -> its direct workspace dependencies`, names without the `clawsmith-` prefix.
pub type Edges = BTreeMap<String, BTreeSet<String>>;

/// Every crate of `members` with its normal and build edges among `edges` (from, to, kind).
pub fn direct<'a>(
    members: impl IntoIterator<Item = &'a str>,
    edges: &[(String, String, String)],
) -> Edges {
    let mut map: Edges = members
        .into_iter()
        .map(|name| (short(name), BTreeSet::new()))
        .collect();
    for (from, to, kind) in edges {
        if kind != "dev" {
            map.entry(short(from)).or_default().insert(short(to));
        }
    }
    map
}

fn short(name: &str) -> String {
    name.strip_prefix(PREFIX).unwrap_or(name).to_owned()
}

/// Problems with ARCHITECTURE.md's layer map against `actual` (every member but `xtask` must be
/// in the map, each with exactly its direct dependencies).
pub fn check_architecture_map(text: &str, actual: &Edges) -> Vec<String> {
    let Some(map) = architecture_map(text) else {
        return vec![format!(
            "docs/ARCHITECTURE.md: no fenced layer map after the line \"{MAP_INTRO}…\""
        )];
    };
    let mut problems = Vec::new();
    for (name, stated) in &map {
        match actual.get(name) {
            None => problems.push(format!(
                "docs/ARCHITECTURE.md: the layer map names {PREFIX}{name}, which is not a \
                 workspace member"
            )),
            Some(real) if real != stated => problems.push(format!(
                "docs/ARCHITECTURE.md: the layer map says {PREFIX}{name} -> {}; Cargo says -> {}",
                list(stated),
                list(real)
            )),
            Some(_) => {}
        }
    }
    for name in actual.keys().filter(|name| *name != "xtask") {
        if !map.contains_key(name) {
            problems.push(format!(
                "docs/ARCHITECTURE.md: {PREFIX}{name} is missing from the layer map"
            ));
        }
    }
    problems
}

fn list(names: &BTreeSet<String>) -> String {
    if names.is_empty() {
        "nothing".to_owned()
    } else {
        names.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// The layer map: each line `clawsmith-name … -> a, b (what it is)`, or without `->` for a crate
/// that depends on no other.
fn architecture_map(text: &str) -> Option<Edges> {
    let mut lines = text.lines().skip_while(|line| !line.starts_with(MAP_INTRO));
    lines.find(|line| line.starts_with("```"))?;
    let mut map = Edges::new();
    let mut current = None;
    for line in lines.take_while(|line| !line.starts_with("```")) {
        let names = if line.starts_with(char::is_whitespace) {
            // A continuation: more dependencies of the crate on the line above.
            line
        } else {
            let Some(name) = line.split_whitespace().next() else {
                continue;
            };
            current = Some(short(name));
            map.entry(short(name)).or_default();
            match line.split_once("->") {
                None => continue,
                Some((_, rest)) => rest,
            }
        };
        let Some(name) = &current else {
            continue;
        };
        let dependencies = names
            .split('(')
            .next()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|word| !word.is_empty())
            .map(str::to_owned);
        map.entry(name.clone()).or_default().extend(dependencies);
    }
    Some(map)
}

/// Problems with CONTRIBUTING.md's layer table against `layers` (crate, may depend on).
pub fn check_contributing_table(text: &str, layers: &[(&str, &[&str])]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, first, second, _] = cells.as_slice() else {
            continue;
        };
        let Some(name) = first
            .strip_prefix('`')
            .and_then(|rest| rest.strip_suffix('`'))
        else {
            continue;
        };
        let Some((_, allowed)) = layers.iter().find(|(crate_name, _)| *crate_name == name) else {
            problems.push(format!(
                "CONTRIBUTING.md: the layer table names {name}, which the layering check \
                 (LAYERS in xtask/src/tidy.rs) does not know"
            ));
            continue;
        };
        seen.insert(name.to_owned());
        let stated = stated_allowance(second, layers);
        let real: BTreeSet<String> = allowed.iter().map(|name| short(name)).collect();
        if stated != real {
            problems.push(format!(
                "CONTRIBUTING.md: the layer table lets {name} depend on {}; LAYERS says {}",
                list(&stated),
                list(&real)
            ));
        }
    }
    for (name, _) in layers {
        if !seen.contains(*name) {
            problems.push(format!(
                "CONTRIBUTING.md: {name} is missing from the layer table"
            ));
        }
    }
    problems
}

/// The crates a table cell allows: a comma-separated list of short names before any `:` note,
/// "nothing"/"no other crate here" for none, "any crate above" for every other crate.
fn stated_allowance(cell: &str, layers: &[(&str, &[&str])]) -> BTreeSet<String> {
    let head = cell.split(':').next().unwrap_or_default().trim();
    if head.starts_with("any crate above") {
        return layers
            .iter()
            .map(|(name, _)| short(name))
            .filter(|name| name != "cli" && name != "xtask")
            .collect();
    }
    if head.starts_with("nothing") || head.starts_with("no other crate") {
        return BTreeSet::new();
    }
    head.split(',')
        .map(|word| word.trim().trim_matches('`'))
        .filter(|word| !word.is_empty())
        .map(short)
        .collect()
}

/// Problems with ARCHITECTURE.md's statement of protocol's normal dependencies against
/// `actual`, the names Cargo lists.
pub fn check_protocol_statement(text: &str, actual: &BTreeSet<String>) -> Vec<String> {
    let Some(statement) = text
        .lines()
        .find_map(|line| line.strip_prefix(PROTOCOL_LINE))
    else {
        return vec![format!(
            "docs/ARCHITECTURE.md: no line starting \"{PROTOCOL_LINE}\""
        )];
    };
    let Some((names, _)) = statement.split_once(PROTOCOL_LIST_END) else {
        return vec![format!(
            "docs/ARCHITECTURE.md: the protocol dependency list must end with \
             \"{PROTOCOL_LIST_END}\" on the same line"
        )];
    };
    let stated: BTreeSet<String> = names
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    if &stated == actual {
        Vec::new()
    } else {
        vec![format!(
            "docs/ARCHITECTURE.md: protocol's normal dependencies are stated as {}; Cargo says {}",
            list(&stated),
            list(actual)
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(table: &[(&str, &[&str])]) -> Edges {
        table
            .iter()
            .map(|(name, deps)| {
                (
                    (*name).to_owned(),
                    deps.iter().map(|dep| (*dep).to_owned()).collect(),
                )
            })
            .collect()
    }

    const MAP: &str = "Intro\n\nThe crates are layered; each is usable alone:\n\n```\n\
        clawsmith-protocol   wire types; depends on no other crate here\n\
        clawsmith-fs         -> protocol\n\
        clawsmith-core       -> protocol,\n\
        \x20                    fs (the pipeline)\n\
        ```\n";

    #[test]
    fn the_architecture_map_matches_exactly() {
        let real = edges(&[
            ("protocol", &[]),
            ("fs", &["protocol"]),
            ("core", &["protocol", "fs"]),
            ("xtask", &["protocol"]),
        ]);
        assert_eq!(check_architecture_map(MAP, &real), Vec::<String>::new());
    }

    #[test]
    fn the_architecture_map_fails_on_a_missing_extra_or_unknown_arrow() {
        // (actual edges, expected problem fragment)
        let table: [(Edges, &str); 4] = [
            (
                edges(&[("protocol", &[]), ("fs", &["protocol"]), ("core", &["fs"])]),
                "says clawsmith-core -> fs, protocol; Cargo says -> fs",
            ),
            (
                edges(&[
                    ("protocol", &[]),
                    ("fs", &["protocol", "core"]),
                    ("core", &["protocol", "fs"]),
                ]),
                "clawsmith-fs -> protocol; Cargo says -> core, protocol",
            ),
            (
                edges(&[
                    ("protocol", &[]),
                    ("fs", &["protocol"]),
                    ("core", &["protocol", "fs"]),
                    ("web", &["core"]),
                ]),
                "clawsmith-web is missing",
            ),
            (
                edges(&[("protocol", &[]), ("fs", &["protocol"])]),
                "names clawsmith-core, which is not a workspace member",
            ),
        ];
        for (real, expected) in table {
            let problems = check_architecture_map(MAP, &real);
            assert!(
                problems.iter().any(|problem| problem.contains(expected)),
                "{expected}: {problems:?}"
            );
        }
    }

    #[test]
    fn the_contributing_table_matches_the_layers() {
        let layers: &[(&str, &[&str])] = &[
            ("clawsmith-protocol", &[]),
            ("clawsmith-fs", &["clawsmith-protocol"]),
            ("clawsmith-cli", &["clawsmith-protocol", "clawsmith-fs"]),
        ];
        let good = "| Crate | May |\n|---|---|\n\
            | `clawsmith-protocol` | no other crate here: the types |\n\
            | `clawsmith-fs` | protocol |\n\
            | `clawsmith-cli` | any crate above (the binary) |\n";
        assert_eq!(check_contributing_table(good, layers), Vec::<String>::new());
        let drifted = good.replace("| protocol |", "| protocol, core |");
        let problems = check_contributing_table(&drifted, layers);
        assert!(
            problems[0].contains("lets clawsmith-fs depend on core, protocol"),
            "{problems:?}"
        );
        let missing = good.replace("| `clawsmith-fs` | protocol |\n", "");
        let problems = check_contributing_table(&missing, layers);
        assert!(
            problems[0].contains("clawsmith-fs is missing"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_protocol_statement_names_its_dependencies_exactly() {
        let text = "**Architecture Invariant:** protocol's normal dependencies are `serde` and \
                    `ulid` (no `rand`), and nothing else: no I/O.";
        let real: BTreeSet<String> = ["serde", "ulid"].map(str::to_owned).into();
        // `rand` sits in the parenthesis before the list's end: it is read as stated.
        let problems = check_protocol_statement(text, &real);
        assert!(
            problems[0].contains("stated as rand, serde, ulid"),
            "{problems:?}"
        );
        let text = text.replace(" (no `rand`)", "");
        assert_eq!(check_protocol_statement(&text, &real), Vec::<String>::new());
        let more: BTreeSet<String> = ["serde", "ulid", "memchr"].map(str::to_owned).into();
        let problems = check_protocol_statement(&text, &more);
        assert!(
            problems[0].contains("Cargo says memchr, serde, ulid"),
            "{problems:?}"
        );
    }
}
