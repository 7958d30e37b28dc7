//! Results as the model reads them: `path:line:column`, the source line, bounded lists.

use clawsmith_protocol::truncate_to_boundary;
use lsp_types::{DiagnosticSeverity, DocumentSymbolResponse, Hover, HoverContents, MarkedString};

use crate::position::{self, PositionEncoding};
use crate::server::OpenDocument;

/// Diagnostics shown per file.
pub(crate) const MAX_DIAGNOSTICS: usize = 200;
/// Locations shown per answer.
pub(crate) const MAX_LOCATIONS: usize = 200;
/// Symbols shown per answer.
pub(crate) const MAX_SYMBOLS: usize = 500;
/// Bytes of hover text shown.
pub(crate) const MAX_HOVER_BYTES: usize = 8 * 1024;
/// Characters of a source line shown.
const MAX_SOURCE_LINE_CHARS: usize = 200;

/// A location ready to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Located {
    /// `path:line:column` (workspace-relative), or an absolute path outside the workspace.
    pub(crate) label: String,
    /// The source line, trimmed (workspace files only).
    pub(crate) source: Option<String>,
    /// Outside the workspace (e.g. a standard library).
    pub(crate) outside: bool,
}

/// A workspace symbol ready to show.
#[derive(Debug, Clone)]
pub(crate) struct WorkspaceSymbol {
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) container: String,
    pub(crate) place: Option<Located>,
}

fn short(line: &str) -> String {
    let mut shown: String = line.chars().take(MAX_SOURCE_LINE_CHARS).collect();
    if shown.len() < line.len() {
        shown.push('…');
    }
    shown
}

fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        format!("1 {word}")
    } else {
        format!("{count} {word}s")
    }
}

/// `lsp_types` kinds print their constant names (`Function`); shown in lower case.
pub(crate) fn kind_name(kind: lsp_types::SymbolKind) -> String {
    format!("{kind:?}").to_lowercase().replace('_', " ")
}

pub(crate) fn diagnostics(
    path: &str,
    document: &OpenDocument,
    mut items: Vec<lsp_types::Diagnostic>,
    encoding: PositionEncoding,
    server: &str,
) -> String {
    items.sort_by_key(|d| (d.range.start.line, d.range.start.character));
    let lines = position::lines(&document.text);
    let mut out = format!(
        "{path}: {} (version {} as on disk, from {server})",
        plural(items.len(), "diagnostic"),
        document.version
    );
    if items.is_empty() {
        out.push_str("; no errors or warnings");
    }
    for item in items.iter().take(MAX_DIAGNOSTICS) {
        let (line, column) = position::from_lsp(&document.text, item.range.start, encoding);
        let severity = match item.severity {
            Some(DiagnosticSeverity::ERROR) => "error",
            Some(DiagnosticSeverity::WARNING) => "warning",
            Some(DiagnosticSeverity::INFORMATION) => "info",
            Some(DiagnosticSeverity::HINT) => "hint",
            _ => "diagnostic",
        };
        let mut tags = Vec::new();
        if let Some(source) = &item.source {
            tags.push(source.clone());
        }
        if let Some(code) = &item.code {
            tags.push(match code {
                lsp_types::NumberOrString::Number(n) => n.to_string(),
                lsp_types::NumberOrString::String(s) => s.clone(),
            });
        }
        let tags = if tags.is_empty() {
            String::new()
        } else {
            format!(" [{}]", tags.join(" "))
        };
        let message = item.message.replace('\n', " ");
        out.push_str(&format!(
            "\n{path}:{line}:{column}: {severity}: {message}{tags}"
        ));
        if let Some(source) = lines.get(item.range.start.line as usize) {
            out.push_str(&format!("\n    {}", short(source.trim())));
        }
    }
    if items.len() > MAX_DIAGNOSTICS {
        out.push_str(&format!(
            "\n… {} more not shown",
            items.len() - MAX_DIAGNOSTICS
        ));
    }
    out
}

pub(crate) fn locations(what: &str, locations: &[Located]) -> String {
    if locations.is_empty() {
        return format!("no {what} found");
    }
    let mut out = plural(locations.len(), what);
    for location in locations.iter().take(MAX_LOCATIONS) {
        push_location(&mut out, location);
    }
    if locations.len() > MAX_LOCATIONS {
        out.push_str(&format!(
            "\n… {} more not shown",
            locations.len() - MAX_LOCATIONS
        ));
    }
    out
}

