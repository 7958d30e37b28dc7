//! SKILL.md: the YAML front matter between two `---` lines, validated as the Agent Skills format
//! defines it, and the body after it.
//!
//! The front matter is read by `clawsmith_core::front_matter` (the reader agent definitions use
//! too: aliases, duplicate keys, deep nesting and more than one document are refused); this
//! module checks its fields. Every refusal is a reason string; nothing here panics on input.

use clawsmith_core::front_matter::parse_front_matter;
use serde::Serialize;
use serde_json::{Map, Value};
/// `name`: at most this many characters.
pub const NAME_MAX_CHARS: usize = 64;
/// `description`: at most this many characters.
pub const DESCRIPTION_MAX_CHARS: usize = 1_024;
/// `compatibility`: at most this many characters.
pub const COMPATIBILITY_MAX_CHARS: usize = 500;

/// The validated front matter of a skill.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillMeta {
    /// The skill's name (equal to its folder's name).
    pub name: String,
    /// What it is for and when to use it.
    pub description: String,
    /// Its license, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// What it needs from the environment, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<String>,
    /// Free-form key/value data.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Tools the skill expects to use. Informational only: it never grants anything beyond the
    /// permission mode and rules.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
}

/// A parsed SKILL.md: its front matter and the body after it.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillFile {
    /// The validated front matter.
    pub meta: SkillMeta,
    /// Everything after the closing `---` line.
    pub body: String,
    /// The line of SKILL.md the body starts on (1-based).
    pub body_line: usize,
}

/// Parses and validates `text`, the content of `<folder>/SKILL.md`. `Err` is the reason the
/// skill is not loaded, for `clawsmith skills list`.
pub fn parse_skill(text: &str, folder: &str) -> Result<SkillFile, String> {
    let front = parse_front_matter(text, "SKILL.md")?;
    let meta = validate(front.fields, folder)?;
    Ok(SkillFile {
        meta,
        body: front.body.to_owned(),
        body_line: front.body_line,
    })
}

/// Whether `name` follows the format's rules: 1–64 characters of `[a-z0-9-]`, no hyphen at
/// either end, no two hyphens in a row. `Err` says which rule failed.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("`name` is empty".to_owned());
    }
    let length = name.chars().count();
    if length > NAME_MAX_CHARS {
        return Err(format!(
            "`name` has {length} characters; at most {NAME_MAX_CHARS} are allowed"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "`name` may hold only lowercase letters a-z, digits and `-`; found {bad:?}"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("`name` may not start or end with `-`".to_owned());
    }
    if name.contains("--") {
        return Err("`name` may not contain `--`".to_owned());
    }
    Ok(())
}

fn validate(value: Value, folder: &str) -> Result<SkillMeta, String> {
    let mut map = match value {
        Value::Object(map) => map,
        Value::Null => {
            return Err(
                "the front matter is empty; `name` and `description` are required".to_owned(),
            );
        }
        _ => return Err("the front matter must be a YAML mapping of keys to values".to_owned()),
    };
    let name = required_string(&mut map, "name")?;
    check_name(&name)?;
    if name != folder {
        return Err(format!(
            "`name` is `{name}` but the folder is `{folder}`; they must be equal"
        ));
    }
    let description = required_string(&mut map, "description")?;
    if description.trim().is_empty() {
        return Err("`description` is empty".to_owned());
    }
    let length = description.chars().count();
    if length > DESCRIPTION_MAX_CHARS {
        return Err(format!(
            "`description` has {length} characters; at most {DESCRIPTION_MAX_CHARS} are allowed"
        ));
    }
    let license = optional_string(&mut map, "license")?;
    let compatibility = optional_string(&mut map, "compatibility")?;
    if let Some(compatibility) = &compatibility {
        let length = compatibility.chars().count();
        if length == 0 || length > COMPATIBILITY_MAX_CHARS {
            return Err(format!(
                "`compatibility` has {length} characters; it must have 1 to {COMPATIBILITY_MAX_CHARS}"
            ));
        }
    }
    let metadata = match map.remove("metadata") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(metadata)) => metadata,
        Some(_) => return Err("`metadata` must be a mapping of keys to values".to_owned()),
    };
    let allowed_tools = match map.remove("allowed-tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(tools)) => tools.split_whitespace().map(str::to_owned).collect(),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::String(tool) => Ok(tool),
                _ => Err("`allowed-tools` must be a string or a list of strings".to_owned()),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`allowed-tools` must be a string or a list of strings".to_owned()),
    };
    Ok(SkillMeta {
        name,
        description,
        license,
        compatibility,
        metadata,
        allowed_tools,
    })
}

