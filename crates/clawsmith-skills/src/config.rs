//! The `[skills]` section of `clawsmith.toml`, and where the user's directories are.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::SkillsError;

/// The default size of the skill catalog in `skill_view`'s description, in characters.
pub const DEFAULT_CATALOG_BUDGET: usize = 8_000;

/// `[skills]` in `clawsmith.toml`. Other sections of the file belong to other readers and are
/// ignored; inside `[skills]` an unknown key is an error (a misspelled `disabled` would
/// otherwise silently enable a skill someone meant to turn off).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// More skill roots, searched after the workspace's and the user's. `~/` is the home
    /// directory; a relative path is relative to the workspace.
    #[serde(default)]
    pub extra_dirs: Vec<PathBuf>,
    /// Names of skills that are found and listed but never offered or read.
    #[serde(default)]
    pub disabled: Vec<String>,
    /// The most characters the catalog may take in `skill_view`'s description.
    #[serde(default = "default_budget")]
    pub catalog_budget: usize,
}

fn default_budget() -> usize {
    DEFAULT_CATALOG_BUDGET
}

impl Default for SkillsConfig {
    fn default() -> SkillsConfig {
        SkillsConfig {
            extra_dirs: Vec::new(),
            disabled: Vec::new(),
            catalog_budget: DEFAULT_CATALOG_BUDGET,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    skills: Option<SkillsConfig>,
}

impl SkillsConfig {
    /// Parses the `[skills]` section of the TOML text of `clawsmith.toml` (the default when
    /// there is none).
    pub fn from_toml_str(text: &str) -> Result<SkillsConfig, SkillsError> {
        SkillsConfig::parse(text, None)
    }

    /// Reads `path` and parses its `[skills]` section. Errors name the file, line and column.
    pub fn load(path: &Path) -> Result<SkillsConfig, SkillsError> {
        let text = std::fs::read_to_string(path).map_err(|cause| SkillsError::ReadConfig {
            path: path.to_path_buf(),
            cause,
        })?;
        SkillsConfig::parse(&text, Some(path.to_path_buf()))
    }

    fn parse(text: &str, path: Option<PathBuf>) -> Result<SkillsConfig, SkillsError> {
        let file: ConfigFile =
            toml::from_str(text).map_err(|error| SkillsError::InvalidConfig {
                path: path.clone(),
                message: error.to_string(),
            })?;
        let config = file.skills.unwrap_or_default();
        if config.catalog_budget == 0 {
            return Err(SkillsError::InvalidConfig {
                path,
                message: "[skills] catalog_budget must be at least 1".to_owned(),
            });
        }
        Ok(config)
    }
}

/// The user's home and configuration directories, passed in rather than read from the
/// environment inside the crate, so tests never see the real home.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserDirs {
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` (used only when absolute, as the XDG specification says).
    pub xdg_config_home: Option<PathBuf>,
}

impl UserDirs {
    /// `HOME` and `XDG_CONFIG_HOME` of this process.
    pub fn from_env() -> UserDirs {
        UserDirs {
            home: std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(PathBuf::from),
            xdg_config_home: std::env::var_os("XDG_CONFIG_HOME")
                .filter(|dir| !dir.is_empty())
                .map(PathBuf::from),
        }
    }

    /// `$XDG_CONFIG_HOME`, else `~/.config`.
    pub fn config_home(&self) -> Option<PathBuf> {
        match &self.xdg_config_home {
            Some(dir) if dir.is_absolute() => Some(dir.clone()),
            _ => self.home.as_ref().map(|home| home.join(".config")),
        }
    }

    /// `path` with a leading `~/` replaced by the home directory; a relative path is joined to
    /// `base`. `None` when it starts with `~/` and there is no home.
    pub fn expand(&self, path: &Path, base: &Path) -> Option<PathBuf> {
        if let Ok(rest) = path.strip_prefix("~") {
            return self.home.as_ref().map(|home| home.join(rest));
        }
        Some(if path.is_absolute() {
            path.to_path_buf()
        } else {
            base.join(path)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_errors() {
        let config = SkillsConfig::from_toml_str(
            "mode = \"ask\"\n[skills]\nextra_dirs = [\"~/s\"]\ndisabled = [\"x\"]\n",
        )
        .unwrap();
        assert_eq!(config.extra_dirs, [PathBuf::from("~/s")]);
        assert_eq!(config.disabled, ["x"]);
        assert_eq!(config.catalog_budget, DEFAULT_CATALOG_BUDGET);
        assert_eq!(
            SkillsConfig::from_toml_str("[[mcp_servers]]\nname = \"a\"\n").unwrap(),
            SkillsConfig::default()
        );
        let error = SkillsConfig::from_toml_str("[skills]\ndisable = [\"x\"]\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("line 2") && error.contains("disable"),
            "{error}"
        );
    }

    #[test]
    fn user_dirs() {
        let dirs = UserDirs {
            home: Some("/h".into()),
            xdg_config_home: Some("relative".into()),
        };
        assert_eq!(dirs.config_home(), Some(PathBuf::from("/h/.config")));
        assert_eq!(
            dirs.expand(Path::new("~/a"), Path::new("/ws")),
            Some(PathBuf::from("/h/a"))
        );
        assert_eq!(
            dirs.expand(Path::new("a"), Path::new("/ws")),
            Some(PathBuf::from("/ws/a"))
        );
    }
}
