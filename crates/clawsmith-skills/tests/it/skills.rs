use std::sync::Arc;

use clawsmith_protocol::{Tool, ToolStatus};
use clawsmith_skills::{
    SkillRoot, SkillSet, SkillStatus, SkillViewTool, SkillsConfig, workspace_skills,
};
use serde_json::json;

use crate::{Fixture, call, code, symlink};

fn found(fixture: &Fixture, config: &SkillsConfig, extra: &[SkillRoot]) -> SkillSet {
    workspace_skills(&fixture.ws(), &fixture.dirs(), config, extra, None)
}

fn status_of<'a>(set: &'a SkillSet, name: &str, source_part: &str) -> &'a SkillStatus {
    &set.skills
        .iter()
        .find(|skill| skill.name == name && skill.source.contains(source_part))
        .unwrap_or_else(|| panic!("{name} from {source_part} not found in {set:#?}"))
        .status
}

#[test]
fn every_invalid_front_matter_is_listed_with_its_reason() {
    let f = Fixture::new();
    let root = "ws/.clawsmith/skills";
    // (folder, SKILL.md, part of the reason)
    let long_description = "d".repeat(1025);
    let long_compatibility = "c".repeat(501);
    let long_name = "n".repeat(65);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "no-yaml",
            "# Just markdown\n".into(),
            "must start with a `---`",
        ),
        (
            "unclosed",
            "---\nname: unclosed\n".into(),
            "no closing `---`",
        ),
        (
            "bad-yaml",
            "---\nname: [bad-yaml\n---\n".into(),
            "invalid YAML at line",
        ),
        ("not-map", "---\n- a\n---\n".into(), "YAML mapping"),
        (
            "no-name",
            "---\ndescription: x\n---\n".into(),
            "`name` is required",
        ),
        (
            "upper",
            "---\nname: Upper\ndescription: x\n---\n".into(),
            "lowercase",
        ),
        (
            "lead",
            "---\nname: -lead\ndescription: x\n---\n".into(),
            "start or end",
        ),
        (
            "trail",
            "---\nname: trail-\ndescription: x\n---\n".into(),
            "start or end",
        ),
        (
            "dou--ble",
            "---\nname: dou--ble\ndescription: x\n---\n".into(),
            "`--`",
        ),
        (
            &long_name,
            format!("---\nname: {long_name}\ndescription: x\n---\n"),
            "65 characters",
        ),
        (
            "folder",
            "---\nname: other\ndescription: x\n---\n".into(),
            "the folder is `folder`",
        ),
        (
            "no-desc",
            "---\nname: no-desc\n---\n".into(),
            "`description` is required",
        ),
        (
            "empty-desc",
            "---\nname: empty-desc\ndescription: ''\n---\n".into(),
            "`description` is empty",
        ),
        (
            "long-desc",
            format!("---\nname: long-desc\ndescription: {long_description}\n---\n"),
            "1025 characters",
        ),
        (
            "long-compat",
            format!(
                "---\nname: long-compat\ndescription: x\ncompatibility: {long_compatibility}\n---\n"
            ),
            "1 to 500",
        ),
        (
            "meta-list",
            "---\nname: meta-list\ndescription: x\nmetadata: [1]\n---\n".into(),
            "`metadata` must be a mapping",
        ),
        (
            "alias",
            "---\nname: &n alias\ndescription: *n\n---\n".into(),
            "aliases are not supported",
        ),
        (
            "binary",
            "---\nname: binary\ndescription: \u{0}\n---\n".into(),
            "binary file",
        ),
    ];
    for (folder, text, _) in &cases {
        f.write(&format!("{root}/{folder}/SKILL.md"), text);
    }
    f.write(
        &format!("{root}/not-utf8/SKILL.md"),
        b"---\nname: \xff\n---\n",
    );
    let set = found(&f, &SkillsConfig::default(), &[]);
    for (folder, _, reason) in &cases {
        match status_of(&set, folder, "workspace") {
            SkillStatus::Invalid { reason: got } => {
                assert!(got.contains(reason), "{folder}: {got:?} lacks {reason:?}")
            }
            other => panic!("{folder}: {other:?}"),
        }
    }
    assert_eq!(
        status_of(&set, "not-utf8", "workspace"),
        &SkillStatus::Invalid {
            reason: "SKILL.md is not valid UTF-8".into()
        }
    );
    assert_eq!(set.loaded().count(), 0);
}

