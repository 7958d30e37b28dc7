//! The checks that keep clawsmith's crates publishable and their promises true
//! (`docs/STABILITY.md`). `cargo xtask publish` runs them all; `cargo xtask ci` runs them after
//! its other steps:
//!
//! 1. **Manifests:** every published crate has a description, license, repository, README,
//!    keywords, categories and docs.rs settings, and depends on its workspace siblings by path
//!    *and* the workspace version (what `cargo package` needs). Nothing published depends on an
//!    unpublished member, and a stable crate depends on no crate that is not stable. Each
//!    crate's folder holds the text of every license its `license` names (`LICENSE-MIT`,
//!    `LICENSE-APACHE`: links to the root's copies), so the `.crate` carries them.
//! 2. **Tiers:** every published crate has a tier in [`TIERS`], and `docs/STABILITY.md`'s table
//!    says the same tier for it.
//! 3. **The protocol's public API:** `clawsmith-protocol` must be usable without a runtime,
//!    storage or another protocol's types, so none of [`NOT_IN_PROTOCOL_API`] (nor tidy's list)
//!    may be among its normal or build dependencies, for any feature or target. A crate that is
//!    not in its dependency graph cannot appear in its API.
//! 4. **READMEs:** `readmes --check` (see `readmes.rs`).
//! 5. **Examples:** every example of a published crate runs and exits 0.
//! 6. **Packaging:** `cargo package --workspace --exclude xtask`, which packs each crate as
//!    crates.io would receive it and builds it from that archive alone (files outside the crate
//!    or an undeclared dependency fail here, not after a release). What earlier runs unpacked of
//!    the members into cargo's local registry folders is removed first: cargo would reuse a
//!    sibling's old sources under the same version.
//! 7. **Features:** `cargo hack check --each-feature --no-dev-deps`: each crate builds with each
//!    of its features alone and without its dev-dependencies, so no crate compiles only thanks
//!    to a feature that another workspace member happens to turn on.
//! 8. **Semver:** `cargo semver-checks` of the stable crates against a baseline revision
//!    (`CLAWSMITH_SEMVER_BASELINE`, else `HEAD^`, the first parent: for a merge onto main, the
//!    main before it landed). A breaking change passes only with a version that allows it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{readmes, tidy};

/// What a published crate promises its users (`docs/STABILITY.md` explains each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// A bottom layer others may build on: semver-checked in CI.
    Stable,
    /// Published so that the `clawsmith` binary builds from crates.io; no promise beyond Cargo's
    /// version rules.
    Internal,
    /// The `clawsmith` binary itself: its command line is the interface, not its Rust items.
    Binary,
}

impl Tier {
    pub fn name(self) -> &'static str {
        match self {
            Tier::Stable => "stable",
            Tier::Internal => "internal",
            Tier::Binary => "binary",
        }
    }

    /// The sentence a crate's README says about it.
    pub fn promise(self) -> &'static str {
        match self {
            Tier::Stable => {
                "this crate is one of its stable bottom layers. Its public API follows semantic \
                 versioning, checked by `cargo semver-checks` in CI: while the version is 0.x, a \
                 breaking change comes only with a new minor version."
            }
            Tier::Internal => {
                "this crate is internal to the `clawsmith` binary, published so that the binary \
                 builds from crates.io. Its API serves the binary and may break in any minor \
                 version."
            }
            Tier::Binary => {
                "this crate is the `clawsmith` binary (`cargo install clawsmith-cli`). Its \
                 command line, documented in the repository's README, is its interface; its Rust \
                 items are not an API."
            }
        }
    }
}

/// The tier of every published crate. A new crate is not published until it has one here and
/// in `docs/STABILITY.md`.
pub const TIERS: &[(&str, Tier)] = &[
    ("clawsmith-protocol", Tier::Stable),
    ("clawsmith-shell", Tier::Stable),
    ("clawsmith-trace", Tier::Stable),
    ("clawsmith-security", Tier::Stable),
    ("clawsmith-fs", Tier::Stable),
    ("clawsmith-egress", Tier::Internal),
    ("clawsmith-sandbox", Tier::Internal),
    ("clawsmith-checkpoint", Tier::Internal),
    ("clawsmith-store", Tier::Internal),
    ("clawsmith-store-postgres", Tier::Internal),
    ("clawsmith-core", Tier::Internal),
    ("clawsmith-mcp", Tier::Internal),
    ("clawsmith-skills", Tier::Internal),
    ("clawsmith-plugins", Tier::Internal),
    ("clawsmith-lsp", Tier::Internal),
    ("clawsmith-agent", Tier::Internal),
    ("clawsmith-web", Tier::Internal),
    ("clawsmith-cli", Tier::Binary),
];

