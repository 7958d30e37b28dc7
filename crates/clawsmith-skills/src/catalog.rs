//! The catalog: one line per loaded skill (`- name: description`) for `skill_view`'s
//! description, within a character budget.
//!
//! When every line fits, nothing is cut. Otherwise descriptions are shortened first, all to the
//! same longest length that fits (never below [`MIN_DESCRIPTION_CHARS`]); when even that is too
//! long, skills are left out from the end of the discovery order (workspace skills come first,
//! so they are the last to go). The counts of both are said after the list.

use crate::discovery::Skill;

/// Descriptions are never shortened below this many characters; past that, skills are omitted.
pub const MIN_DESCRIPTION_CHARS: usize = 60;

/// The catalog text and what it had to leave out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// The lines, each ending with a newline; at most the budget in characters.
    pub lines: String,
    /// How many skills are listed.
    pub listed: usize,
    /// How many descriptions were shortened.
    pub shortened: usize,
    /// How many skills were left out.
    pub omitted: usize,
}

/// The catalog of `skills` (name and description each) within `budget` characters.
pub fn build_catalog<'a>(skills: impl IntoIterator<Item = &'a Skill>, budget: usize) -> Catalog {
    let entries: Vec<(String, String)> = skills
        .into_iter()
        .filter_map(|skill| {
            let meta = skill.meta.as_ref()?;
            // One line per skill: the description's own line breaks become spaces.
            let description = meta
                .description
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            Some((skill.name.clone(), description))
        })
        .collect();
    catalog_of(&entries, budget)
}

/// The line of one skill with its description cut to `cap` characters (`…` marks a cut).
fn line(name: &str, description: &str, cap: usize) -> (String, bool) {
    if description.chars().count() <= cap {
        return (format!("- {name}: {description}\n"), false);
    }
    let kept: String = description.chars().take(cap.saturating_sub(1)).collect();
    (format!("- {name}: {}…\n", kept.trim_end()), true)
}

fn size(text: &str) -> usize {
    text.chars().count()
}

fn total(entries: &[(String, String)], cap: usize) -> usize {
    entries
        .iter()
        .map(|(name, description)| size(&line(name, description, cap).0))
        .sum()
}

fn catalog_of(entries: &[(String, String)], budget: usize) -> Catalog {
    let longest = entries
        .iter()
        .map(|(_, description)| description.chars().count())
        .max()
        .unwrap_or(0);
    // The largest cap that fits, if any cap down to the minimum does (total grows with cap).
    let cap = if total(entries, longest) <= budget {
        Some(longest)
    } else if total(entries, MIN_DESCRIPTION_CHARS) > budget {
        None
    } else {
        let (mut low, mut high) = (MIN_DESCRIPTION_CHARS, longest);
        while low < high {
            let middle = low + (high - low).div_ceil(2);
            if total(entries, middle) <= budget {
                low = middle;
            } else {
                high = middle - 1;
            }
        }
        Some(low)
    };
    let cap = cap.unwrap_or(MIN_DESCRIPTION_CHARS);
    let mut catalog = Catalog {
        lines: String::new(),
        listed: 0,
        shortened: 0,
        omitted: 0,
    };
    let mut used = 0;
    for (index, (name, description)) in entries.iter().enumerate() {
        let (text, cut) = line(name, description, cap);
        let length = size(&text);
        if used + length > budget {
            catalog.omitted = entries.len() - index;
            break;
        }
        used += length;
        catalog.lines.push_str(&text);
        catalog.listed += 1;
        catalog.shortened += usize::from(cut);
    }
    catalog
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(count: usize, description_chars: usize) -> Vec<(String, String)> {
        (0..count)
            .map(|index| (format!("skill-{index:02}"), "d".repeat(description_chars)))
            .collect()
    }

    #[test]
    fn budget_cases() {
        // (skills, description length, budget, listed, shortened, omitted)
        let table = [
            (3, 50, 8_000, 3, 0, 0),
            (0, 0, 8_000, 0, 0, 0),
            // 10 lines of 2 + 8 + 2 + 1000 + 1 = 1013 characters: too long; shortened to fit.
            (10, 1_000, 8_000, 10, 10, 0),
            // Even at 60 characters 200 lines (73 each) do not fit in 8,000: 109 are listed.
            (200, 1_000, 8_000, 109, 109, 91),
            (200, 10, 8_000, 200, 0, 0),
            (5, 100, 10, 0, 0, 5),
        ];
        for (count, length, budget, listed, shortened, omitted) in table {
            let catalog = catalog_of(&entries(count, length), budget);
            assert!(size(&catalog.lines) <= budget, "{count} {length} {budget}");
            assert_eq!(
                (catalog.listed, catalog.shortened, catalog.omitted),
                (listed, shortened, omitted),
                "{count} {length} {budget}"
            );
        }
    }

    #[test]
    fn shortening_keeps_short_descriptions_whole() {
        let mut list = entries(4, 3_000);
        list.push(("tiny".into(), "short one".into()));
        let catalog = catalog_of(&list, 8_000);
        assert_eq!((catalog.shortened, catalog.omitted), (4, 0));
        assert!(catalog.lines.contains("- tiny: short one\n"));
        assert!(catalog.lines.contains("…\n"));
    }
}