#[test]
fn workspace_skills_shadow_user_skills_and_the_first_root_wins() {
    let f = Fixture::new();
    f.skill("ws/.clawsmith/skills", "pdf", "Workspace PDF.");
    f.skill("ws/.agents/skills", "pdf", "Agents PDF.");
    f.skill("ws/.claude/skills", "pdf", "Claude PDF.");
    f.skill("config/clawsmith/skills", "pdf", "User PDF.");
    f.skill("home/.agents/skills", "pdf", "Home PDF.");
    f.skill("home/.agents/skills", "docx", "Home DOCX.");
    f.skill("config/clawsmith/skills", "docx", "User DOCX.");
    f.skill("ws/.claude/skills", "xlsx", "Claude XLSX.");
    let set = found(&f, &SkillsConfig::default(), &[]);
    let winner = set.get("pdf").unwrap();
    assert_eq!(winner.source, "workspace:.clawsmith/skills");
    assert_eq!(winner.meta.as_ref().unwrap().description, "Workspace PDF.");
    for loser in [
        "workspace:.agents",
        "workspace:.claude",
        "config/clawsmith",
        "home/.agents",
    ] {
        assert_eq!(
            status_of(&set, "pdf", loser),
            &SkillStatus::Shadowed {
                by: "workspace:.clawsmith/skills".into()
            },
            "{loser}"
        );
    }
    // The user's config folder comes before ~/.agents.
    assert!(
        set.get("docx")
            .unwrap()
            .source
            .contains("config/clawsmith/skills")
    );
    assert!(matches!(
        status_of(&set, "docx", "home/.agents"),
        SkillStatus::Shadowed { by } if by.contains("config/clawsmith")
    ));
    let names: Vec<&str> = set.loaded().map(|skill| skill.name.as_str()).collect();
    assert_eq!(names, ["pdf", "xlsx", "docx"]);
}

#[test]
fn an_invalid_skill_does_not_shadow_a_valid_one() {
    let f = Fixture::new();
    f.write("ws/.clawsmith/skills/pdf/SKILL.md", "---\nname: pdf\n---\n");
    f.skill("config/clawsmith/skills", "pdf", "User PDF.");
    let set = found(&f, &SkillsConfig::default(), &[]);
    assert!(matches!(
        status_of(&set, "pdf", "workspace"),
        SkillStatus::Invalid { .. }
    ));
    assert!(set.get("pdf").unwrap().source.starts_with("user:"));
}

#[test]
fn disabled_extra_dirs_and_plugin_roots() {
    let f = Fixture::new();
    f.skill("ws/.agents/skills", "pdf", "PDF.");
    f.skill("home/more", "extra", "From an extra dir.");
    f.skill("ws/docs/skills", "local", "Relative extra dir.");
    f.skill("plugin/skills", "pdf", "Plugin PDF.");
    let config = SkillsConfig::from_toml_str(
        "[skills]\nextra_dirs = [\"~/more\", \"docs/skills\"]\ndisabled = [\"pdf\"]\n",
    )
    .unwrap();
    let plugin = SkillRoot {
        dir: f.path("plugin/skills"),
        source: "plugin:tools".into(),
        prefix: Some("tools".into()),
    };
    let set = found(&f, &config, &[plugin]);
    assert_eq!(status_of(&set, "pdf", "workspace"), &SkillStatus::Disabled);
    assert!(set.get("pdf").is_none());
    assert!(set.get("extra").unwrap().source.starts_with("extra:"));
    assert!(set.get("local").is_some());
    // A plugin's skill is `<plugin>:<skill>`: it neither shadows nor is shadowed by `pdf`.
    let plugin_skill = set.get("tools:pdf").unwrap();
    assert_eq!(plugin_skill.source, "plugin:tools");
    assert_eq!(plugin_skill.meta.as_ref().unwrap().name, "pdf");
}