pub fn tier(name: &str) -> Option<Tier> {
    TIERS
        .iter()
        .find(|(crate_name, _)| *crate_name == name)
        .map(|(_, tier)| *tier)
}

/// Crates whose types must never reach the protocol's public API, on top of tidy's
/// `NOT_IN_PROTOCOL` (runtimes, I/O, SQLite): other protocols and network stacks.
pub const NOT_IN_PROTOCOL_API: &[&str] = &[
    "tokio",
    "rusqlite",
    "rmcp",
    "reqwest",
    "hyper",
    "axum",
    "async-std",
    "lsp-types",
    "opentelemetry",
];

/// One workspace member, as `cargo metadata --no-deps` describes it.
#[derive(Debug, Clone, Default)]
pub struct Package {
    pub name: String,
    pub version: String,
    pub dir: PathBuf,
    /// `src/lib.rs`, else the first binary's root: where the crate's `//!` essay is.
    pub crate_root: Option<PathBuf>,
    pub publishable: bool,
    pub description: String,
    pub license: String,
    pub repository: String,
    pub readme: Option<String>,
    pub keywords: Vec<String>,
    pub categories: Vec<String>,
    pub has_features: bool,
    /// `[package.metadata.docs.rs]`: (all-features, rustdoc-args).
    pub docs_rs: Option<(bool, Vec<String>)>,
    /// (name, version requirement, path dependency, dev-dependency).
    pub dependencies: Vec<(String, String, bool, bool)>,
    pub examples: Vec<String>,
}

pub fn packages(root: &Path) -> Result<Vec<Package>> {
    let text = cargo_stdout(
        root,
        &["metadata", "--format-version", "1", "--locked", "--no-deps"],
    )?;
    let metadata: serde_json::Value =
        serde_json::from_str(&text).context("parsing cargo metadata")?;
    let packages = metadata["packages"]
        .as_array()
        .context("cargo metadata has no packages")?;
    Ok(packages.iter().map(package).collect())
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn package(value: &serde_json::Value) -> Package {
    let text = |key: &str| value[key].as_str().unwrap_or_default().to_owned();
    let manifest = PathBuf::from(text("manifest_path"));
    let targets = value["targets"].as_array().cloned().unwrap_or_default();
    let target_of = |kind: &str| {
        targets
            .iter()
            .find(|t| strings(&t["kind"]).iter().any(|k| k == kind))
            .and_then(|t| t["src_path"].as_str())
            .map(PathBuf::from)
    };
    let docs_rs = &value["metadata"]["docs"]["rs"];
    Package {
        name: text("name"),
        version: text("version"),
        dir: manifest.parent().map(Path::to_path_buf).unwrap_or_default(),
        crate_root: target_of("lib").or_else(|| target_of("bin")),
        // `publish = false` is `[]`; no `publish` key is `null`.
        publishable: value["publish"].is_null(),
        description: text("description"),
        license: text("license"),
        repository: text("repository"),
        readme: value["readme"].as_str().map(str::to_owned),
        keywords: strings(&value["keywords"]),
        categories: strings(&value["categories"]),
        has_features: value["features"].as_object().is_some_and(|f| !f.is_empty()),
        docs_rs: docs_rs.is_object().then(|| {
            (
                docs_rs["all-features"].as_bool().unwrap_or(false),
                strings(&docs_rs["rustdoc-args"]),
            )
        }),
        dependencies: value["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                (
                    d["name"].as_str().unwrap_or_default().to_owned(),
                    d["req"].as_str().unwrap_or_default().to_owned(),
                    d["path"].is_string(),
                    d["kind"].as_str() == Some("dev"),
                )
            })
            .collect(),
        examples: targets
            .iter()
            .filter(|t| strings(&t["kind"]).iter().any(|k| k == "example"))
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect(),
    }
}

