//! # clawsmith-skills
//!
//! Skills and read-only long-term memory as two extension tools, `skill_view` and
//! `memory_search`, that enter the core's frozen table like any other tool (schema, risk,
//! permission, hooks, journal, result) — nothing here bypasses the core.
//!
//! ## Skills (the open Agent Skills format)
//! A skill is a folder with a `SKILL.md`: YAML front matter (`name`, `description`, optional
//! `license`, `compatibility`, `metadata`, `allowed-tools`) and Markdown instructions, next to any
//! reference files. [`standard_roots`] lists where skills are looked for, first one wins by name:
//! the workspace's `.clawsmith/skills`, `.agents/skills`, `.claude/skills`, then
//! `$XDG_CONFIG_HOME/clawsmith/skills` (default `~/.config/clawsmith/skills`), `~/.agents/skills`,
//! then `[skills] extra_dirs` of `clawsmith.toml` ([`SkillsConfig`]). Other crates add roots with
//! [`SkillRoot`] — `clawsmith-plugins` passes each plugin's `skills/` with
//! `prefix: Some(plugin)`, so its skills are named `<plugin>:<skill>`. [`discover`] returns a
//! [`SkillSet`]: every folder found with a [`SkillStatus`] — loaded, invalid (with the reason),
//! shadowed (by which source) or disabled (`[skills] disabled`).
//! [`SkillViewTool`] (`skill_view {name, path?}`) returns the instructions without front matter
//! and a bounded listing of the folder, or one file of it. Its description carries the
//! [`Catalog`] (name and description of each loaded skill), frozen with the table, within
//! `[skills] catalog_budget` characters (default 8,000): descriptions are shortened first, then
//! skills omitted, and the description says how many.
//!
//! ## Memory
//! [`Memory`] reads `AGENTS.md`, `CLAUDE.md`, `GEMINI.md` and `.clawsmith/memory/**/*.md` of the
//! workspace, `$XDG_CONFIG_HOME/clawsmith/memory/**/*.md`, and notes (`clawsmith memory add`);
//! cuts Markdown into chunks at its headings ([`chunk_markdown`]); keeps the index up to date by
//! content hash at every search; reads a query as words (any of them) and "quoted phrases"
//! ([`parse_query`]); and shows hits with source, line range, heading, a marked snippet, score and
//! time ([`MemorySearchTool`], `memory_search {query, limit?, scope?}`).
//!
//! ## Decisions
//! - **The fs crate's boundary for every read.** Each skill folder, each memory folder and the
//!   workspace is opened as a `clawsmith_fs::Workspace`; files are opened with `openat2(...,
//!   RESOLVE_BENEATH)`, so `..`, absolute paths and symlinks that leave a skill folder are
//!   refused by the lexical check or the kernel, and a skill root or memory folder under the
//!   workspace that leads outside it (a symlink) is skipped. The user's own folders may be
//!   symlinks anywhere: they are the user's.
//! - **One owner of SQL.** The FTS5 index (BM25 with the heading weighted 10×, a trigram table for
//!   parts of words) is `clawsmith_checkpoint::MemoryIndex`, a separate `memory.db` in the state
//!   directory, never in the workspace. This crate hands it typed terms; the checkpoint crate
//!   quotes every term, so no query reaches FTS5 as syntax and none answers with an error code.
//! - **YAML from events** (`clawsmith_core::front_matter`, over `yaml-rust2`, the one reader
//!   sub-agent definitions share): aliases, more than one document, duplicate keys and deep
//!   nesting are refused as reasons, never panics or unbounded memory. Unknown front-matter keys (other agents add their own) are ignored.
//! - **Read every time, frozen once.** The catalog is fixed when the table is built (the tool
//!   table is frozen, A1); `skill_view` reads SKILL.md again at each call, so instructions are
//!   current and a skill that became invalid says why. The memory index refreshes at each
//!   search, so an edited file is found at once.
//! - **`allowed-tools` is informational.** It is shown, never consulted: a skill cannot grant
//!   anything beyond the permission mode and rules.
//! - **Injected home.** [`UserDirs`] carries `HOME` and `XDG_CONFIG_HOME`; only
//!   [`UserDirs::from_env`] reads the environment, so tests never see the real home.
//!
//! ## What it does not do
//! It runs nothing (skill scripts are files to read; running them is `run_command`'s job,
//! under the permission mode), never writes the workspace, and does not watch files: changes
//! are seen at the next search or view, new skills at the next start.