#[test]
fn roots_and_folders_leading_out_of_the_workspace_are_refused() {
    let f = Fixture::new();
    f.skill("outside/skills", "evil", "Outside.");
    std::fs::create_dir_all(f.path("ws/.agents")).unwrap();
    symlink(f.path("outside/skills"), f.path("ws/.agents/skills"));
    std::fs::create_dir_all(f.path("ws/.clawsmith/skills")).unwrap();
    symlink(
        f.path("outside/skills/evil"),
        f.path("ws/.clawsmith/skills/evil"),
    );
    // A skill folder symlinked inside the workspace is fine.
    f.skill("ws/shared", "inner", "Inner.");
    symlink(
        f.path("ws/shared/inner"),
        f.path("ws/.clawsmith/skills/inner"),
    );
    // The user's own folders may point anywhere.
    std::fs::create_dir_all(f.path("config/clawsmith/skills")).unwrap();
    symlink(
        f.path("outside/skills/evil"),
        f.path("config/clawsmith/skills/evil"),
    );
    let set = found(&f, &SkillsConfig::default(), &[]);
    assert!(
        set.problems
            .iter()
            .any(|problem| problem.contains(".agents/skills")
                && problem.contains("outside the workspace")),
        "{:?}",
        set.problems
    );
    assert!(matches!(
        status_of(&set, "evil", "workspace:.clawsmith"),
        SkillStatus::Invalid { reason } if reason.contains("outside the workspace")
    ));
    assert!(set.get("inner").is_some());
    assert!(set.get("evil").unwrap().source.starts_with("user:"));
}

fn view_tool(f: &Fixture, budget: usize) -> SkillViewTool {
    let set = found(f, &SkillsConfig::default(), &[]);
    SkillViewTool::new(Arc::new(set), budget)
}

#[test]
fn the_catalog_fits_its_budget_and_says_what_it_cut() {
    let f = Fixture::new();
    let long = "Use this skill for a task of some kind. ".repeat(25);
    for index in 0..30 {
        f.skill(
            "ws/.clawsmith/skills",
            &format!("skill-{index:02}"),
            long.trim(),
        );
    }
    // (budget, shortened, omitted)
    let table = [(100_000, 0, 0), (8_000, 30, 0), (1_000, 13, 17)];
    for (budget, shortened, omitted) in table {
        let tool = view_tool(&f, budget);
        let catalog = tool.catalog();
        assert_eq!(
            (catalog.shortened, catalog.omitted),
            (shortened, omitted),
            "{budget}"
        );
        assert!(catalog.lines.chars().count() <= budget);
        let description = tool.description();
        assert!(description.contains("- skill-00: Use this skill"));
        if shortened + omitted > 0 {
            assert!(
                description.contains(&format!(
                    "{shortened} description(s) shortened, {omitted} skill(s) omitted"
                )),
                "{description}"
            );
        } else {
            assert!(!description.contains("shortened"));
        }
    }
}

#[tokio::test]
async fn skill_view_returns_the_body_and_the_listing() {
    let f = Fixture::new();
    f.write(
        "ws/.clawsmith/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Fill PDF forms.\nallowed-tools: Bash\n---\n\n# PDF\nRead reference/forms.md first.\n",
    );
    f.write(
        "ws/.clawsmith/skills/pdf/reference/forms.md",
        "# Forms\nUse fields.\n",
    );
    f.write(
        "ws/.clawsmith/skills/pdf/scripts/fill.py",
        "print('fill')\n",
    );
    let tool = view_tool(&f, 8_000);
    assert!(tool.description().contains("- pdf: Fill PDF forms.\n"));
    let result = call(&tool, json!({"name": "pdf"})).await;
    assert_eq!(result.status(), ToolStatus::Success, "{}", result.content);
    assert!(
        result
            .content
            .starts_with("# PDF\nRead reference/forms.md first.\n")
    );
    assert!(
        !result.content.contains("description:"),
        "{}",
        result.content
    );
    assert!(result.content.contains("(3 total)"));
    for file in ["SKILL.md\n", "reference/forms.md\n", "scripts/fill.py\n"] {
        assert!(
            result.content.contains(file),
            "{file} in {}",
            result.content
        );
    }
    let file = call(&tool, json!({"name": "pdf", "path": "reference/forms.md"})).await;
    assert_eq!(file.status(), ToolStatus::Success);
    assert_eq!(file.content, "# Forms\nUse fields.\n");
    // SKILL.md is read again at each view: an edit shows at once.
    f.write(
        "ws/.clawsmith/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Fill PDF forms.\n---\nNew text.\n",
    );
    let again = call(&tool, json!({"name": "pdf"})).await;
    assert!(
        again.content.starts_with("New text.\n"),
        "{}",
        again.content
    );
}

