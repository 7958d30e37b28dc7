//! Finding skills: the roots in order, each skill folder's SKILL.md read through a
//! boundary-checked handle, validation, shadowing and `disabled`.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clawsmith_fs::{HiddenPaths, Workspace};
use serde::Serialize;

use crate::config::{SkillsConfig, UserDirs};
use crate::frontmatter::{SkillMeta, parse_skill};

/// The largest SKILL.md read, in bytes.
pub const SKILL_FILE_MAX_BYTES: u64 = 1024 * 1024;

/// A folder whose sub-folders are skills (`<dir>/<name>/SKILL.md`).
///
/// This is how other crates add skills: `clawsmith-plugins` passes each plugin's `skills/`
/// folder with `prefix: Some(plugin)`, so its skills are named `<plugin>:<skill>` and cannot
/// shadow (or be shadowed by) the user's own. The front matter's `name` must still equal the
/// folder name; the prefix is added on top.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRoot {
    /// The folder holding one sub-folder per skill.
    pub dir: PathBuf,
    /// Where it comes from, for people: `workspace:.agents/skills`, `user:…`, `plugin:<name>`.
    pub source: String,
    /// Added before each skill's name with a `:` (plugin skills).
    pub prefix: Option<String>,
}

/// Whether a found skill can be used, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum SkillStatus {
    /// Valid and offered in the catalog.
    Loaded,
    /// Not loaded: the front matter (or the file) is not valid.
    Invalid {
        /// Why, for people.
        reason: String,
    },
    /// Valid, but a skill of the same name came first.
    Shadowed {
        /// The source of the skill that wins.
        by: String,
    },
    /// Valid, but named in `[skills] disabled`.
    Disabled,
}

/// One skill folder that was found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    /// The name it is called by: the folder name, with the root's prefix (`plugin:skill`).
    pub name: String,
    /// The skill folder (canonical when it could be opened).
    pub dir: PathBuf,
    /// The root's source label.
    pub source: String,
    /// Loaded, invalid, shadowed or disabled.
    #[serde(flatten)]
    pub status: SkillStatus,
    /// The front matter, when it is valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<SkillMeta>,
    /// The folder, opened: `skill_view` reads beneath this descriptor only.
    #[serde(skip)]
    pub(crate) folder: Option<Arc<Workspace>>,
}

impl Skill {
    /// Whether it is offered and can be read.
    pub fn is_loaded(&self) -> bool {
        self.status == SkillStatus::Loaded
    }
}

/// Every skill found, in discovery order, and the roots that could not be read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SkillSet {
    /// Every skill folder found, loaded or not, in discovery order.
    pub skills: Vec<Skill>,
    /// Roots that exist but could not be used, for people.
    pub problems: Vec<String>,
}

impl SkillSet {
    /// The loaded skills, in discovery order.
    pub fn loaded(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter().filter(|skill| skill.is_loaded())
    }

    /// The loaded skill called `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.loaded().find(|skill| skill.name == name)
    }
}

/// The standard roots, in the order the first one wins: the workspace's
/// `.clawsmith/skills`, `.agents/skills` and `.claude/skills`, then
/// `$XDG_CONFIG_HOME/clawsmith/skills` (default `~/.config/clawsmith/skills`), `~/.agents/skills`,
/// then `[skills] extra_dirs`. Plugin roots are appended by the caller.
pub fn standard_roots(workspace: &Path, dirs: &UserDirs, config: &SkillsConfig) -> Vec<SkillRoot> {
    let mut roots: Vec<SkillRoot> = [".clawsmith/skills", ".agents/skills", ".claude/skills"]
        .into_iter()
        .map(|relative| SkillRoot {
            dir: workspace.join(relative),
            source: format!("workspace:{relative}"),
            prefix: None,
        })
        .collect();
    if let Some(config_home) = dirs.config_home() {
        let dir = config_home.join("clawsmith/skills");
        roots.push(SkillRoot {
            source: format!("user:{}", dir.display()),
            dir,
            prefix: None,
        });
    }
    if let Some(home) = &dirs.home {
        let dir = home.join(".agents/skills");
        roots.push(SkillRoot {
            source: format!("user:{}", dir.display()),
            dir,
            prefix: None,
        });
    }
    for extra in &config.extra_dirs {
        if let Some(dir) = dirs.expand(extra, workspace) {
            roots.push(SkillRoot {
                source: format!("extra:{}", dir.display()),
                dir,
                prefix: None,
            });
        }
    }
    roots
}

/// Finds the skills of `roots` (in order: the first skill of a name wins, later ones are
/// reported as shadowed). A root under `workspace` may not lead outside it, through a symlink
/// of the root or of a skill folder. Names in `disabled` are found but not loaded.
pub fn discover(workspace: &Path, roots: &[SkillRoot], disabled: &[String]) -> SkillSet {
    discover_hiding(workspace, roots, disabled, None)
}

