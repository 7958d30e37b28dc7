//! The workspace's hidden paths hold in `memory_search` and `skill_view`, whatever name leads
//! to a hidden file: a memory file or a skill file that is a link to `.env` is never read.

use std::sync::Arc;

use clawsmith_checkpoint::MemoryScope;
use clawsmith_fs::HiddenPaths;
use clawsmith_protocol::Tool;
use clawsmith_skills::{
    Memory, MemoryConfig, SkillStatus, SkillViewTool, SkillsConfig, workspace_skills,
};
use serde_json::json;

use crate::{Fixture, call, symlink};

const SECRET: &str = "s3cr3tvalue";

fn hidden(f: &Fixture) -> Arc<HiddenPaths> {
    Arc::new(HiddenPaths::new(f.ws(), [".env", "secrets/**"]).unwrap())
}

#[test]
fn memory_files_leading_to_hidden_files_are_skipped() {
    // (how a memory file reaches the secret)
    type Setup = fn(&Fixture);
    let table: &[(&str, Setup)] = &[
        ("AGENTS.md -> .env", |f| {
            symlink(".env", f.ws().join("AGENTS.md"));
        }),
        ("CLAUDE.md hard link of .env", |f| {
            std::fs::hard_link(f.ws().join(".env"), f.ws().join("CLAUDE.md")).unwrap();
        }),
        ("memory folder file -> secrets/key", |f| {
            std::fs::create_dir_all(f.ws().join(".clawsmith/memory")).unwrap();
            symlink("../../secrets/key", f.ws().join(".clawsmith/memory/key.md"));
        }),
        ("memory folder is a link to secrets", |f| {
            std::fs::remove_dir_all(f.ws().join(".clawsmith/memory")).unwrap();
            symlink("../secrets", f.ws().join(".clawsmith/memory"));
        }),
        ("GEMINI.md hard link of a file in secrets", |f| {
            std::fs::hard_link(f.ws().join("secrets/key"), f.ws().join("GEMINI.md")).unwrap();
        }),
    ];
    for (case, setup) in table {
        let f = Fixture::new();
        f.write("ws/.env", format!("# Env\nTOKEN={SECRET}\n"));
        f.write("ws/secrets/key", format!("# Key\n{SECRET}\n"));
        f.write(
            "ws/.clawsmith/memory/ok.md",
            "# Ok\nordinary note about tokens\n",
        );
        setup(&f);
        let memory = Memory::new(MemoryConfig {
            workspace: Some(f.ws()),
            dirs: f.dirs(),
            index_path: f.path("state/memory.db"),
            hidden: Some(hidden(&f)),
        });
        let outcome = memory
            .search(SECRET, 10, &[MemoryScope::Workspace])
            .unwrap();
        assert!(outcome.hits.is_empty(), "{case}: {:?}", outcome.hits);
        assert!(
            outcome.notes.iter().all(|note| !note.contains(SECRET)),
            "{case}: {:?}",
            outcome.notes
        );
        let ordinary = memory
            .search("tokens", 10, &[MemoryScope::Workspace])
            .unwrap();
        if *case != "memory folder is a link to secrets" {
            assert_eq!(ordinary.hits.len(), 1, "{case}: {:?}", ordinary.hits);
        }
    }
}

#[tokio::test]
async fn skill_files_leading_to_hidden_files_are_refused() {
    let f = Fixture::new();
    f.write("ws/.env", format!("TOKEN={SECRET}\n"));
    f.skill("ws/.clawsmith/skills", "deploy", "Deploys things");
    symlink(
        "../../../.env",
        f.ws().join(".clawsmith/skills/deploy/env.md"),
    );
    std::fs::hard_link(
        f.ws().join(".env"),
        f.ws().join(".clawsmith/skills/deploy/hard.md"),
    )
    .unwrap();
    f.write("ws/.clawsmith/skills/leak/x", "");
    std::fs::hard_link(
        f.ws().join(".env"),
        f.ws().join(".clawsmith/skills/leak/SKILL.md"),
    )
    .unwrap();
    let set = workspace_skills(
        &f.ws(),
        &f.dirs(),
        &SkillsConfig::default(),
        &[],
        Some(&hidden(&f)),
    );
    let leak = set
        .skills
        .iter()
        .find(|skill| skill.name == "leak")
        .unwrap();
    assert!(
        matches!(&leak.status, SkillStatus::Invalid { reason } if reason.contains("is hidden") && !reason.contains(SECRET)),
        "{:?}",
        leak.status
    );
    let tool = SkillViewTool::new(Arc::new(set), 8_000);
    // (path inside the skill, what the answer says)
    let table = [
        // A symlink leaving the skill's folder is refused before the hidden set is asked.
        ("env.md", "Path is outside the skill folder of deploy"),
        ("hard.md", "is hidden (hidden_paths entry `.env`)"),
        ("SKILL.md", "Do the deploy thing"),
    ];
    for (path, expected) in table {
        let result = call(&tool as &dyn Tool, json!({"name": "deploy", "path": path})).await;
        assert!(
            !result.content.contains(SECRET),
            "{path}: {}",
            result.content
        );
        assert!(
            result.content.contains(expected),
            "{path}: {}",
            result.content
        );
    }
}