/// What `cargo ARGS` prints, or an error with what it said on stderr.
fn cargo_stdout(root: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new(crate::cargo())
        .args(args)
        .current_dir(root)
        .output()
        .with_context(|| format!("running cargo {}", args.join(" ")))?;
    if !output.status.success() {
        bail!(
            "cargo {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Problems that keep `packages` from being published as `docs/STABILITY.md` says.
pub fn check_manifests(packages: &[Package]) -> Vec<String> {
    let versions: BTreeMap<&str, (&str, bool)> = packages
        .iter()
        .map(|p| (p.name.as_str(), (p.version.as_str(), p.publishable)))
        .collect();
    let mut problems = Vec::new();
    for package in packages {
        let name = &package.name;
        if !package.publishable {
            if tier(name).is_some() {
                problems.push(format!(
                    "{name} has a stability tier but says `publish = false`"
                ));
            }
            continue;
        }
        if tier(name).is_none() {
            problems.push(format!(
                "{name} is published but has no stability tier (xtask/src/publish.rs TIERS, \
                 docs/STABILITY.md)"
            ));
        }
        let missing = [
            ("description", package.description.is_empty()),
            ("license", package.license.is_empty()),
            ("repository", package.repository.is_empty()),
            ("keywords", package.keywords.is_empty()),
            ("categories", package.categories.is_empty()),
        ];
        for (field, empty) in missing {
            if empty {
                problems.push(format!("{name}: Cargo.toml has no `{field}`"));
            }
        }
        if package.repository.contains(".invalid") {
            problems.push(format!(
                "{name}: repository {} is a placeholder",
                package.repository
            ));
        }
        if package.readme.as_deref() != Some("README.md") {
            problems.push(format!(
                "{name}: Cargo.toml must say `readme = \"README.md\"` (generated by `cargo xtask \
                 readmes`)"
            ));
        }
        if package.keywords.len() > 5 {
            problems.push(format!("{name}: crates.io takes at most 5 keywords"));
        }
        match &package.docs_rs {
            None => problems.push(format!(
                "{name}: Cargo.toml has no [package.metadata.docs.rs]"
            )),
            Some((all_features, args)) => {
                if !args.windows(2).any(|w| w[0] == "--cfg" && w[1] == "docsrs") {
                    problems.push(format!(
                        "{name}: [package.metadata.docs.rs] must pass rustdoc-args = [\"--cfg\", \
                         \"docsrs\"]"
                    ));
                }
                if package.has_features && !all_features {
                    problems.push(format!(
                        "{name}: has features, so docs.rs must build with all-features = true"
                    ));
                }
            }
        }
        for (dependency, req, is_path, is_dev) in &package.dependencies {
            let Some((version, publishable)) = versions.get(dependency.as_str()) else {
                continue;
            };
            if !publishable && !is_dev {
                problems.push(format!(
                    "{name} depends on {dependency}, which is not published"
                ));
            }
            if tier(name) == Some(Tier::Stable) && !is_dev && tier(dependency) != Some(Tier::Stable)
            {
                problems.push(format!(
                    "{name} is stable but depends on {dependency}, which is not: a stable crate's \
                     API may only rest on stable crates"
                ));
            }
            if *is_path && *publishable && *req != format!("^{version}") {
                problems.push(format!(
                    "{name} -> {dependency}: the requirement is `{req}`, but cargo package needs \
                     the workspace version `{version}` beside the path (root Cargo.toml)"
                ));
            }
        }
    }
    problems
}

/// Problems where `docs/STABILITY.md` (`text`) and [`TIERS`] disagree: each crate's row must read
/// ``| `name` | tier |``.
pub fn check_stability_doc(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let rows: BTreeMap<String, String> = text
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // "", name, tier, …
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            name.starts_with("clawsmith-").then(|| {
                (
                    name.to_owned(),
                    cells.get(2).copied().unwrap_or("").to_owned(),
                )
            })
        })
        .collect();
    for (name, tier) in TIERS {
        match rows.get(*name) {
            None => problems.push(format!(
                "docs/STABILITY.md has no row for {name} (| `{name}` | {} | …)",
                tier.name()
            )),
            Some(said) if said != tier.name() => problems.push(format!(
                "docs/STABILITY.md says {name} is {said}, but xtask/src/publish.rs TIERS says {}",
                tier.name()
            )),
            Some(_) => {}
        }
    }
    for name in rows.keys() {
        if tier(name).is_none() {
            problems.push(format!(
                "docs/STABILITY.md has a row for {name}, which TIERS does not publish"
            ));
        }
    }
    problems
}

/// The crates `package` builds with for its users: its normal and build dependencies, with all
/// of its features, for every target. `cargo tree -p` resolves the features of that package
/// alone, as a downstream build would (`cargo metadata` would unify the whole workspace's).
fn dependency_names(root: &Path, package: &str) -> Result<BTreeSet<String>> {
    let tree = cargo_stdout(
        root,
        &[
            "tree",
            "--locked",
            "-p",
            package,
            "-e",
            "normal,build",
            "--target",
            "all",
            "--all-features",
            "--prefix",
            "none",
        ],
    )?;
    Ok(tree_names(&tree, package))
}

/// The crate names of a `cargo tree --prefix none` listing, without `package` itself.
pub fn tree_names(tree: &str, package: &str) -> BTreeSet<String> {
    tree.lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != package)
        .map(str::to_owned)
        .collect()
}

