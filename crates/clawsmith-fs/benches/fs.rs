//! Per-call cost of the file tools on a generated 20,000-file tree, and `read_file` against a bare
//! `std::fs::read` of the same file. The side-by-side with `rg` lives in `cargo xtask bench`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use clawsmith_fs::{NoopRecorder, Workspace, builtin_tools};
use clawsmith_protocol::{Tool, ToolExecutionContext, ToolOutput};
use serde_json::{Value, json};

fn main() {
    divan::main();
}

struct Tree {
    _temp: tempfile::TempDir,
    root: PathBuf,
    tools: Vec<Arc<dyn Tool>>,
}

/// 200 folders × 100 files of ~2 KiB source-like text; one file in 500 holds `needle_marker`.
static TREE: LazyLock<Tree> = LazyLock::new(|| {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().canonicalize().unwrap();
    let line = "fn example(value: usize) -> usize { value.wrapping_mul(31).rotate_left(7) }\n";
    let body = line.repeat(28);
    for dir in 0..200 {
        let folder = root.join(format!("module_{dir:03}"));
        std::fs::create_dir(&folder).unwrap();
        for file in 0..100 {
            let index = dir * 100 + file;
            let mut content = body.clone();
            if index % 500 == 0 {
                content.push_str("// needle_marker\n");
            }
            std::fs::write(folder.join(format!("file_{file:03}.rs")), content).unwrap();
        }
    }
    std::fs::write(root.join("large.txt"), line.repeat(1_200)).unwrap();
    let workspace = Arc::new(Workspace::open(&root).unwrap());
    let tools = builtin_tools(workspace, Arc::new(NoopRecorder));
    Tree {
        _temp: temp,
        root,
        tools,
    }
});

fn call(name: &str, input: Value) -> String {
    let tool = TREE.tools.iter().find(|tool| tool.name() == name).unwrap();
    let future = tool.execute(input, ToolExecutionContext::new("s", "t", "c"));
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(ToolOutput::Result(result)) => result.content,
        _ => panic!("file tools complete in one poll"),
    }
}

#[divan::bench(sample_count = 20)]
fn search_literal_20k_tree() -> String {
    call("search_files", json!({"query": "needle_marker"}))
}

#[divan::bench(sample_count = 20)]
fn search_regex_20k_tree() -> String {
    call(
        "search_files",
        json!({"query": "needle_[a-z]+", "regex": true, "caseSensitive": true}),
    )
}

#[divan::bench(sample_count = 20)]
fn glob_20k_tree() -> String {
    call("glob_files", json!({"pattern": "module_1*/**/file_00?.rs"}))
}

#[divan::bench]
fn read_file_tool_90kb() -> String {
    call("read_file", json!({"path": "large.txt"}))
}

#[divan::bench]
fn read_std_fs_90kb() -> Vec<u8> {
    std::fs::read(TREE.root.join("large.txt")).unwrap()
}