mod catalog;
mod config;
mod discovery;
mod error;
mod frontmatter;
mod memory;
mod search_tool;
mod tool;
mod view;

use std::path::Path;
use std::sync::Arc;

use clawsmith_core::ExtensionTool;

pub use catalog::{Catalog, MIN_DESCRIPTION_CHARS, build_catalog};
pub use config::{DEFAULT_CATALOG_BUDGET, SkillsConfig, UserDirs};
pub use discovery::{
    SKILL_FILE_MAX_BYTES, Skill, SkillRoot, SkillSet, SkillStatus, discover, discover_hiding,
    standard_roots,
};
pub use error::SkillsError;
pub use frontmatter::{
    COMPATIBILITY_MAX_CHARS, DESCRIPTION_MAX_CHARS, NAME_MAX_CHARS, SkillFile, SkillMeta,
    check_name, parse_skill,
};
pub use memory::{
    CHUNK_MAX_LINES, DEFAULT_LIMIT, MAX_LIMIT, MEMORY_FILE_MAX_BYTES, MEMORY_FILES_MAX, Memory,
    MemoryConfig, MemorySearchHit, MemorySearchOutcome, NOTE_MAX_BYTES, QUERY_MAX_CHARS,
    QUERY_MAX_TERMS, WORKSPACE_MEMORY_DIR, WORKSPACE_MEMORY_FILES, chunk_markdown, parse_query,
    render, snippet, utc_time,
};
pub use search_tool::{
    MEMORY_SEARCH, MemorySearch, MemorySearchInput, MemorySearchTool, SearchScope, search_result,
};
pub use tool::{ReadOnly, ReadTool};
pub use view::{
    SKILL_FILE_READ_MAX_BYTES, SKILL_LISTING_MAX_ENTRIES, SKILL_VIEW, SkillViewInput, SkillViewTool,
};

/// The file name of the memory index in the state directory.
pub const MEMORY_INDEX_FILE: &str = "memory.db";

/// The skills of `workspace`: the standard roots, then `extra_roots` (plugins), with
/// `config`'s disabled names.
pub fn workspace_skills(
    workspace: &Path,
    dirs: &UserDirs,
    config: &SkillsConfig,
    extra_roots: &[SkillRoot],
    hidden: Option<&Arc<clawsmith_fs::HiddenPaths>>,
) -> SkillSet {
    let mut roots = standard_roots(workspace, dirs, config);
    roots.extend(extra_roots.iter().cloned());
    discover_hiding(workspace, &roots, &config.disabled, hidden)
}

/// The extension tools: `skill_view` when at least one skill is loaded (an empty catalog would
/// only cost the model tokens), and `memory_search`.
pub fn extension_tools(
    skills: Arc<SkillSet>,
    config: &SkillsConfig,
    memory: Arc<Memory>,
) -> Vec<ExtensionTool> {
    let mut tools = Vec::new();
    if skills.loaded().next().is_some() {
        tools.push(ExtensionTool {
            source: "skills".to_owned(),
            tool: Arc::new(SkillViewTool::new(skills, config.catalog_budget)),
            deferred: false,
        });
    }
    tools.push(ExtensionTool {
        source: "memory".to_owned(),
        tool: Arc::new(MemorySearchTool::new(memory)),
        deferred: false,
    });
    tools
}
