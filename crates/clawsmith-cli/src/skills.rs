//! `skills list` and `memory add|list|rm|search`, and the `skill_view` / `memory_search` tools
//! of every core this binary builds (clawsmith-skills).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Subcommand, ValueEnum};
use clawsmith_core::ExtensionTool;
use clawsmith_core::fs::HiddenPaths;
use clawsmith_skills::{
    MEMORY_INDEX_FILE, Memory, MemoryConfig, SearchScope, SkillRoot, SkillSet, SkillStatus,
    SkillsConfig, UserDirs,
};
use serde_json::json;

use crate::{Output, refusal, state};

/// `clawsmith skills …`.
#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Every skill found for a workspace, where it comes from, and why an invalid one is not
    /// loaded (shadowed and disabled ones too).
    List {
        /// The workspace whose skills are listed (with the user's).
        #[arg(long, value_name = "DIR")]
        workspace: PathBuf,
        /// The configuration (`[skills] extra_dirs`, `disabled`); default: `clawsmith.toml` in
        /// the state directory when it exists.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

/// `clawsmith memory …`: notes, and searching what `memory_search` searches.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Add a note to long-term memory (kept in the state directory).
    Add {
        /// The note.
        text: String,
        /// A tag (repeatable).
        #[arg(long = "tag", value_name = "T")]
        tags: Vec<String>,
    },
    /// Every note, oldest first.
    List,
    /// Remove a note.
    Rm {
        /// The note's id (`3` or `note:3`).
        id: String,
    },
    /// Search memory as `memory_search` does.
    Search {
        /// Words (any of them) and "quoted phrases".
        query: String,
        /// The workspace whose memory files are searched (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// Where to look.
        #[arg(long, value_enum, default_value_t = ScopeArg::All)]
        scope: ScopeArg,
        /// How many hits at most (1-50).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=50))]
        limit: u32,
    },
}

/// `--scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScopeArg {
    /// The workspace's memory files.
    Workspace,
    /// The user's memory files.
    User,
    /// Notes.
    Notes,
    /// All of them.
    All,
}

impl From<ScopeArg> for SearchScope {
    fn from(scope: ScopeArg) -> SearchScope {
        match scope {
            ScopeArg::Workspace => SearchScope::Workspace,
            ScopeArg::User => SearchScope::User,
            ScopeArg::Notes => SearchScope::Notes,
            ScopeArg::All => SearchScope::All,
        }
    }
}

/// `[skills]` of the configuration file, when there is one.
fn skills_config(config: Option<&Path>) -> Result<SkillsConfig> {
    match config {
        None => Ok(SkillsConfig::default()),
        Some(path) => SkillsConfig::load(path)
            .with_context(|| format!("reading the skills configuration {}", path.display())),
    }
}

fn memory(state_dir: &Path, workspace: Option<PathBuf>) -> Result<Memory> {
    state::prepare_state_dir(state_dir)?;
    Ok(Memory::new(MemoryConfig {
        workspace,
        dirs: UserDirs::from_env(),
        index_path: state_dir.join(MEMORY_INDEX_FILE),
        // The person at the terminal searches their own memory: nothing is hidden from them.
        hidden: None,
    }))
}

/// The skills of `workspace` (standard roots, then `extra_roots`), problems reported on stderr.
fn find_skills(
    workspace: &Path,
    config: &SkillsConfig,
    extra_roots: &[SkillRoot],
    hidden: Option<&Arc<HiddenPaths>>,
) -> SkillSet {
    let set = clawsmith_skills::workspace_skills(
        workspace,
        &UserDirs::from_env(),
        config,
        extra_roots,
        hidden,
    );
    for problem in &set.problems {
        crate::output::notice(crate::output::Level::Warning, problem);
    }
    set
}

/// The tools a core gets from clawsmith-skills: `skill_view` when a skill is loaded, and
/// `memory_search` over the workspace's, the user's and the notes' memory.
pub fn core_tools(
    state_dir: &Path,
    config: Option<&Path>,
    workspace: &Path,
    extra_roots: &[SkillRoot],
    hidden: &Arc<HiddenPaths>,
) -> Result<Vec<ExtensionTool>> {
    let config = skills_config(config)?;
    let skills = find_skills(workspace, &config, extra_roots, Some(hidden));
    let memory = Memory::new(MemoryConfig {
        workspace: Some(workspace.to_path_buf()),
        dirs: UserDirs::from_env(),
        index_path: state_dir.join(MEMORY_INDEX_FILE),
        hidden: Some(hidden.clone()),
    });
    Ok(clawsmith_skills::extension_tools(
        Arc::new(skills),
        &config,
        Arc::new(memory),
    ))
}

