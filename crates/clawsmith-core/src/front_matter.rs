//! Front matter: the YAML between two `---` lines at the top of a Markdown file, read as JSON
//! values, and the body after it. A skill's `SKILL.md` and an agent definition are such files;
//! each caller gives the values its own meaning.
//!
//! The YAML is read from the parser's events (`yaml-rust2`), not through its document loader:
//! aliases are refused (an alias copies its anchor's tree, so a few lines of nested aliases can
//! ask for gigabytes), nesting is bounded, duplicate keys are refused, and at most one document
//! is read. Every refusal is a reason string; nothing here panics on input.

use serde_json::{Map, Value};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// The longest front matter read, in bytes.
pub const FRONT_MATTER_MAX_BYTES: usize = 64 * 1024;
/// The deepest nesting of lists and maps in the front matter.
const MAX_DEPTH: usize = 32;

/// A file's front matter and the text after it.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontMatter<'a> {
    /// The YAML as JSON values: `Null` when it is empty, a mapping in every file that follows
    /// its format (the caller checks).
    pub fields: Value,
    /// Everything after the closing `---` (or `...`) line.
    pub body: &'a str,
    /// The line of the file the body starts on (1-based).
    pub body_line: usize,
}

/// Reads the front matter of `text`, the content of `file` (a name for the first reason, e.g.
/// `SKILL.md`). `Err` is the reason it cannot be read: no opening or closing line, longer than
/// [`FRONT_MATTER_MAX_BYTES`], or YAML this reader refuses (positions are lines of the file).
pub fn parse_front_matter<'a>(text: &'a str, file: &str) -> Result<FrontMatter<'a>, String> {
    let (yaml, body, body_line) = split(text, file)?;
    Ok(FrontMatter {
        fields: parse_yaml(yaml)?,
        body,
        body_line,
    })
}

/// The YAML between the opening and closing `---`, the body, and the body's first line.
fn split<'a>(text: &'a str, file: &str) -> Result<(&'a str, &'a str, usize), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err(format!(
            "{file} must start with a `---` line opening the YAML front matter"
        ));
    }
    let start = first.len();
    let mut offset = start;
    for (index, line) in lines.enumerate() {
        if matches!(line.trim_end(), "---" | "...") {
            let yaml = &text[start..offset];
            if yaml.len() > FRONT_MATTER_MAX_BYTES {
                break;
            }
            return Ok((yaml, &text[offset + line.len()..], index + 3));
        }
        offset += line.len();
        if offset - start > FRONT_MATTER_MAX_BYTES {
            return Err(format!(
                "the front matter is longer than {FRONT_MATTER_MAX_BYTES} bytes"
            ));
        }
    }
    Err("the front matter has no closing `---` line".to_owned())
}

/// A partly built list or map.
enum Open {
    List(Vec<Value>),
    Map(Map<String, Value>, Option<String>),
}

/// The front matter as JSON values. Positions in messages are lines of the whole file.
fn parse_yaml(yaml: &str) -> Result<Value, String> {
    let at = |mark: &Marker| format!("line {}, column {}", mark.line() + 1, mark.col() + 1);
    let mut parser = Parser::new_from_str(yaml);
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<Value> = None;
    let mut documents = 0;
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|error| format!("invalid YAML at {}: {}", at(error.marker()), error.info()))?;
        let value = match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err(format!(
                        "the front matter holds more than one YAML document ({})",
                        at(&mark)
                    ));
                }
                continue;
            }
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => continue,
            Event::Alias(_) => {
                return Err(format!("YAML aliases are not supported ({})", at(&mark)));
            }
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(format!(
                        "the front matter nests deeper than {MAX_DEPTH} levels ({})",
                        at(&mark)
                    ));
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Open::List(Vec::new())
                } else {
                    Open::Map(Map::new(), None)
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Open::List(items)) => Value::Array(items),
                Some(Open::Map(map, _)) => Value::Object(map),
                None => continue,
            },
            Event::Scalar(text, style, _, _) => scalar(text, style),
        };
        match stack.last_mut() {
            None => root = Some(value),
            Some(Open::List(items)) => items.push(value),
            Some(Open::Map(map, pending)) => match pending.take() {
                Some(key) => {
                    if map.contains_key(&key) {
                        return Err(format!("duplicate key `{key}` ({})", at(&mark)));
                    }
                    map.insert(key, value);
                }
                None => {
                    let key = match value {
                        Value::String(text) => text,
                        Value::Null => "null".to_owned(),
                        Value::Bool(_) | Value::Number(_) => value.to_string(),
                        Value::Array(_) | Value::Object(_) => {
                            return Err(format!(
                                "a mapping key must be a plain value ({})",
                                at(&mark)
                            ));
                        }
                    };
                    *pending = Some(key);
                }
            },
        }
    }
    Ok(root.unwrap_or(Value::Null))
}

/// A scalar as YAML 1.2's core schema reads it: plain `null`/`~`/empty, `true`/`false`,
/// integers and floats are typed; everything quoted or in a block is a string.
fn scalar(text: String, style: TScalarStyle) -> Value {
    if style != TScalarStyle::Plain {
        return Value::String(text);
    }
    match text.as_str() {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(integer) = text.parse::<i64>() {
        return Value::from(integer);
    }
    if text.bytes().any(|b| b.is_ascii_digit())
        && let Ok(float) = text.parse::<f64>()
        && let Some(number) = serde_json::Number::from_f64(float)
    {
        return Value::Number(number);
    }
    Value::String(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_body_and_refusals() {
        /// `Ok((fields, body, body line))` or `Err(part of the reason)`.
        type Expected<'a> = Result<(Value, &'a str, usize), &'a str>;
        // (text, expected)
        let table: [(&str, Expected<'_>); 10] = [
            (
                "---\nname: x\nn: 3\nlist: [a, \"b\"]\n---\nBody\n",
                Ok((
                    json!({"name": "x", "n": 3, "list": ["a", "b"]}),
                    "Body\n",
                    6,
                )),
            ),
            (
                "\u{feff}---\r\na: ~\r\n...\r\n",
                Ok((json!({"a": null}), "", 4)),
            ),
            ("---\n---\nrest", Ok((Value::Null, "rest", 3))),
            (
                "no front matter\n",
                Err("F.md must start with a `---` line"),
            ),
            ("---\na: b\n", Err("no closing `---` line")),
            ("---\na: [b\n---\n", Err("invalid YAML at line")),
            ("---\na: 1\na: 2\n---\n", Err("duplicate key `a` (line 3")),
            (
                "---\na: &x b\nc: *x\n---\n",
                Err("aliases are not supported"),
            ),
            ("---\na: b: c\n---\n", Err("invalid YAML at line 2")),
            (
                "---\na: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n---\n",
                Err("nests deeper than 32 levels"),
            ),
        ];
        for (text, expected) in table {
            let got = parse_front_matter(text, "F.md")
                .map(|front| (front.fields, front.body, front.body_line));
            match (got, expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text:?}"),
                (Err(reason), Err(part)) => {
                    assert!(reason.contains(part), "{text:?}: {reason:?} lacks {part:?}");
                }
                (got, want) => panic!("{text:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
