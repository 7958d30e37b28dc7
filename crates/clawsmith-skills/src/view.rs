//! `skill_view {name, path?}`: a skill's instructions, its folder's files, or one of them.

use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use clawsmith_fs::{Workspace, escape_control};
use clawsmith_protocol::{Display, DisplayKind, ErrorCode, ToolExecutionResult};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::catalog::{Catalog, build_catalog};
use crate::discovery::{SkillSet, read_skill_file};
use crate::frontmatter::parse_skill;
use crate::tool::{ReadOnly, ReadTool};

/// The tool's name.
pub const SKILL_VIEW: &str = "skill_view";
/// At most this many bytes of a skill's file reach the model.
pub const SKILL_FILE_READ_MAX_BYTES: usize = 100_000;
/// At most this many entries of a skill folder are listed.
pub const SKILL_LISTING_MAX_ENTRIES: usize = 200;
/// At most this many names are listed when a name is unknown.
const NAMES_IN_ERROR_MAX: usize = 50;
/// A NUL byte in this many leading bytes marks a file as binary (as `read_file` decides).
const BINARY_PROBE_BYTES: usize = 8 * 1024;

/// Arguments of `skill_view`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillViewInput {
    /// The skill's name, as listed in this tool's description.
    pub name: String,
    /// A file inside the skill's folder, relative to it (e.g. `reference/forms.md`). Without
    /// it, the skill's instructions and the list of its files are returned.
    #[serde(default)]
    pub path: Option<String>,
}

/// The state of `skill_view`: a frozen set of skills and the catalog in its description.
pub struct SkillView {
    skills: Arc<SkillSet>,
    description: String,
    catalog: Catalog,
}

/// The `skill_view` tool.
pub type SkillViewTool = ReadOnly<SkillView>;

impl std::fmt::Debug for SkillView {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SkillView")
            .field("catalog", &self.catalog)
            .finish_non_exhaustive()
    }
}

impl ReadOnly<SkillView> {
    /// The tool over `skills`, its catalog cut to `catalog_budget` characters.
    pub fn new(skills: Arc<SkillSet>, catalog_budget: usize) -> SkillViewTool {
        let catalog = build_catalog(skills.loaded(), catalog_budget);
        let mut description = String::from(
            "Read a skill: instructions for a kind of task, kept as a folder with SKILL.md. When \
             a task matches a skill's description below, read the skill first. Without `path` \
             this returns the instructions and the list of the skill's files; with `path`, one \
             of those files (at most 100000 bytes; binary files are refused).\n\nSkills:\n",
        );
        description.push_str(&catalog.lines);
        if catalog.listed == 0 && catalog.omitted == 0 {
            description.push_str("(none)\n");
        }
        if catalog.shortened > 0 || catalog.omitted > 0 {
            description.push_str(&format!(
                "[catalog: {} description(s) shortened, {} skill(s) omitted to fit {} \
                 characters; omitted skills can still be read by name]\n",
                catalog.shortened, catalog.omitted, catalog_budget
            ));
        }
        ReadOnly::wrap(SkillView {
            skills,
            description,
            catalog,
        })
    }

    /// The catalog as built for the description.
    pub fn catalog(&self) -> &Catalog {
        &self.inner().catalog
    }
}

impl ReadTool for SkillView {
    type Input = SkillViewInput;
    const NAME: &'static str = SKILL_VIEW;

    fn description(&self) -> &str {
        &self.description
    }

    fn summarize(input: &SkillViewInput) -> String {
        match &input.path {
            None => format!("View skill {}", escape_control(&input.name)),
            Some(path) => format!(
                "View {} of skill {}",
                escape_control(path),
                escape_control(&input.name)
            ),
        }
    }

    fn run(&self, input: SkillViewInput) -> ToolExecutionResult {
        let Some(skill) = self.skills.get(&input.name) else {
            return unknown_skill(&self.skills, &input.name);
        };
        let Some(folder) = &skill.folder else {
            return ToolExecutionResult::tool_failed(format!(
                "Skill {} cannot be read",
                skill.name
            ));
        };
        match &input.path {
            None => view_skill(&skill.name, folder),
            Some(path) => view_file(&skill.name, folder, path),
        }
    }
}

fn unknown_skill(skills: &SkillSet, name: &str) -> ToolExecutionResult {
    let names: Vec<&str> = skills.loaded().map(|skill| skill.name.as_str()).collect();
    let mut listed = names
        .iter()
        .take(NAMES_IN_ERROR_MAX)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NAMES_IN_ERROR_MAX {
        listed.push_str(&format!(", … ({} more)", names.len() - NAMES_IN_ERROR_MAX));
    }
    if names.is_empty() {
        listed.push_str("(none)");
    }
    ToolExecutionResult::failure(
        ErrorCode::INVALID_ARGUMENTS,
        format!(
            "Unknown skill: {}. Available skills: {listed}",
            escape_control(name)
        ),
    )
}