/// Problems for every crate of `dependencies` (the protocol's) that must stay out of its API.
pub fn check_protocol_api(dependencies: &BTreeSet<String>) -> Vec<String> {
    tidy::NOT_IN_PROTOCOL
        .iter()
        .chain(NOT_IN_PROTOCOL_API)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|name| dependencies.contains(**name))
        .map(|name| {
            format!(
                "clawsmith-protocol depends on {name} (normal or build, with all its features, for some target), \
                 so its public API could expose {name}'s types; it must stay plain data"
            )
        })
        .collect()
}

/// `cargo xtask publish`, and the end of `cargo xtask ci`.
/// Removes what earlier `cargo package` runs unpacked of the members into cargo's registry
/// folders. `cargo package --workspace` verifies each crate against its siblings through a local
/// registry, and cargo unpacks a registry crate only once per name and version: a sibling
/// changed since (same 0.x version) would otherwise be built from its old sources. Only the
/// local registries' folders (named `-<hash>`) are touched, never crates.io's. The target
/// folder's builds of the members as registry crates go too ([`forget_registry_builds`]): cargo
/// keys those by name and version alone and would link the old code.
fn forget_unpacked_members(root: &Path, packages: &[Package]) -> Result<()> {
    forget_registry_builds(root, packages)?;
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    let Some(home) = home else {
        return Ok(());
    };
    let members: Vec<String> = packages
        .iter()
        .filter(|p| p.publishable)
        .map(|p| format!("{}-{}", p.name, p.version))
        .collect();
    for kind in ["src", "cache"] {
        let Ok(registries) = std::fs::read_dir(home.join("registry").join(kind)) else {
            continue;
        };
        for registry in registries.flatten() {
            if !registry.file_name().to_string_lossy().starts_with('-') {
                continue;
            }
            for member in &members {
                let unpacked = registry.path().join(member);
                if unpacked.is_dir() {
                    std::fs::remove_dir_all(&unpacked)
                        .with_context(|| format!("removing {}", unpacked.display()))?;
                }
                let archive = registry.path().join(format!("{member}.crate"));
                if archive.is_file() {
                    std::fs::remove_file(&archive)
                        .with_context(|| format!("removing {}", archive.display()))?;
                }
            }
        }
    }
    Ok(())
}

/// Removes from the target folder (`CARGO_TARGET_DIR`, else `target/`) every build of a member
/// made from a local registry's copy of it (its dep-info names a path under a registry folder
/// `-<hash>`): the rlib, rmeta, dep-info and fingerprint of that build. Builds of the members from
/// the workspace, and every other crate's, stay.
fn forget_registry_builds(root: &Path, packages: &[Package]) -> Result<()> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let members: Vec<String> = packages
        .iter()
        .filter(|p| p.publishable)
        .map(|p| p.name.replace('-', "_"))
        .collect();
    forget_registry_builds_in(&target, &members)
}