fn push_location(out: &mut String, location: &Located) {
    if location.outside {
        out.push_str(&format!("\n{} (outside the workspace)", location.label));
    } else {
        out.push_str(&format!("\n{}", location.label));
    }
    if let Some(source) = &location.source {
        out.push_str(&format!("\n    {}", short(source)));
    }
}

pub(crate) fn hover(hover: Option<Hover>) -> String {
    let text = match hover.map(|h| h.contents) {
        None => String::new(),
        Some(HoverContents::Markup(markup)) => markup.value,
        Some(HoverContents::Scalar(marked)) => marked_text(marked),
        Some(HoverContents::Array(list)) => list
            .into_iter()
            .map(marked_text)
            .collect::<Vec<_>>()
            .join("\n\n"),
    };
    let text = text.trim();
    if text.is_empty() {
        return "no hover information".to_owned();
    }
    let mut shown = truncate_to_boundary(text.to_owned(), MAX_HOVER_BYTES);
    if shown.len() < text.len() {
        shown.push_str(&format!(
            "\n… {} more bytes not shown",
            text.len() - shown.len()
        ));
    }
    format!("hover\n{shown}")
}

fn marked_text(marked: MarkedString) -> String {
    match marked {
        MarkedString::String(text) => text,
        MarkedString::LanguageString(code) => format!("```{}\n{}\n```", code.language, code.value),
    }
}

pub(crate) fn document_symbols(
    path: &str,
    text: &str,
    response: Option<DocumentSymbolResponse>,
    encoding: PositionEncoding,
) -> String {
    let mut rows = Vec::new();
    match response {
        None => {}
        Some(DocumentSymbolResponse::Flat(symbols)) => {
            for symbol in symbols {
                let (line, column) =
                    position::from_lsp(text, symbol.location.range.start, encoding);
                let container = symbol
                    .container_name
                    .filter(|c| !c.is_empty())
                    .map(|c| format!(" (in {c})"))
                    .unwrap_or_default();
                rows.push(format!(
                    "{line}:{column} {} {}{container}",
                    kind_name(symbol.kind),
                    symbol.name
                ));
            }
        }
        Some(DocumentSymbolResponse::Nested(symbols)) => {
            let mut stack: Vec<(usize, lsp_types::DocumentSymbol)> =
                symbols.into_iter().rev().map(|s| (0, s)).collect();
            while let Some((depth, symbol)) = stack.pop() {
                let (line, column) =
                    position::from_lsp(text, symbol.selection_range.start, encoding);
                let detail = symbol
                    .detail
                    .filter(|d| !d.is_empty())
                    .map(|d| format!(" — {}", d.replace('\n', " ")))
                    .unwrap_or_default();
                rows.push(format!(
                    "{}{line}:{column} {} {}{detail}",
                    "  ".repeat(depth),
                    kind_name(symbol.kind),
                    symbol.name
                ));
                for child in symbol.children.unwrap_or_default().into_iter().rev() {
                    stack.push((depth + 1, child));
                }
            }
        }
    }
    let mut out = format!("{path}: {}", plural(rows.len(), "symbol"));
    for row in rows.iter().take(MAX_SYMBOLS) {
        out.push('\n');
        out.push_str(row);
    }
    if rows.len() > MAX_SYMBOLS {
        out.push_str(&format!("\n… {} more not shown", rows.len() - MAX_SYMBOLS));
    }
    out
}

pub(crate) fn workspace_symbols(query: &str, symbols: &[WorkspaceSymbol]) -> String {
    let mut out = format!("{} matching {query:?}", plural(symbols.len(), "symbol"));
    for symbol in symbols.iter().take(MAX_SYMBOLS) {
        let container = if symbol.container.is_empty() {
            String::new()
        } else {
            format!(" (in {})", symbol.container)
        };
        out.push_str(&format!("\n{} {}{container}", symbol.kind, symbol.name));
        if let Some(place) = &symbol.place {
            out.push_str(&format!(
                " — {}{}",
                place.label,
                if place.outside {
                    " (outside the workspace)"
                } else {
                    ""
                }
            ));
        }
    }
    if symbols.len() > MAX_SYMBOLS {
        out.push_str(&format!(
            "\n… {} more not shown",
            symbols.len() - MAX_SYMBOLS
        ));
    }
    out
}