fn required_string(map: &mut Map<String, Value>, key: &str) -> Result<String, String> {
    match map.remove(key) {
        None | Some(Value::Null) => Err(format!("`{key}` is required")),
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

fn optional_string(map: &mut Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (SKILL.md text, folder, expected: Ok(description) or Err(part of the reason))
    fn check(text: &str, folder: &str, expected: Result<&str, &str>) {
        match (parse_skill(text, folder), expected) {
            (Ok(file), Ok(description)) => assert_eq!(file.meta.description, description),
            (Err(reason), Err(part)) => assert!(reason.contains(part), "{reason:?} lacks {part:?}"),
            (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn front_matter_cases() {
        let long_name = "a".repeat(65);
        let long_description = "d".repeat(1025);
        let long_compatibility = "c".repeat(501);
        // 1,024 characters (not bytes) is the limit.
        let longest = format!("{}é", "d".repeat(1023));
        let cases: Vec<(String, &str, Result<&str, &str>)> = vec![
            (
                "---\nname: pdf\ndescription: Fill PDFs.\n---\nBody\n".into(),
                "pdf",
                Ok("Fill PDFs."),
            ),
            (
                "\u{feff}---\r\nname: pdf\r\ndescription: x\r\n---\r\n".into(),
                "pdf",
                Ok("x"),
            ),
            (
                "no front matter\n".into(),
                "pdf",
                Err("must start with a `---`"),
            ),
            ("---\nname: pdf\n".into(), "pdf", Err("no closing `---`")),
            (
                "---\nname: [pdf\n---\n".into(),
                "pdf",
                Err("invalid YAML at line"),
            ),
            (
                "---\n- a\n- b\n---\n".into(),
                "pdf",
                Err("must be a YAML mapping"),
            ),
            ("---\n---\n".into(), "pdf", Err("front matter is empty")),
            (
                "---\ndescription: x\n---\n".into(),
                "pdf",
                Err("`name` is required"),
            ),
            (
                "---\nname: 12\ndescription: x\n---\n".into(),
                "12",
                Err("`name` must be a string"),
            ),
            (
                "---\nname: \"\"\ndescription: x\n---\n".into(),
                "pdf",
                Err("`name` is empty"),
            ),
            (
                format!("---\nname: {long_name}\ndescription: x\n---\n"),
                &long_name,
                Err("65 characters"),
            ),
            (
                "---\nname: Pdf\ndescription: x\n---\n".into(),
                "Pdf",
                Err("lowercase"),
            ),
            (
                "---\nname: pdf_x\ndescription: x\n---\n".into(),
                "pdf_x",
                Err("lowercase"),
            ),
            (
                "---\nname: -pdf\ndescription: x\n---\n".into(),
                "-pdf",
                Err("start or end"),
            ),
            (
                "---\nname: pdf-\ndescription: x\n---\n".into(),
                "pdf-",
                Err("start or end"),
            ),
            (
                "---\nname: p--df\ndescription: x\n---\n".into(),
                "p--df",
                Err("`--`"),
            ),
            (
                "---\nname: pdf\ndescription: x\n---\n".into(),
                "docx",
                Err("the folder is `docx`"),
            ),
            (
                "---\nname: pdf\n---\n".into(),
                "pdf",
                Err("`description` is required"),
            ),
            (
                "---\nname: pdf\ndescription: \"  \"\n---\n".into(),
                "pdf",
                Err("`description` is empty"),
            ),
            (
                format!("---\nname: pdf\ndescription: {long_description}\n---\n"),
                "pdf",
                Err("1025 characters"),
            ),
            (
                format!("---\nname: pdf\ndescription: {}é\n---\n", "d".repeat(1023)),
                "pdf",
                Ok(&longest),
            ),
            (
                format!(
                    "---\nname: pdf\ndescription: x\ncompatibility: {long_compatibility}\n---\n"
                ),
                "pdf",
                Err("1 to 500"),
            ),
            (
                "---\nname: pdf\ndescription: x\ncompatibility: [a]\n---\n".into(),
                "pdf",
                Err("`compatibility` must be a string"),
            ),
            (
                "---\nname: pdf\ndescription: x\nmetadata: [a]\n---\n".into(),
                "pdf",
                Err("`metadata` must be a mapping"),
            ),
            (
                "---\nname: pdf\ndescription: x\nmetadata:\n  author: me\n  version: 1.0\n---\n"
                    .into(),
                "pdf",
                Ok("x"),
            ),
            (
                "---\nname: pdf\ndescription: x\nlicense: 3\n---\n".into(),
                "pdf",
                Err("`license` must be a string"),
            ),
            (
                "---\nname: pdf\ndescription: x\nallowed-tools: {a: b}\n---\n".into(),
                "pdf",
                Err("`allowed-tools` must be"),
            ),
            (
                "---\nname: pdf\ndescription: x\nname: pdf\n---\n".into(),
                "pdf",
                Err("duplicate key `name`"),
            ),
            (
                "---\nname: &a pdf\ndescription: *a\n---\n".into(),
                "pdf",
                Err("aliases are not supported"),
            ),
            (
                format!(
                    "---\nname: pdf\ndescription: x\nk: {}\n---\n",
                    "[".repeat(40)
                ),
                "pdf",
                Err("nests deeper"),
            ),
            (
                format!("---\n{}---\n", "k: v\n".repeat(20_000)),
                "pdf",
                Err("longer than 65536 bytes"),
            ),
        ];
        for (text, folder, expected) in cases {
            check(&text, folder, expected);
        }
    }

    #[test]
    fn body_and_fields() {
        let file = parse_skill(
            "---\nname: pdf\ndescription: >\n  Fill\n  forms.\nallowed-tools: Read Bash(git:*)\nlicense: MIT\nx-extra: kept out\n---\n# Title\nText\n",
            "pdf",
        )
        .unwrap();
        assert_eq!(file.meta.description, "Fill forms.\n");
        assert_eq!(file.meta.allowed_tools, ["Read", "Bash(git:*)"]);
        assert_eq!(file.meta.license.as_deref(), Some("MIT"));
        assert_eq!(file.body, "# Title\nText\n");
        assert_eq!(file.body_line, 10);
    }
}