/// [`forget_registry_builds`] in `target`, of the crates named `members` (`_` for `-`).
fn forget_registry_builds_in(target: &Path, members: &[String]) -> Result<()> {
    let Ok(profiles) = std::fs::read_dir(target) else {
        return Ok(());
    };
    for profile in profiles.flatten() {
        let deps = profile.path().join("deps");
        let Ok(entries) = std::fs::read_dir(&deps) else {
            continue;
        };
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let Some((name, hash)) = file
                .strip_suffix(".d")
                .and_then(|stem| stem.rsplit_once('-'))
            else {
                continue;
            };
            if !members.iter().any(|member| member == name) {
                continue;
            }
            let from_registry = std::fs::read_to_string(entry.path())
                .is_ok_and(|info| info.contains("/registry/src/-"));
            if !from_registry {
                continue;
            }
            for built in [
                deps.join(format!("lib{name}-{hash}.rlib")),
                deps.join(format!("lib{name}-{hash}.rmeta")),
                entry.path(),
            ] {
                if built.is_file() {
                    std::fs::remove_file(&built)
                        .with_context(|| format!("removing {}", built.display()))?;
                }
            }
            let fingerprint = profile
                .path()
                .join(".fingerprint")
                .join(format!("{}-{hash}", name.replace('_', "-")));
            if fingerprint.is_dir() {
                std::fs::remove_dir_all(&fingerprint)
                    .with_context(|| format!("removing {}", fingerprint.display()))?;
            }
        }
    }
    Ok(())
}

/// The file each license of an SPDX expression ships as, in the crate's folder (so that
/// `cargo package` puts it in the `.crate`).
const LICENSE_FILES: &[(&str, &str)] = &[("MIT", "LICENSE-MIT"), ("Apache-2.0", "LICENSE-APACHE")];

/// Published crates whose folder lacks the text of a license their `license` names.
pub fn check_license_files(packages: &[Package]) -> Vec<String> {
    let mut problems = Vec::new();
    for package in packages.iter().filter(|package| package.publishable) {
        for license in package
            .license
            .split(" OR ")
            .flat_map(|part| part.split(" AND "))
            .map(|part| part.trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace()))
        {
            match LICENSE_FILES.iter().find(|(name, _)| *name == license) {
                None => problems.push(format!(
                    "{}: license {license} has no license file known to xtask/src/publish.rs",
                    package.name
                )),
                Some((_, file)) if !package.dir.join(file).is_file() => problems.push(format!(
                    "{}: {file} is missing from {} (a link to the root's copy will do)",
                    package.name,
                    package.dir.display()
                )),
                Some(_) => {}
            }
        }
    }
    problems
}

pub fn run(root: &Path) -> Result<()> {
    println!("==> publish: manifests, tiers, license files, protocol API");
    let packages = packages(root)?;
    let mut problems = check_manifests(&packages);
    problems.extend(check_license_files(&packages));
    let stability = root.join("docs/STABILITY.md");
    let text = std::fs::read_to_string(&stability)
        .with_context(|| format!("reading {}", stability.display()))?;
    problems.extend(check_stability_doc(&text));
    problems.extend(check_protocol_api(&dependency_names(
        root,
        "clawsmith-protocol",
    )?));
    if !problems.is_empty() {
        for problem in &problems {
            eprintln!("publish: {problem}");
        }
        bail!("publish found {} problem(s)", problems.len());
    }
    println!("==> readmes --check");
    readmes::run(root, true)?;
    for package in packages.iter().filter(|p| p.publishable) {
        for example in &package.examples {
            crate::step(
                root,
                &format!("example {example}"),
                &[
                    "run",
                    "--locked",
                    "--quiet",
                    "-p",
                    &package.name,
                    "--example",
                    example,
                ],
                &[],
            )?;
        }
    }
    forget_unpacked_members(root, &packages)?;
    crate::step(
        root,
        "package",
        &["package", "--workspace", "--exclude", "xtask", "--locked"],
        &[],
    )?;
    crate::step(
        root,
        "features (cargo hack)",
        &[
            "hack",
            "check",
            "--workspace",
            "--exclude",
            "xtask",
            "--each-feature",
            "--no-dev-deps",
        ],
        &[],
    )?;
    semver(root)
}

