//! Diffs on demand (K4).

use clawsmith_checkpoint::{ChangeKind, DIFF_SIDE_MAX_BYTES, DiffSide, TurnOpening};

use crate::support::Fixture;

fn text(side: &DiffSide) -> (&str, bool) {
    match side {
        DiffSide::Text {
            text, truncated, ..
        } => (text.as_str(), *truncated),
        other => panic!("expected text, got {other:?}"),
    }
}

#[test]
fn diff_of_an_edit_has_both_sides_and_a_unified_diff() {
    let fixture = Fixture::new();
    fixture.write_initial("a.txt", b"one\ntwo\nthree\n", 0o644);
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.edit("t1", "a.txt", b"one\nTWO\nthree\n");
    fixture.finish("t1");
    let diff = fixture.store.diff("s", "t1", "a.txt").unwrap().unwrap();
    assert_eq!(diff.kind, ChangeKind::Modified);
    assert_eq!(text(&diff.before), ("one\ntwo\nthree\n", false));
    assert_eq!(text(&diff.after), ("one\nTWO\nthree\n", false));
    assert!(
        diff.unified.starts_with("--- a/a.txt\n+++ b/a.txt\n"),
        "{}",
        diff.unified
    );
    assert!(diff.unified.contains("-two\n+TWO\n"), "{}", diff.unified);
    assert!(!diff.unified_truncated);
}

#[test]
fn created_deleted_binary_and_untouched_paths() {
    let fixture = Fixture::new();
    fixture.write_initial("old.txt", b"bye\n", 0o644);
    fixture.write_initial("blob.bin", &[0, 159, 146, 150], 0o644);
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.create("t1", "new.txt", b"hi\n");
    fixture.delete("t1", "old.txt");
    fixture.edit("t1", "blob.bin", &[1, 2, 0, 3]);
    fixture.finish("t1");
    let created = fixture.store.diff("s", "t1", "new.txt").unwrap().unwrap();
    assert_eq!(
        (created.kind, &created.before),
        (ChangeKind::Added, &DiffSide::Absent)
    );
    assert!(created.unified.contains("+hi"));
    let deleted = fixture.store.diff("s", "t1", "old.txt").unwrap().unwrap();
    assert_eq!(
        (deleted.kind, &deleted.after),
        (ChangeKind::Deleted, &DiffSide::Absent)
    );
    let binary = fixture.store.diff("s", "t1", "blob.bin").unwrap().unwrap();
    assert_eq!(binary.before, DiffSide::Binary { total_bytes: 4 });
    assert!(binary.unified.is_empty());
    assert_eq!(
        fixture.store.diff("s", "t1", "untouched.txt").unwrap(),
        None
    );
    assert!(fixture.store.diff("s", "nope", "new.txt").is_err());
}

#[test]
fn large_sides_are_truncated_with_a_note() {
    let fixture = Fixture::new();
    let big: String = (0..20_000).map(|i| format!("line é {i}\n")).collect();
    assert!(big.len() > 2 * DIFF_SIDE_MAX_BYTES);
    fixture.write_initial("big.txt", big.as_bytes(), 0o644);
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.edit("t1", "big.txt", big.replace("line", "LINE").as_bytes());
    fixture.finish("t1");
    let diff = fixture.store.diff("s", "t1", "big.txt").unwrap().unwrap();
    let DiffSide::Text {
        text,
        truncated,
        total_bytes,
    } = &diff.before
    else {
        panic!()
    };
    assert!(*truncated && text.len() <= DIFF_SIDE_MAX_BYTES && big.starts_with(text.as_str()));
    assert_eq!(*total_bytes, big.len() as u64);
    assert!(diff.unified_truncated && diff.unified.ends_with("diff truncated"));
}

#[test]
fn after_text_is_unavailable_when_the_file_changed_before_finish() {
    let fixture = Fixture::new();
    fixture
        .store
        .begin_turn("s", "t1", TurnOpening::default())
        .unwrap();
    fixture.create("t1", "a.txt", b"agent\n");
    fixture.write_initial("a.txt", b"user raced\n", 0o644);
    let manifest = fixture.finish("t1");
    assert_eq!(
        manifest.files[0].lines_added, None,
        "stats need the post content"
    );
    let diff = fixture.store.diff("s", "t1", "a.txt").unwrap().unwrap();
    assert!(
        matches!(diff.after, DiffSide::Unavailable { .. }),
        "{:?}",
        diff.after
    );
}