/// SKILL.md's body (front matter removed), then the folder's files.
fn view_skill(name: &str, folder: &Workspace) -> ToolExecutionResult {
    let folder_name = folder
        .root()
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = match read_skill_file(folder) {
        Ok(text) => text,
        Err(reason) => return ToolExecutionResult::tool_failed(format!("Skill {name}: {reason}")),
    };
    // Read again at every view: the instructions are whatever SKILL.md says now, and a skill
    // that became invalid since the table was built says why instead of half-loading.
    let file = match parse_skill(&text, &folder_name) {
        Ok(file) => file,
        Err(reason) => {
            return ToolExecutionResult::tool_failed(format!("Skill {name} is invalid: {reason}"));
        }
    };
    let listing = folder.list_files();
    let mut entries: Vec<&String> = listing.files.keys().chain(listing.links.keys()).collect();
    entries.sort();
    let mut text = file.body.trim_start_matches(['\n', '\r']).to_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!(
        "\n[files of skill {name} ({} total); read one with {SKILL_VIEW} {{\"name\": \"{name}\", \
         \"path\": …}}]\n",
        entries.len()
    ));
    for entry in entries.iter().take(SKILL_LISTING_MAX_ENTRIES) {
        text.push_str(&escape_control(entry));
        if listing.links.contains_key(*entry) {
            text.push_str(" (symlink)");
        }
        text.push('\n');
    }
    if entries.len() > SKILL_LISTING_MAX_ENTRIES {
        text.push_str(&format!(
            "[… {} more files not listed]\n",
            entries.len() - SKILL_LISTING_MAX_ENTRIES
        ));
    }
    let display = Display::new(DisplayKind::Text)
        .with_title(format!("skill {name}"))
        .with_body(file.body)
        .with_field("files", entries.len());
    ToolExecutionResult::success(text).with_display(display)
}

/// One file of the skill folder, opened beneath it: `..`, absolute paths and symlinks that
/// leave the folder are refused by the lexical check or by the kernel (`RESOLVE_BENEATH`).
fn view_file(name: &str, folder: &Workspace, requested: &str) -> ToolExecutionResult {
    let outside = || {
        ToolExecutionResult::tool_failed(format!(
            "Path is outside the skill folder of {name}: {}",
            escape_control(requested)
        ))
    };
    // An absolute path is refused even when it points inside: paths are relative to the skill.
    if requested.starts_with('/') {
        return outside();
    }
    let path = match folder.resolve(requested) {
        Ok(path) => path,
        Err(clawsmith_fs::FsError::OutsideWorkspace { .. }) => return outside(),
        Err(error) => return invalid_path(&error.to_string()),
    };
    if path.is_root() || path.names_folder() {
        return invalid_path(&format!(
            "Path names a folder, not a file: {}",
            escape_control(requested)
        ));
    }
    let (file, size) = match folder.open_for_read(&path) {
        Ok(opened) => opened,
        Err(clawsmith_fs::FsError::OutsideWorkspace { .. }) => return outside(),
        Err(error) => {
            return ToolExecutionResult::tool_failed(format!("Skill {name}: {error}"));
        }
    };
    match read_text(&file) {
        Ok(None) => ToolExecutionResult::tool_failed(format!(
            "Cannot read {path} of skill {name}: it is a binary file (NUL byte in the first 8 KiB)"
        )),
        Ok(Some((mut text, truncated))) => {
            if truncated {
                text.push_str(&format!(
                    "\n[truncated: the file is {size} bytes; only the first \
                     {SKILL_FILE_READ_MAX_BYTES} are shown]"
                ));
            }
            let display = Display::new(DisplayKind::Text)
                .with_title(format!("skill {name}: {path}"))
                .with_body(text.clone())
                .with_field("size", format!("{size} bytes"))
                .with_field("truncated", truncated);
            ToolExecutionResult::success(text).with_display(display)
        }
        Err(error) => {
            ToolExecutionResult::tool_failed(format!("Cannot read {path} of skill {name}: {error}"))
        }
    }
}

fn invalid_path(message: &str) -> ToolExecutionResult {
    ToolExecutionResult::failure(ErrorCode::INVALID_ARGUMENTS, message)
}

/// The first [`SKILL_FILE_READ_MAX_BYTES`] bytes as text (invalid UTF-8 replaced), whether
/// there was more, or `None` for a binary file.
fn read_text(file: &std::fs::File) -> std::io::Result<Option<(String, bool)>> {
    let mut head = vec![0u8; BINARY_PROBE_BYTES];
    let read = file.read_at(&mut head, 0)?;
    if head[..read].contains(&0) {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(SKILL_FILE_READ_MAX_BYTES + 1);
    file.take(SKILL_FILE_READ_MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    let truncated = bytes.len() > SKILL_FILE_READ_MAX_BYTES;
    bytes.truncate(SKILL_FILE_READ_MAX_BYTES);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if truncated {
        // A character cut by the byte cap shows as U+FFFD at the very end; drop it.
        while text.ends_with('\u{fffd}') {
            text.pop();
        }
    }
    Ok(Some((text, truncated)))
}
