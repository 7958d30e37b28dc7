//! The README's first command, `bash examples/demo.sh`, run against the built binary: a real
//! turn on a copy of the example workspace, the undo listing and diff, and an undo that must
//! give the workspace back byte for byte (the script itself compares the trees and fails
//! otherwise). It once broke unnoticed when an output format changed; now CI runs it.

use std::process::Command;

#[test]
fn the_readme_demo_runs_and_undoes_its_turn() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new("bash")
        .arg(root.join("examples/demo.sh"))
        .env("CLAWSMITH_BIN", env!("CARGO_BIN_EXE_clawsmith"))
        .env_remove("CLAWSMITH_STATE_DIR")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "demo failed: {:?}\n{stdout}\n{stderr}",
        output.status
    );
    for expected in [
        "== clawsmith turn",
        // The reads and the search ran as one parallel batch, and the timeline says so.
        "⇉ 3 calls in parallel (batch 1)",
        "== clawsmith undo list",
        "== clawsmith undo diff",
        "== clawsmith undo all",
        "workspace is back to its original state",
    ] {
        assert!(stdout.contains(expected), "{expected:?} missing:\n{stdout}");
    }
    // The turn did real work: an edit shows in the undo diff, a command ran.
    assert!(stdout.contains("greet.py"), "{stdout}");
}
