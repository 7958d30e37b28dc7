//! The output layer for people: colour, glyphs, tables, times and sizes, in one place.
//!
//! Text for people is written with styles ([`anstyle`]) into [`anstream`] streams, which strip
//! them unless colour is on: `--color always`, or `--color auto` (the default) on a terminal
//! without `NO_COLOR` (and with `CLICOLOR_FORCE` honoured). So a formatter never asks whether
//! colour is on; it styles, and the stream decides. JSON never goes through here.
//!
//! Times are the reader's local time ([`jiff`]; `TZ` is honoured), relative when recent
//! (`5 min ago`), and always with the zone said, since a bare `02:51` is ambiguous on a server.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use clawsmith_protocol::ToolStatus;
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorArg {
    /// Colour on a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always colour (also through pipes).
    Always,
    /// Never colour.
    Never,
}

/// Applies `--color` to every stream of the process; call once, before printing.
pub fn init_color(choice: ColorArg) {
    let choice = match choice {
        ColorArg::Auto => anstream::ColorChoice::Auto,
        ColorArg::Always => anstream::ColorChoice::Always,
        ColorArg::Never => anstream::ColorChoice::Never,
    };
    choice.write_global();
}

/// The `--color` given in `args` (`--color X` or `--color=X`, the last one wins), before clap
/// parses them: clap's own usage errors and help follow it too. An unknown value is left for
/// clap to refuse.
pub fn color_from_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> ColorArg {
    use clap::ValueEnum;
    let mut chosen = ColorArg::Auto;
    let mut args = args
        .into_iter()
        .map(|arg| arg.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        let value = match arg.strip_prefix("--color") {
            Some("") => args.next(),
            Some(rest) => rest.strip_prefix('=').map(str::to_owned),
            None => None,
        };
        if let Some(parsed) = value.and_then(|value| ColorArg::from_str(&value, false).ok()) {
            chosen = parsed;
        }
    }
    chosen
}

/// The same choice for clap's messages.
pub fn clap_color(choice: ColorArg) -> clap::ColorChoice {
    match choice {
        ColorArg::Auto => clap::ColorChoice::Auto,
        ColorArg::Always => clap::ColorChoice::Always,
        ColorArg::Never => clap::ColorChoice::Never,
    }
}

/// Whether stderr shows colour and live progress: a terminal with colour allowed.
pub fn stderr_is_live() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
        && anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never
}

/// The styles, named by meaning.
pub mod style {
    use super::{AnsiColor, Style};

    /// `error:` and failed things.
    pub const ERROR: Style = AnsiColor::Red.on_default().bold();
    /// `warning:`.
    pub const WARNING: Style = AnsiColor::Yellow.on_default().bold();
    /// `help:`.
    pub const HELP: Style = AnsiColor::Cyan.on_default().bold();
    /// `note:`.
    pub const NOTE: Style = AnsiColor::Green.on_default().bold();
    /// Headings and table headers.
    pub const HEADER: Style = Style::new().bold();
    /// Secondary text: times, counts, gutters.
    pub const DIM: Style = Style::new().dimmed();
    /// Ids a person may copy (turns, sessions).
    pub const ID: Style = AnsiColor::Yellow.on_default();
    /// Tool names.
    pub const TOOL: Style = Style::new().bold();
    /// Added diff lines.
    pub const ADDED: Style = AnsiColor::Green.on_default();
    /// Removed diff lines.
    pub const REMOVED: Style = AnsiColor::Red.on_default();
    /// Diff hunk headers and file names.
    pub const HUNK: Style = AnsiColor::Cyan.on_default();
    /// Paths in search hits.
    pub const PATH: Style = AnsiColor::Magenta.on_default();
}

/// `text` in `style` (the stream strips the style when colour is off).
pub fn paint(style: Style, text: impl std::fmt::Display) -> String {
    format!("{style}{text}{style:#}")
}

/// The style of a status: green success, red error, yellow denied, magenta cancelled, dim
/// unknown.
pub fn status_style(status: ToolStatus) -> Style {
    match status {
        ToolStatus::Success => AnsiColor::Green.on_default(),
        ToolStatus::Error => AnsiColor::Red.on_default(),
        ToolStatus::Denied => AnsiColor::Yellow.on_default(),
        ToolStatus::Cancelled => AnsiColor::Magenta.on_default(),
        ToolStatus::Unknown => Style::new().dimmed(),
    }
}

/// One glyph per status, the same everywhere: `✓` success, `✗` error, `⊘` denied, `–`
/// cancelled, `?` unknown (no start without an end).
pub fn status_glyph(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Success => "✓",
        ToolStatus::Error => "✗",
        ToolStatus::Denied => "⊘",
        ToolStatus::Cancelled => "–",
        ToolStatus::Unknown => "?",
    }
}