#[tokio::test]
async fn skill_view_refuses_escapes_binaries_and_unknown_names() {
    let f = Fixture::new();
    f.skill("ws/.clawsmith/skills", "pdf", "PDF.");
    f.skill("ws/.clawsmith/skills", "docx", "DOCX.");
    f.write("ws/secret.txt", "secret\n");
    f.write("outside.txt", "outside\n");
    symlink(
        f.path("outside.txt"),
        f.path("ws/.clawsmith/skills/pdf/out-link"),
    );
    symlink(
        f.path("ws/secret.txt"),
        f.path("ws/.clawsmith/skills/pdf/ws-link"),
    );
    f.write("ws/.clawsmith/skills/pdf/inner.md", "inner\n");
    symlink("inner.md", f.path("ws/.clawsmith/skills/pdf/inner-link"));
    f.write(
        "ws/.clawsmith/skills/pdf/image.png",
        b"\x89PNG\r\n\x1a\n\0\0\0",
    );
    f.write("ws/.clawsmith/skills/pdf/big.md", "x".repeat(150_000));
    let tool = view_tool(&f, 8_000);
    let absolute = f.path("ws/.clawsmith/skills/pdf/SKILL.md");
    // (path, code, part of the content)
    let cases: Vec<(String, Option<&str>, &str)> = vec![
        (
            "../docx/SKILL.md".into(),
            Some("tool_failed"),
            "outside the skill folder",
        ),
        (
            "../../../secret.txt".into(),
            Some("tool_failed"),
            "outside the skill folder",
        ),
        (
            "/etc/passwd".into(),
            Some("tool_failed"),
            "outside the skill folder",
        ),
        (
            absolute.display().to_string(),
            Some("tool_failed"),
            "outside the skill folder",
        ),
        (
            "out-link".into(),
            Some("tool_failed"),
            "outside the skill folder",
        ),
        (
            "ws-link".into(),
            Some("tool_failed"),
            "outside the skill folder",
        ),
        ("image.png".into(), Some("tool_failed"), "binary file"),
        ("missing.md".into(), Some("tool_failed"), "File not found"),
        (
            "reference/".into(),
            Some("invalid_arguments"),
            "names a folder",
        ),
        ("inner-link".into(), None, "inner\n"),
    ];
    for (path, expected, part) in cases {
        let result = call(&tool, json!({"name": "pdf", "path": path})).await;
        assert_eq!(
            code(&result).as_deref(),
            expected,
            "{path}: {}",
            result.content
        );
        assert!(result.content.contains(part), "{path}: {}", result.content);
        assert!(!result.content.contains("secret\n") && !result.content.contains("outside\n"));
    }
    let big = call(&tool, json!({"name": "pdf", "path": "big.md"})).await;
    assert_eq!(big.status(), ToolStatus::Success);
    assert!(big.content.starts_with(&"x".repeat(100_000)));
    assert!(big.content.contains("[truncated: the file is 150000 bytes"));
    let unknown = call(&tool, json!({"name": "nope"})).await;
    assert_eq!(code(&unknown).as_deref(), Some("invalid_arguments"));
    assert!(
        unknown
            .content
            .contains("Unknown skill: nope. Available skills: pdf, docx")
            || unknown
                .content
                .contains("Unknown skill: nope. Available skills: docx, pdf"),
        "{}",
        unknown.content
    );
}