fn semver(root: &Path) -> Result<()> {
    let baseline =
        std::env::var("CLAWSMITH_SEMVER_BASELINE").unwrap_or_else(|_| "HEAD^".to_owned());
    let resolved = Command::new("git")
        .args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{baseline}^{{commit}}"),
        ])
        .current_dir(root)
        .output()
        .context("running git rev-parse")?;
    if !resolved.status.success() {
        bail!(
            "the semver baseline {baseline:?} is not a commit of this clone (a shallow clone or a \
             first commit?); set CLAWSMITH_SEMVER_BASELINE to a revision to compare against"
        );
    }
    let commit = String::from_utf8_lossy(&resolved.stdout).trim().to_owned();
    let mut args = vec!["semver-checks", "check-release", "--baseline-rev", &commit];
    for (name, tier) in TIERS {
        if *tier == Tier::Stable {
            args.extend(["-p", name]);
        }
    }
    crate::step(
        root,
        &format!("semver against {baseline} ({commit})"),
        &args,
        &[],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_registry_builds_of_members_are_forgotten() {
        let target = tempfile::tempdir().unwrap();
        let deps = target.path().join("debug/deps");
        let fingerprints = target.path().join("debug/.fingerprint");
        std::fs::create_dir_all(&deps).unwrap();
        // (crate, hash, where its sources were, forgotten)
        let builds = [
            (
                "clawsmith_egress",
                "aaa",
                "/root/.cargo/registry/src/-14cd/clawsmith-egress-0.2.0/src/lib.rs",
                true,
            ),
            (
                "clawsmith_egress",
                "bbb",
                "/work/main/crates/clawsmith-egress/src/lib.rs",
                false,
            ),
            (
                "tokio",
                "ccc",
                "/root/.cargo/registry/src/-14cd/tokio-1.0.0/src/lib.rs",
                false,
            ),
            (
                "clawsmith_fs",
                "ddd",
                "/root/.cargo/registry/src/index.crates.io-1949/clawsmith-fs-0.1.0/src/lib.rs",
                false,
            ),
        ];
        for (name, hash, source, _) in builds {
            std::fs::write(
                deps.join(format!("{name}-{hash}.d")),
                format!("x: {source}\n"),
            )
            .unwrap();
            std::fs::write(deps.join(format!("lib{name}-{hash}.rlib")), "").unwrap();
            std::fs::create_dir_all(
                fingerprints.join(format!("{}-{hash}", name.replace('_', "-"))),
            )
            .unwrap();
        }
        let members = ["clawsmith_egress".to_owned(), "clawsmith_fs".to_owned()];
        forget_registry_builds_in(target.path(), &members).unwrap();
        for (name, hash, _, forgotten) in builds {
            assert_eq!(
                !deps.join(format!("lib{name}-{hash}.rlib")).exists(),
                forgotten,
                "{name}-{hash}"
            );
            assert_eq!(
                !fingerprints
                    .join(format!("{}-{hash}", name.replace('_', "-")))
                    .exists(),
                forgotten,
                "{name}-{hash}"
            );
        }
    }

    fn publishable(name: &str) -> Package {
        Package {
            name: name.to_owned(),
            version: "0.1.0".to_owned(),
            publishable: true,
            description: "d".to_owned(),
            license: "MIT".to_owned(),
            repository: "https://github.com/clawsmith/clawsmith".to_owned(),
            readme: Some("README.md".to_owned()),
            keywords: vec!["llm".to_owned()],
            categories: vec!["development-tools".to_owned()],
            docs_rs: Some((false, vec!["--cfg".to_owned(), "docsrs".to_owned()])),
            ..Package::default()
        }
    }

    #[test]
    fn manifests() {
        let good = publishable("clawsmith-fs");
        assert!(check_manifests(std::slice::from_ref(&good)).is_empty());
        // (how the manifest is broken, the one change that breaks it): one problem each.
        type Break = fn(&mut Package);
        let table: [(&str, Break); 7] = [
            ("no tier", |p| p.name = "clawsmith-new".into()),
            ("placeholder", |p| {
                p.repository = "https://example.invalid/x".into()
            }),
            ("no readme", |p| p.readme = None),
            ("no docs.rs", |p| p.docs_rs = None),
            ("features", |p| p.has_features = true),
            ("no keywords", |p| p.keywords.clear()),
            ("unversioned path dependency", |p| {
                p.dependencies = vec![("clawsmith-protocol".into(), "*".into(), true, false)]
            }),
        ];
        for (case, breaking) in table {
            let mut package = good.clone();
            breaking(&mut package);
            let problems = check_manifests(&[package, publishable("clawsmith-protocol")]);
            assert_eq!(problems.len(), 1, "{case}: {problems:?}");
        }
        let mut stable_on_internal = good.clone();
        stable_on_internal.dependencies =
            vec![("clawsmith-core".into(), "^0.1.0".into(), true, false)];
        let core = publishable("clawsmith-core");
        assert_eq!(check_manifests(&[stable_on_internal, core]).len(), 1);
        let mut tool = publishable("xtask");
        tool.publishable = false;
        let mut user = publishable("clawsmith-core");
        user.dependencies = vec![("xtask".into(), "^0.1.0".into(), true, false)];
        assert_eq!(check_manifests(&[tool.clone(), user]).len(), 1);
        // A dev-dependency on an unpublished member is fine: cargo package drops it.
        let mut tester = good;
        tester.dependencies = vec![("xtask".into(), "*".into(), true, true)];
        assert!(check_manifests(&[tool, tester]).is_empty());
    }

    #[test]
    fn stability_doc_agrees_with_tiers() {
        let rows: String = TIERS
            .iter()
            .map(|(name, tier)| format!("| `{name}` | {} | what |\n", tier.name()))
            .collect();
        assert!(check_stability_doc(&rows).is_empty());
        let wrong = rows.replace(
            "| `clawsmith-core` | internal |",
            "| `clawsmith-core` | stable |",
        );
        assert_eq!(check_stability_doc(&wrong).len(), 1);
        let missing = rows.replace("| `clawsmith-fs` |", "| fs |");
        assert_eq!(check_stability_doc(&missing).len(), 1);
        let extra = format!("{rows}| `clawsmith-gone` | stable | x |\n");
        assert_eq!(check_stability_doc(&extra).len(), 1);
    }

    #[test]
    fn protocol_api() {
        let plain: BTreeSet<String> = ["serde", "serde_json", "ulid"].map(String::from).into();
        assert!(check_protocol_api(&plain).is_empty());
        let heavy: BTreeSet<String> = ["serde", "tokio", "rmcp", "rusqlite", "libc"]
            .map(String::from)
            .into();
        assert_eq!(check_protocol_api(&heavy).len(), 4);
    }

    #[test]
    fn tree_listing() {
        let tree = "clawsmith-protocol v0.1.0 (/w/crates/clawsmith-protocol)\nserde v1.0.228\n\
                    serde_derive v1.0.228 (proc-macro)\nserde v1.0.228 (*)\n";
        assert_eq!(
            tree_names(tree, "clawsmith-protocol"),
            ["serde", "serde_derive"].map(String::from).into()
        );
    }

    #[test]
    fn published_crates_carry_the_text_of_each_license() {
        let dir = std::env::temp_dir().join(format!("xtask-licenses-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("LICENSE-MIT"), "MIT").unwrap();
        let mut package = Package {
            name: "clawsmith-protocol".to_owned(),
            dir: dir.clone(),
            publishable: true,
            license: "MIT OR Apache-2.0".to_owned(),
            ..Package::default()
        };
        let problems = check_license_files(std::slice::from_ref(&package));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("LICENSE-APACHE is missing"),
            "{problems:?}"
        );
        std::fs::write(dir.join("LICENSE-APACHE"), "Apache").unwrap();
        assert!(check_license_files(std::slice::from_ref(&package)).is_empty());
        package.license = "MIT OR GPL-3.0".to_owned();
        let problems = check_license_files(std::slice::from_ref(&package));
        assert!(
            problems[0].contains("GPL-3.0 has no license file"),
            "{problems:?}"
        );
        package.publishable = false;
        assert!(check_license_files(&[package]).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