/// `clawsmith skills …`.
pub fn run_skills(state_dir: &Path, command: SkillsCommand, out: &Output) -> Result<i32> {
    let SkillsCommand::List { workspace, config } = command;
    let workspace = workspace
        .canonicalize()
        .with_context(|| format!("workspace {} does not exist", workspace.display()))?;
    let config_path = crate::run::config_file(state_dir, config.as_deref())?;
    let config = skills_config(config_path.as_deref())?;
    let set = find_skills(&workspace, &config, &[], None);
    if out.json {
        out.json_line(&set)?;
        return Ok(0);
    }
    if set.skills.is_empty() {
        out.line("no skills found")?;
    }
    for skill in &set.skills {
        let detail = match &skill.status {
            SkillStatus::Loaded => skill
                .meta
                .as_ref()
                .map(|meta| {
                    meta.description
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
            SkillStatus::Invalid { reason } => reason.clone(),
            SkillStatus::Shadowed { by } => format!("shadowed by {by}"),
            SkillStatus::Disabled => "disabled in [skills] disabled".to_owned(),
        };
        let status = match skill.status {
            SkillStatus::Loaded => "loaded",
            SkillStatus::Invalid { .. } => "invalid",
            SkillStatus::Shadowed { .. } => "shadowed",
            SkillStatus::Disabled => "disabled",
        };
        let detail = clawsmith_protocol::truncate_to_boundary(detail, 200);
        out.line(&format!(
            "{}  {status}  {}  {detail}",
            skill.name, skill.source
        ))?;
    }
    Ok(0)
}

/// `clawsmith memory …`.
pub fn run_memory(state_dir: &Path, command: MemoryCommand, out: &Output) -> Result<i32> {
    match command {
        MemoryCommand::Add { text, tags } => {
            let note = memory(state_dir, None)?.add_note(&text, &tags)?;
            if out.json {
                out.json_line(&note)?;
            } else {
                out.line(&format!("added note:{}", note.id))?;
            }
        }
        MemoryCommand::List => {
            let notes = memory(state_dir, None)?.notes()?;
            if out.json {
                out.json_line(&json!({ "notes": notes }))?;
            } else if notes.is_empty() {
                out.line("no notes")?;
            } else {
                for note in notes {
                    let tags = if note.tags.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", note.tags.join(", "))
                    };
                    let first = note.text.lines().next().unwrap_or_default();
                    out.line(&format!(
                        "note:{}  {}{tags}  {}",
                        note.id,
                        clawsmith_skills::utc_time(note.created_ms),
                        clawsmith_protocol::truncate_to_boundary(first.to_owned(), 200)
                    ))?;
                }
            }
        }
        MemoryCommand::Rm { id } => {
            let number: i64 = id
                .strip_prefix("note:")
                .unwrap_or(&id)
                .parse()
                .map_err(|_| {
                    refusal(
                        format!("{id:?} is not a note id"),
                        "note ids are numbers, as `clawsmith memory list` shows them (3 or note:3)",
                    )
                })?;
            if !memory(state_dir, None)?.remove_note(number)? {
                return Err(refusal(
                    format!("no note:{number}"),
                    "`clawsmith memory list` shows the notes",
                ));
            }
            if out.json {
                out.json_line(&json!({ "removed": number }))?;
            } else {
                out.line(&format!("removed note:{number}"))?;
            }
        }
        MemoryCommand::Search {
            query,
            workspace,
            scope,
            limit,
        } => {
            let workspace = match workspace {
                Some(dir) => dir,
                None => std::env::current_dir().context("reading the current directory")?,
            };
            let workspace = workspace
                .canonicalize()
                .with_context(|| format!("workspace {} does not exist", workspace.display()))?;
            let memory = memory(state_dir, Some(workspace))?;
            let scope: SearchScope = scope.into();
            let outcome = memory.search(&query, limit as usize, &scope.scopes())?;
            if out.json {
                out.json_line(&outcome)?;
            } else {
                out.raw(&clawsmith_skills::render(&query, &outcome))?;
            }
        }
    }
    Ok(0)
}