/// [`discover`] with the workspace's hidden paths enforced on every skill folder's handle: a
/// `SKILL.md` or a file `skill_view` reads that is (or leads to) a hidden file is refused.
pub fn discover_hiding(
    workspace: &Path,
    roots: &[SkillRoot],
    disabled: &[String],
    hidden: Option<&Arc<HiddenPaths>>,
) -> SkillSet {
    let canonical_workspace = std::fs::canonicalize(workspace).unwrap_or(workspace.to_path_buf());
    let mut set = SkillSet::default();
    for root in roots {
        let boundary = root
            .dir
            .starts_with(workspace)
            .then_some(canonical_workspace.as_path());
        scan_root(root, boundary, hidden, &mut set);
    }
    let mut winners: HashMap<String, String> = HashMap::new();
    for skill in &mut set.skills {
        if !skill.is_loaded() {
            continue;
        }
        if let Some(by) = winners.get(&skill.name) {
            skill.status = SkillStatus::Shadowed { by: by.clone() };
            continue;
        }
        winners.insert(skill.name.clone(), skill.source.clone());
        if disabled.contains(&skill.name) {
            skill.status = SkillStatus::Disabled;
        }
    }
    set
}

fn scan_root(
    root: &SkillRoot,
    boundary: Option<&Path>,
    hidden: Option<&Arc<HiddenPaths>>,
    set: &mut SkillSet,
) {
    if std::fs::symlink_metadata(&root.dir).is_err() {
        return;
    }
    let shown = root.dir.display();
    let handle = match Workspace::open(&root.dir) {
        Ok(handle) => handle,
        Err(error) => {
            set.problems
                .push(format!("skill folder {shown} ({}): {error}", root.source));
            return;
        }
    };
    if let Some(boundary) = boundary
        && !handle.root().starts_with(boundary)
    {
        set.problems.push(format!(
            "skill folder {shown} ({}) leads outside the workspace; skipped",
            root.source
        ));
        return;
    }
    let listing = handle.list_files();
    let mut folders: Vec<&str> = listing
        .files
        .keys()
        .chain(listing.links.keys())
        .filter_map(|path| match path.split_once('/') {
            Some((folder, "SKILL.md")) => Some(folder),
            None if listing.links.contains_key(path) => Some(path.as_str()),
            _ => None,
        })
        .collect();
    folders.sort_unstable();
    folders.dedup();
    for folder in folders {
        set.skills.push(load_skill(root, boundary, hidden, folder));
    }
}

fn load_skill(
    root: &SkillRoot,
    boundary: Option<&Path>,
    hidden: Option<&Arc<HiddenPaths>>,
    folder: &str,
) -> Skill {
    let name = match &root.prefix {
        Some(prefix) => format!("{prefix}:{folder}"),
        None => folder.to_owned(),
    };
    let dir = root.dir.join(folder);
    let mut skill = Skill {
        name,
        dir: dir.clone(),
        source: root.source.clone(),
        status: SkillStatus::Loaded,
        meta: None,
        folder: None,
    };
    let invalid = |reason: String| SkillStatus::Invalid { reason };
    let handle = match Workspace::open(&dir) {
        Ok(handle) => match hidden {
            Some(hidden) => handle.with_hidden(hidden.clone()),
            None => handle,
        },
        Err(error) => {
            skill.status = invalid(format!("the folder cannot be opened: {error}"));
            return skill;
        }
    };
    skill.dir = handle.root().to_path_buf();
    if let Some(boundary) = boundary
        && !handle.root().starts_with(boundary)
    {
        skill.status = invalid("the folder is a symlink leading outside the workspace".to_owned());
        return skill;
    }
    match read_skill_file(&handle) {
        Err(reason) => skill.status = invalid(reason),
        Ok(text) => match parse_skill(&text, folder) {
            Ok(file) => {
                skill.meta = Some(file.meta);
                skill.folder = Some(Arc::new(handle));
            }
            Err(reason) => skill.status = invalid(reason),
        },
    }
    skill
}

/// SKILL.md of an opened skill folder: beneath it, regular, at most
/// [`SKILL_FILE_MAX_BYTES`], UTF-8.
pub(crate) fn read_skill_file(folder: &Workspace) -> Result<String, String> {
    let path = folder
        .resolve("SKILL.md")
        .map_err(|error| error.to_string())?;
    let (file, size) = folder
        .open_for_read(&path)
        .map_err(|error| format!("SKILL.md cannot be read: {error}"))?;
    if size > SKILL_FILE_MAX_BYTES {
        return Err(format!(
            "SKILL.md is {size} bytes; at most {SKILL_FILE_MAX_BYTES} are read"
        ));
    }
    let mut bytes = Vec::new();
    file.take(SKILL_FILE_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("SKILL.md cannot be read: {error}"))?;
    if bytes.len() as u64 > SKILL_FILE_MAX_BYTES {
        return Err(format!(
            "SKILL.md is larger than {SKILL_FILE_MAX_BYTES} bytes"
        ));
    }
    if bytes.contains(&0) {
        return Err("SKILL.md holds NUL bytes: it is a binary file, not text".to_owned());
    }
    String::from_utf8(bytes).map_err(|_| "SKILL.md is not valid UTF-8".to_owned())
}
