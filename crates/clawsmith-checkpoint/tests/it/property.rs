//! Property: random turns of random file operations, undone in reverse order (one by one, or
//! all at once from the first turn), give back the exact tree before each turn.

use clawsmith_checkpoint::{TurnOpening, UndoOutcome, UndoScope};
use proptest::prelude::*;

use crate::support::Fixture;

const PATHS: &[&str] = &["a.txt", "b.txt", "dir/c.txt", "dir/deep/d.bin"];
const MODES: &[u32] = &[0o644, 0o755, 0o600];

#[derive(Debug, Clone)]
enum Op {
    Put { path: usize, content: Vec<u8> },
    Delete { path: usize },
    Rename { from: usize, to: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0..PATHS.len(),
            proptest::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(path, content)| Op::Put { path, content }),
        (0..PATHS.len()).prop_map(|path| Op::Delete { path }),
        (0..PATHS.len(), 0..PATHS.len()).prop_map(|(from, to)| Op::Rename { from, to }),
    ]
}

fn exists(fixture: &Fixture, path: &str) -> bool {
    fixture.root().join(path).is_file()
}

/// Applies `op` the way the fs tools would, skipping operations a tool would refuse.
fn apply(fixture: &Fixture, turn: &str, op: &Op) {
    match op {
        Op::Put { path, content } => fixture.put(turn, PATHS[*path], content),
        Op::Delete { path } if exists(fixture, PATHS[*path]) => fixture.delete(turn, PATHS[*path]),
        Op::Rename { from, to }
            if from != to && exists(fixture, PATHS[*from]) && !exists(fixture, PATHS[*to]) =>
        {
            fixture.rename(turn, PATHS[*from], PATHS[*to]);
        }
        _ => {}
    }
}

fn run(
    initial: &[(usize, Vec<u8>, usize)],
    turns: &[Vec<Op>],
    all_at_once: bool,
) -> Result<(), TestCaseError> {
    let fixture = Fixture::new();
    for (path, content, mode) in initial {
        fixture.write_initial(PATHS[*path], content, MODES[*mode]);
    }
    let mut trees = Vec::new();
    for (index, ops) in turns.iter().enumerate() {
        trees.push(fixture.tree());
        let turn = format!("t{index}");
        fixture
            .store
            .begin_turn("s", &turn, TurnOpening::default())
            .unwrap();
        for op in ops {
            apply(&fixture, &turn, op);
        }
        fixture.finish(&turn);
    }
    if all_at_once {
        let report = fixture
            .store
            .undo("s", "t0", UndoScope::Files, &fixture.workspace)
            .unwrap();
        prop_assert_eq!(report.outcome, UndoOutcome::Undone);
        prop_assert_eq!(fixture.tree(), trees[0].clone());
    } else {
        for index in (0..turns.len()).rev() {
            let report = fixture
                .store
                .undo(
                    "s",
                    &format!("t{index}"),
                    UndoScope::Files,
                    &fixture.workspace,
                )
                .unwrap();
            prop_assert_eq!(report.outcome, UndoOutcome::Undone);
            prop_assert_eq!(
                fixture.tree(),
                trees[index].clone(),
                "after undoing t{}",
                index
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn undo_in_reverse_returns_the_exact_initial_tree(
        initial in proptest::collection::vec((0..PATHS.len(), proptest::collection::vec(any::<u8>(), 0..30), 0..MODES.len()), 0..4),
        turns in proptest::collection::vec(proptest::collection::vec(op(), 1..6), 1..5),
        all_at_once in any::<bool>(),
    ) {
        run(&initial, &turns, all_at_once)?;
    }
}