/// The glyph of `status`, painted.
pub fn glyph(status: ToolStatus) -> String {
    paint(status_style(status), status_glyph(status))
}

/// Set by `-q`: warnings and notes stay off stderr; errors and their `help:` still print.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes [`notice`] drop warnings and notes (the `-q` flag).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Prints `warning: …`, `note: …` and `help: …` notices on stderr; with `-q` only `help:`.
pub fn notice(level: Level, text: impl std::fmt::Display) {
    use std::io::Write;
    if level != Level::Help && QUIET.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let (style, label) = match level {
        Level::Warning => (style::WARNING, "warning"),
        Level::Note => (style::NOTE, "note"),
        Level::Help => (style::HELP, "help"),
    };
    let mut stderr = anstream::stderr().lock();
    // A closed stderr has nobody to tell.
    let _ = writeln!(stderr, "{}: {text}", paint(style, label));
}

/// The level of a [`notice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something went wrong but the command goes on.
    Warning,
    /// Something a person may want to know.
    Note,
    /// What to do.
    Help,
}

/// The width of `text` on a terminal: one column per character, styles not counted.
pub fn width(text: &str) -> usize {
    let mut columns = 0;
    let mut in_escape = false;
    for character in text.chars() {
        match (in_escape, character) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => columns += 1,
        }
    }
    columns
}

/// `text` padded with spaces to `columns` (styles not counted; never cut).
pub fn pad(text: &str, columns: usize) -> String {
    let mut padded = text.to_owned();
    padded.extend(std::iter::repeat_n(
        ' ',
        columns.saturating_sub(width(text)),
    ));
    padded
}

/// `text` cut to `max` characters with `…` (never inside a character).
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// Rows printed in aligned columns. Every column is as wide as its widest cell, so a long tool
/// name widens its column instead of pushing the rest of its row out of line; the last column
/// is never padded.
#[derive(Debug, Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
    indent: usize,
}

impl Table {
    /// A table with a header row (bold).
    pub fn with_header(headers: &[&str]) -> Table {
        Table {
            rows: vec![
                headers
                    .iter()
                    .map(|header| paint(style::HEADER, header))
                    .collect(),
            ],
            indent: 0,
        }
    }

    /// A table without header.
    pub fn new() -> Table {
        Table::default()
    }

    /// Every row indented by `columns` spaces.
    pub fn indented(mut self, columns: usize) -> Table {
        self.indent = columns;
        self
    }

    /// Adds a row of (possibly styled) cells.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The rows, one line each, `\n`-terminated.
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|column| {
                self.rows
                    .iter()
                    .filter_map(|row| row.get(column))
                    .map(|cell| width(cell))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut text = String::new();
        for row in &self.rows {
            let mut line = " ".repeat(self.indent);
            // Empty cells at the end of a row leave no trailing spaces (or styles).
            let used = row
                .iter()
                .rposition(|cell| width(cell) > 0)
                .map_or(0, |last| last + 1);
            let row = &row[..used];
            for (column, cell) in row.iter().enumerate() {
                if column + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&pad(cell, widths[column]));
                    line.push_str("  ");
                }
            }
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text
    }
}

/// A byte count for people: `10 B`, `1.5 KiB`, `3.2 MiB`.
pub fn bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A duration for people: `3 ms`, `1.2 s`, `2 min 5 s`.
pub fn duration_ms(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
    }
}

/// Now and the reader's time zone: everything a time needs to be shown.
#[derive(Debug, Clone)]
pub struct Clock {
    now_ms: u64,
    zone: TimeZone,
}

impl Clock {
    /// The system clock and time zone (`TZ` when set, else the system's).
    pub fn system() -> Clock {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_millis() as u64)
            .unwrap_or(0);
        Clock {
            now_ms,
            zone: TimeZone::system(),
        }
    }

    /// A fixed clock (tests).
    #[cfg(test)]
    pub fn fixed(now_ms: u64, zone: TimeZone) -> Clock {
        Clock { now_ms, zone }
    }

    fn zoned(&self, ms: u64) -> Option<jiff::Zoned> {
        let stamp = Timestamp::from_millisecond(i64::try_from(ms).ok()?).ok()?;
        Some(stamp.to_zoned(self.zone.clone()))
    }

    /// The zone's name as people know it (`Europe/Paris`, `UTC`), else its abbreviation.
    pub fn zone_name(&self) -> String {
        match self.zone.iana_name() {
            Some(name) => name.to_owned(),
            None => self
                .zoned(self.now_ms)
                .map(|now| now.strftime("%Z").to_string())
                .unwrap_or_else(|| "local time".to_owned()),
        }
    }

    /// `HH:MM:SS` in the zone (the zone is said once, in a heading).
    pub fn clock_time(&self, ms: u64) -> String {
        self.zoned(ms)
            .map(|time| time.strftime("%H:%M:%S").to_string())
            .unwrap_or_else(|| "??:??:??".to_owned())
    }

    /// When `ms` was, for a listing: `just now`, `5 min ago`, `3 h ago` (with the clock time
    /// and zone), or a date and time with the zone.
    pub fn when(&self, ms: u64) -> String {
        let Some(time) = self.zoned(ms) else {
            return "unknown time".to_owned();
        };
        let ago = self.now_ms.saturating_sub(ms) / 1000;
        let clock = time.strftime("%H:%M %Z");
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = match ago {
            _ if ms > self.now_ms + 60_000 => {
                write!(text, "{}", time.strftime("%Y-%m-%d %H:%M %Z"))
            }
            0..45 => write!(text, "just now ({clock})"),
            45..5_400 => write!(text, "{} min ago ({clock})", (ago + 30) / 60),
            5_400..86_400 => write!(text, "{} h ago ({clock})", (ago + 1_800) / 3_600),
            _ => write!(text, "{}", time.strftime("%Y-%m-%d %H:%M %Z")),
        };
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOON: u64 = 1_700_000_000_000; // 2023-11-14 22:13:20 UTC

    #[test]
    fn times_are_local_relative_when_recent_and_say_their_zone() {
        let utc = Clock::fixed(NOON, TimeZone::UTC);
        let table = [
            (NOON - 10_000, "just now (22:13 UTC)"),
            (NOON - 300_000, "5 min ago (22:08 UTC)"),
            (NOON - 3 * 3_600_000, "3 h ago (19:13 UTC)"),
            (NOON - 3 * 86_400_000, "2023-11-11 22:13 UTC"),
            (NOON + 86_400_000, "2023-11-15 22:13 UTC"),
        ];
        for (ms, expected) in table {
            assert_eq!(utc.when(ms), expected, "{ms}");
        }
        let paris = Clock::fixed(NOON, TimeZone::get("Europe/Paris").unwrap());
        assert_eq!(paris.clock_time(NOON), "23:13:20");
        assert_eq!(paris.when(NOON - 3 * 86_400_000), "2023-11-11 23:13 CET");
        assert_eq!(paris.zone_name(), "Europe/Paris");
    }

    #[test]
    fn sizes_and_durations() {
        let table = [(10, "10 B"), (1536, "1.5 KiB"), (5 << 20, "5.0 MiB")];
        for (value, expected) in table {
            assert_eq!(bytes(value), expected);
        }
        let table = [(3, "3 ms"), (1_234, "1.2 s"), (125_000, "2 min 5 s")];
        for (value, expected) in table {
            assert_eq!(duration_ms(value), expected);
        }
    }

    #[test]
    fn tables_align_on_the_widest_cell_and_ignore_styles() {
        let mut table = Table::with_header(&["tool", "risk"]);
        table.row(vec![paint(style::TOOL, "read_file"), "read".into()]);
        table.row(vec![
            "a_very_long_extension_tool_name_from_mcp".into(),
            "execute".into(),
        ]);
        let plain: String = anstream::adapter::strip_str(&table.render()).to_string();
        assert_eq!(
            plain,
            "tool                                      risk\n\
             read_file                                 read\n\
             a_very_long_extension_tool_name_from_mcp  execute\n"
        );
    }

    #[test]
    fn color_is_read_before_clap_parses() {
        // (arguments, choice)
        let table: [(&[&str], ColorArg); 6] = [
            (&["clawsmith", "tools"], ColorArg::Auto),
            (&["clawsmith", "--color", "never", "tools"], ColorArg::Never),
            (&["clawsmith", "tools", "--color=always"], ColorArg::Always),
            (
                &["clawsmith", "--color=never", "--color", "always"],
                ColorArg::Always,
            ),
            (&["clawsmith", "--color", "purple"], ColorArg::Auto),
            (
                &["clawsmith", "call", "--", "--color=never"],
                ColorArg::Auto,
            ),
        ];
        for (args, expected) in table {
            let given = args.iter().map(std::ffi::OsString::from);
            assert_eq!(color_from_args(given), expected, "{args:?}");
        }
    }

    #[test]
    fn clipping_counts_characters() {
        assert_eq!(clip("héllo wörld", 6), "héllo…");
        assert_eq!(clip("short", 6), "short");
    }
}
