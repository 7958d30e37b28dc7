//! JSON text with every string masked, written in one pass: the same text as
//! `serde_json::to_string(&redact_json(&serde_json::to_value(value)?))`, without building the
//! `serde_json::Value` tree in between (an allocation per key, string and node, then a second
//! walk to mask it and a third to write it: ~9% of the pipeline pair's samples).
//!
//! [`Masking`] wraps the JSON writer's serializer: every string (and what `to_value` turns into
//! one: a `char`, a unit variant's name) goes through [`redact`], and a string under a
//! secret-named key (a struct field or map key, as [`redact_json_in_place`] sees it) becomes
//! [`REDACTED`]. Everything else is forwarded as it is, except an `f32`, written as the `f64`
//! `to_value` widens it to. `serde_json`'s raw values are parsed and masked, never copied
//! through.
//!
//! [`redact_json_in_place`]: super::redact_json_in_place

use serde::Serialize;
use serde::ser::{
    self, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant, SerializeTuple,
    SerializeTupleStruct, SerializeTupleVariant, Serializer,
};

use std::cell::Cell;

use super::{REDACTED, is_secret_key, redact};

/// The name under which `serde_json` writes a `RawValue`: a struct of that name with one field
/// of that name, whose text the JSON writer copies through as it is.
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// `value` as compact JSON with every string masked (see the module docs). `unmasked`: a field
/// of the outermost struct or map and the text it holds, written as it is.
pub(crate) fn to_masked_json<T: Serialize + ?Sized>(
    value: &T,
    unmasked: Option<(&str, &str)>,
) -> serde_json::Result<String> {
    let long_text = unmasked.map_or(0, |(_, text)| text.len());
    // Stored events and messages are mostly a few hundred bytes to ~1.5 KB, plus the one long
    // text a caller may name: one allocation for most, instead of doubling from 256 bytes
    // (~8 reallocations a pipeline call).
    let mut out = Vec::with_capacity(LEADING_CAPACITY + long_text + long_text / 16);
    let splice = unmasked.map(|(field, text)| Splice {
        field,
        text,
        written: Cell::new(0),
        at: Cell::new(None),
    });
    let mut writer = serde_json::Serializer::new(Tracked {
        out: &mut out,
        written: splice.as_ref().map(|splice| &splice.written),
    });
    value.serialize(Masking {
        inner: &mut writer,
        key: "",
        splice: splice.as_ref(),
    })?;
    // The unmasked text goes where its field's placeholder `""` was written.
    if let Some(splice) = &splice
        && let Some(at) = splice.at.get()
    {
        let tail = out.split_off(at);
        escape_json_text(&mut out, splice.text);
        out.extend_from_slice(&tail);
    }
    // The writer writes JSON, which is UTF-8.
    String::from_utf8(out).map_err(ser::Error::custom)
}

/// The one field of the outermost object written as it is: its name and text, and where the
/// text goes in the JSON. The field is written as `""` while the rest is serialized, and the
/// text spliced in between those quotes after, escaped by [`escape_json_text`]
/// (serde_json's escaping of a read file's text, a byte at a time, was ~2.3% of the pipeline
/// pair's samples).
struct Splice<'a> {
    field: &'a str,
    text: &'a str,
    /// How many bytes the JSON writer has written.
    written: Cell<usize>,
    /// Where the text goes (just before its placeholder's closing quote), once written.
    at: Cell<Option<usize>>,
}

impl Splice<'_> {
    /// Whether `value`, under this splice's field, is its text (checked, never assumed: any
    /// other value is written as it is) and no placeholder was written yet.
    fn holds<T: Serialize + ?Sized>(&self, value: &T) -> bool {
        self.at.get().is_none() && value.serialize(KeyText::Equals(self.text)).is_ok()
    }

    /// Notes where the text goes, right after the placeholder `""` was written.
    fn placed(&self) {
        self.at.set(Some(self.written.get().saturating_sub(1)));
    }
}

/// The JSON writer's output, counting what it has written for [`Splice`].
struct Tracked<'a> {
    out: &'a mut Vec<u8>,
    written: Option<&'a Cell<usize>>,
}

impl std::io::Write for Tracked<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.out.extend_from_slice(bytes);
        if let Some(written) = self.written {
            written.set(self.out.len());
        }
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Appends `text` as the inside of a JSON string, escaped exactly as `serde_json`'s compact
/// writer escapes it (`\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r`, other control bytes as
/// `\u00xx`; nothing else), looking at eight bytes at a time: most words of a text need none.
pub(crate) fn escape_json_text(out: &mut Vec<u8>, text: &str) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    /// The high bit of each byte of `word` that may be below 0x20, a quote or a backslash:
    /// every such byte is marked (a byte above a marked one may be marked too, so each is
    /// looked at again).
    fn candidates(word: u64) -> u64 {
        let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
        let control = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
        control
            | zero_byte(word ^ (ONES * u64::from(b'"')))
            | zero_byte(word ^ (ONES * u64::from(b'\\')))
    }
    /// Escapes `bytes[at]` if it needs it, after the bytes from `copied` up to it.
    #[inline]
    fn escape(out: &mut Vec<u8>, bytes: &[u8], at: usize, copied: &mut usize) {
        let byte = bytes[at];
        let short = match byte {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x09 => b't',
            0x0A => b'n',
            0x0C => b'f',
            0x0D => b'r',
            0x00..=0x1F => b'u',
            _ => return,
        };
        out.extend_from_slice(&bytes[*copied..at]);
        if short == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xF)],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', short]);
        }
        *copied = at + 1;
    }
    let bytes = text.as_bytes();
    out.reserve(bytes.len());
    let mut copied = 0;
    let mut chunks = bytes.chunks_exact(8);
    let mut start = 0;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let mut marked = candidates(u64::from_le_bytes(word));
        while marked != 0 {
            let at = start + (marked.trailing_zeros() / 8) as usize;
            marked &= marked - 1;
            escape(out, bytes, at, &mut copied);
        }
        start += 8;
    }
    for at in start..bytes.len() {
        escape(out, bytes, at, &mut copied);
    }
    out.extend_from_slice(&bytes[copied..]);
}

/// The buffer a JSON text starts with, beside the long text its caller names.
const LEADING_CAPACITY: usize = 1024;

/// A value to serialize masked; `key`: the object key it sits under (empty for none).
struct Masked<'a, T: ?Sized> {
    value: &'a T,
    key: &'a str,
}

impl<T: Serialize + ?Sized> Serialize for Masked<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(Masking {
            inner: serializer,
            key: self.key,
            splice: None,
        })
    }
}

/// The masking serializer around `inner`. `splice`: a field of the outermost struct or map
/// written as it is (a text the caller masked already with the same detector).
struct Masking<'f, S> {
    inner: S,
    /// The object key the value sits under (empty for none): looked at only when the value
    /// turns out to be a string, the one kind a secret-named key masks whole.
    key: &'f str,
    splice: Option<&'f Splice<'f>>,
}

/// A compound (sequence, map, struct) whose elements are masked.
struct Compound<'f, C> {
    inner: C,
    /// The text of the map key just written (map keys are masked by their value's rule).
    key: String,
    splice: Option<&'f Splice<'f>>,
    /// For a raw JSON value: the key it sits under (see [`RAW_VALUE_TOKEN`]).
    raw_under: Option<&'f str>,
}

impl<C> Compound<'_, C> {
    fn new(inner: C) -> Self {
        Compound {
            inner,
            key: String::new(),
            splice: None,
            raw_under: None,
        }
    }
}

impl<S: Serializer> Masking<'_, S> {
    fn string(self, text: &str) -> Result<S::Ok, S::Error> {
        if is_secret_key(self.key) {
            return self.inner.serialize_str(REDACTED);
        }
        self.inner.serialize_str(&redact(text))
    }
}

impl<'f, S: Serializer> Serializer for Masking<'f, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Compound<'f, S::SerializeSeq>;
    type SerializeTuple = Compound<'f, S::SerializeTuple>;
    type SerializeTupleStruct = Compound<'f, S::SerializeTupleStruct>;
    type SerializeTupleVariant = Compound<'f, S::SerializeTupleVariant>;
    type SerializeMap = Compound<'f, S::SerializeMap>;
    type SerializeStruct = Compound<'f, S::SerializeStruct>;
    type SerializeStructVariant = Compound<'f, S::SerializeStructVariant>;

    fn serialize_bool(self, v: bool) -> Result<S::Ok, S::Error> {
        self.inner.serialize_bool(v)
    }
    fn serialize_i8(self, v: i8) -> Result<S::Ok, S::Error> {
        self.inner.serialize_i8(v)
    }
    fn serialize_i16(self, v: i16) -> Result<S::Ok, S::Error> {
        self.inner.serialize_i16(v)
    }
    fn serialize_i32(self, v: i32) -> Result<S::Ok, S::Error> {
        self.inner.serialize_i32(v)
    }
    fn serialize_i64(self, v: i64) -> Result<S::Ok, S::Error> {
        self.inner.serialize_i64(v)
    }
    fn serialize_i128(self, v: i128) -> Result<S::Ok, S::Error> {
        self.inner.serialize_i128(v)
    }
    fn serialize_u8(self, v: u8) -> Result<S::Ok, S::Error> {
        self.inner.serialize_u8(v)
    }
    fn serialize_u16(self, v: u16) -> Result<S::Ok, S::Error> {
        self.inner.serialize_u16(v)
    }
    fn serialize_u32(self, v: u32) -> Result<S::Ok, S::Error> {
        self.inner.serialize_u32(v)
    }
    fn serialize_u64(self, v: u64) -> Result<S::Ok, S::Error> {
        self.inner.serialize_u64(v)
    }
    fn serialize_u128(self, v: u128) -> Result<S::Ok, S::Error> {
        self.inner.serialize_u128(v)
    }
    fn serialize_f32(self, v: f32) -> Result<S::Ok, S::Error> {
        // `to_value` keeps every float as an `f64`.
        self.inner.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<S::Ok, S::Error> {
        self.inner.serialize_f64(v)
    }
    fn serialize_char(self, v: char) -> Result<S::Ok, S::Error> {
        self.string(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<S::Ok, S::Error> {
        self.string(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<S::Ok, S::Error> {
        self.inner.serialize_bytes(v)
    }
    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_none()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit()
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit_struct(name)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        // `to_value` makes it a string.
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        // `to_value` keeps the inner value alone.
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        // `{variant: value}`: the variant's name is the value's key.
        self.inner
            .serialize_newtype_variant(name, index, variant, &under(variant, value))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        self.inner.serialize_seq(len).map(Compound::new)
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        self.inner.serialize_tuple(len).map(Compound::new)
    }
    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        self.inner
            .serialize_tuple_struct(name, len)
            .map(Compound::new)
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        // `{variant: [..]}`: an array is masked element by element whatever its key.
        self.inner
            .serialize_tuple_variant(name, index, variant, len)
            .map(Compound::new)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        let splice = self.splice;
        self.inner.serialize_map(len).map(|inner| Compound {
            splice,
            ..Compound::new(inner)
        })
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        let splice = self.splice;
        let raw_under = (name == RAW_VALUE_TOKEN).then_some(self.key);
        self.inner
            .serialize_struct(name, len)
            .map(|inner| Compound {
                splice,
                raw_under,
                ..Compound::new(inner)
            })
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        // `{variant: {..}}`: an object, masked by its own keys.
        self.inner
            .serialize_struct_variant(name, index, variant, len)
            .map(Compound::new)
    }
}

/// The raw JSON text `value` holds, parsed and written masked as a value under `key`.
fn raw_json_masked<T: Serialize + ?Sized>(value: &T, key: &str) -> serde_json::Result<String> {
    let mut text = String::new();
    value.serialize(KeyText::Into(&mut text))?;
    let parsed: serde_json::Value = serde_json::from_str(&text)?;
    let mut out = Vec::with_capacity(text.len());
    parsed.serialize(Masking {
        inner: &mut serde_json::Serializer::new(&mut out),
        key,
        splice: None,
    })?;
    String::from_utf8(out).map_err(ser::Error::custom)
}

/// An element of an array: never under a key.
fn element<T: ?Sized>(value: &T) -> Masked<'_, T> {
    Masked { value, key: "" }
}

/// A value under `key` in an object.
fn under<'a, T: ?Sized>(key: &'a str, value: &'a T) -> Masked<'a, T> {
    Masked { value, key }
}

/// The four kinds of array (sequence, tuple, tuple struct, tuple variant): each element masked.
macro_rules! masked_elements {
    ($($kind:ident :: $method:ident),*) => {$(
        impl<C: $kind> $kind for Compound<'_, C> {
            type Ok = C::Ok;
            type Error = C::Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
                self.inner.$method(&element(value))
            }
            fn end(self) -> Result<C::Ok, C::Error> {
                self.inner.end()
            }
        }
    )*};
}

masked_elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

/// Structs and struct variants: each field masked by its name (the outermost struct's
/// splice's field written as it is).
macro_rules! masked_fields {
    ($($kind:ident),*) => {$(
        impl<C: $kind> $kind for Compound<'_, C> {
            type Ok = C::Ok;
            type Error = C::Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), C::Error> {
                if let Some(splice) = self.splice.filter(|splice| splice.field == key)
                    && splice.holds(value)
                {
                    self.inner.serialize_field(key, "")?;
                    splice.placed();
                    return Ok(());
                }
                if let Some(outer) = self.raw_under.filter(|_| key == RAW_VALUE_TOKEN) {
                    // Raw JSON text, which the writer copies through: parsed, masked as the
                    // value it is, and handed on as text again.
                    let masked = raw_json_masked(value, outer).map_err(ser::Error::custom)?;
                    return self.inner.serialize_field(key, &masked);
                }
                self.inner.serialize_field(key, &under(key, value))
            }
            fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
                self.inner.skip_field(key)
            }
            fn end(self) -> Result<C::Ok, C::Error> {
                self.inner.end()
            }
        }
    )*};
}

masked_fields!(SerializeStruct, SerializeStructVariant);

impl<C: SerializeMap> SerializeMap for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), C::Error> {
        // Keys are written as they are (as `redact_json_in_place` leaves them); only a key that
        // is text can name a secret (numbers and booleans cannot).
        self.key.clear();
        let _ = key.serialize(KeyText::Into(&mut self.key));
        self.inner.serialize_key(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
        if let Some(splice) = self.splice.filter(|splice| splice.field == self.key)
            && splice.holds(value)
        {
            self.inner.serialize_value("")?;
            splice.placed();
            return Ok(());
        }
        self.inner.serialize_value(&under(&self.key, value))
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

/// Methods of [`KeyText`] for keys that are not text.
macro_rules! not_text {
    ($($method:ident($argument:ty)),*) => {$(
        fn $method(self, _: $argument) -> serde_json::Result<()> {
            Err(not_text())
        }
    )*};
}

/// Writes a map key's text into its buffer when the key is text (a string, a `char`, a unit
/// variant's name, through newtypes); any other key fails here, leaving the buffer empty, and
/// the JSON writer then decides about it as `to_value` would. `Equals`: succeeds only for
/// a text equal to the one it holds, copying nothing ([`Splice`]).
enum KeyText<'a> {
    Into(&'a mut String),
    Equals(&'a str),
}

impl KeyText<'_> {
    fn text(self, text: &str) -> serde_json::Result<()> {
        match self {
            KeyText::Into(buffer) => buffer.push_str(text),
            KeyText::Equals(expected) if expected == text => {}
            KeyText::Equals(_) => return Err(not_text()),
        }
        Ok(())
    }
}

impl ser::Serializer for KeyText<'_> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = ser::Impossible<(), serde_json::Error>;
    type SerializeTuple = ser::Impossible<(), serde_json::Error>;
    type SerializeTupleStruct = ser::Impossible<(), serde_json::Error>;
    type SerializeTupleVariant = ser::Impossible<(), serde_json::Error>;
    type SerializeMap = ser::Impossible<(), serde_json::Error>;
    type SerializeStruct = ser::Impossible<(), serde_json::Error>;
    type SerializeStructVariant = ser::Impossible<(), serde_json::Error>;

    fn serialize_str(self, v: &str) -> serde_json::Result<()> {
        self.text(v)
    }
    fn serialize_char(self, v: char) -> serde_json::Result<()> {
        self.text(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> serde_json::Result<()> {
        self.text(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> serde_json::Result<()> {
        value.serialize(self)
    }
    not_text!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str)
    );
    fn serialize_none(self) -> serde_json::Result<()> {
        Err(not_text())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> serde_json::Result<()> {
        Err(not_text())
    }
    fn serialize_unit(self) -> serde_json::Result<()> {
        Err(not_text())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> serde_json::Result<()> {
        Err(not_text())
    }
    fn serialize_seq(self, _len: Option<usize>) -> serde_json::Result<Self::SerializeSeq> {
        Err(not_text())
    }
    fn serialize_tuple(self, _len: usize) -> serde_json::Result<Self::SerializeTuple> {
        Err(not_text())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> serde_json::Result<Self::SerializeTupleStruct> {
        Err(not_text())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> serde_json::Result<Self::SerializeTupleVariant> {
        Err(not_text())
    }
    fn serialize_map(self, _len: Option<usize>) -> serde_json::Result<Self::SerializeMap> {
        Err(not_text())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> serde_json::Result<Self::SerializeStruct> {
        Err(not_text())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> serde_json::Result<Self::SerializeStructVariant> {
        Err(not_text())
    }
}

fn not_text() -> serde_json::Error {
    ser::Error::custom("not a text key")
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Serialize;
    use serde_json::{Value, json};

    use crate::redact::{
        SECRET_KEY_WORDS, is_secret_key, redact_json, to_redacted_json, to_redacted_json_except,
    };
    use crate::{
        Display, DisplayKind, Event, EventPayload, ModelMessage, ToolCall, ToolCompleted,
        ToolExecutionResult,
    };

    /// What the store did before: the tree, masked, written.
    fn through_value<T: Serialize + ?Sized>(value: &T) -> String {
        serde_json::to_string(&redact_json(&serde_json::to_value(value).unwrap())).unwrap()
    }

    /// The same JSON value as [`through_value`] gives, so the same secrets left in the text
    /// (the detector's rules leave some: a value under a secret key that is not a string).
    fn assert_same<T: Serialize + ?Sized>(value: &T) {
        let new = to_redacted_json(value).unwrap();
        let old = through_value(value);
        let parsed: Value = serde_json::from_str(&new).unwrap();
        assert_eq!(
            parsed,
            serde_json::from_str::<Value>(&old).unwrap(),
            "{new}\n{old}"
        );
        for secret in [
            "hunter2",
            "abc123",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        ] {
            assert_eq!(
                new.contains(secret),
                old.contains(secret),
                "{secret} in {new}"
            );
        }
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Token(String),
        Pair(String, u8),
        Password { note: String },
    }

    #[derive(Serialize)]
    struct Everything {
        float: f32,
        double: f64,
        not_a_number: f64,
        big: u128,
        letter: char,
        password: Option<String>,
        secret_letter: char,
        token: Shape,
        api_key: Vec<String>,
        shapes: Vec<Shape>,
        numbered: BTreeMap<u32, String>,
        named: HashMap<String, Option<String>>,
        tuple: (String, i64, bool),
        unit: (),
        nothing: Option<u8>,
        credential: Option<u8>,
        bytes: Vec<u8>,
        auth_kind: Shape,
        #[serde(flatten)]
        extra: BTreeMap<String, Value>,
    }

    fn everything() -> Everything {
        Everything {
            float: 0.1,
            double: -2.5e300,
            not_a_number: f64::NAN,
            big: u128::from(u64::MAX),
            letter: 'é',
            password: Some("hunter2".into()),
            secret_letter: 'x',
            token: Shape::Token("abc123".into()),
            api_key: vec!["abc123".into(), "password=hunter2".into()],
            shapes: vec![
                Shape::Unit,
                Shape::Pair("Authorization: Bearer abc123".into(), 7),
                Shape::Password {
                    note: "hunter2".into(),
                },
            ],
            numbered: BTreeMap::from([(3, "token=abc123".into()), (4, "plain".into())]),
            named: HashMap::from([
                ("DB_PASSWORD".to_owned(), Some("hunter2".to_owned())),
                ("comment".to_owned(), None),
                (
                    "line".to_owned(),
                    Some("\"quoted\"\n\ttab \u{1} ok".to_owned()),
                ),
            ]),
            tuple: ("see https://bob:hunter2@example.com/x".into(), -1, true),
            unit: (),
            nothing: None,
            credential: Some(5),
            bytes: vec![0, 255, 7],
            auth_kind: Shape::Unit,
            extra: BTreeMap::from([
                ("x-auth-header".to_owned(), json!("abc123")),
                ("nested".to_owned(), json!({"secret": {"inner": "ok"}})),
            ]),
        }
    }

    #[test]
    fn masks_as_the_tree_did_on_a_table_of_values() {
        assert_same(&everything());
        let values = [
            json!(null),
            json!("password=hunter2"),
            json!([
                "ok",
                "use ghp_abcdefghijklmnopqrstuvwxyz0123456789 now",
                3,
                2.5
            ]),
            json!({"api_key": "abc123", "token": 5, "secret": ["abc", {"x": "y"}],
                   "cookie": {"k": "password: hunter2"}, "PWD": null, "a": {"Authorization": "Basic abc123"}}),
            json!({"body": "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\nb"}),
            json!({"": "", "ünïcode": "ключ=значение", "sk": "sk-abcdefghijklmnopqrstuvwx"}),
        ];
        for value in &values {
            assert_same(value);
        }
        let mut result = ToolExecutionResult::success("password=hunter2 and more");
        result.metadata.display = Some(
            Display::new(DisplayKind::Command)
                .with_title("curl -H 'Authorization: Bearer abc123'")
                .with_body("GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789")
                .with_field("api token", "hunter2")
                .with_field("exit code", 0),
        );
        let completed = ToolCompleted::new("c1", "t1", "run_command", &result);
        let event = Event {
            session_id: "s".into(),
            sequence: 4,
            timestamp_ms: 1_700_000_000_000,
            payload: EventPayload::ToolCompleted(completed),
        };
        assert_same(&event);
        let message = ModelMessage::assistant_with_calls(
            "calling with password=hunter2",
            vec![ToolCall {
                id: "c1".into(),
                name: "run_command".into(),
                arguments: r#"{"command": "curl -u bob:hunter2 https://x", "token": "abc123"}"#
                    .into(),
            }],
        );
        assert_same(&message);
        assert_same(&ModelMessage::tool_result(
            "c1",
            "read_file",
            "api_key: abc123",
            result.summary(),
        ));
    }

    /// A small deterministic generator (xorshift), so the random table is the same every run.
    struct Random(u64);

    impl Random {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[(self.next() % items.len() as u64) as usize]
        }
    }

    const KEYS: &[&str] = &[
        "name",
        "path",
        "Token",
        "my_password",
        "API-KEY",
        "authorization",
        "x",
        "Cookie",
        "pwd",
        "notes",
        "db.secret.value",
        "accessKey",
        "count",
    ];
    const TEXTS: &[&str] = &[
        "plain text",
        "password=hunter2 next",
        "DB_PASSWORD: s3cr3t",
        "{\"api_key\": \"abc123\"}",
        "Authorization: Bearer abc.def",
        "use sk-abcdefghijklmnopqrstuvwx now",
        "key AKIAABCDEFGHIJKLMNOP",
        "git clone https://bob:pa55@example.com/x",
        "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----",
        "src/main.rs:12: fn main() {}",
        "",
        "tab\tquote\" backslash\\ nul\u{0}",
    ];

    fn random_value(random: &mut Random, depth: u32) -> Value {
        match random.next() % if depth > 3 { 4 } else { 6 } {
            0 => Value::Null,
            1 => json!(random.next() % 1000),
            2 => json!(random.next().is_multiple_of(2)),
            3 => json!(random.pick(TEXTS)),
            4 => Value::Array(
                (0..random.next() % 4)
                    .map(|_| random_value(random, depth + 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..random.next() % 5)
                    .map(|_| {
                        (
                            random.pick(KEYS).to_owned(),
                            random_value(random, depth + 1),
                        )
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn masks_as_the_tree_did_on_random_values() {
        let mut random = Random(0x9E37_79B9_7F4A_7C15);
        for _ in 0..5_000 {
            let value = random_value(&mut random, 0);
            let new: Value = serde_json::from_str(&to_redacted_json(&value).unwrap()).unwrap();
            assert_eq!(new, redact_json(&value), "{value}");
        }
    }

    #[test]
    fn the_excepted_field_is_written_as_it_is_and_only_at_the_top() {
        let message = ModelMessage::tool_result(
            "c1",
            "read_file",
            "already masked, say",
            ToolExecutionResult::success("x").summary(),
        );
        let written = to_redacted_json_except(&message, "content", &message.content).unwrap();
        assert_eq!(written, to_redacted_json(&message).unwrap());
        let mut secret = message.clone();
        secret.content = "password=hunter2".into();
        let written: Value = serde_json::from_str(
            &to_redacted_json_except(&secret, "content", &secret.content).unwrap(),
        )
        .unwrap();
        assert_eq!(written["content"], "password=hunter2");
        // A field that does not hold the text named is masked like any other.
        let written: Value = serde_json::from_str(
            &to_redacted_json_except(&secret, "content", "something else").unwrap(),
        )
        .unwrap();
        assert_eq!(written["content"], "password=[REDACTED]");
        let nested = json!({"content": "x", "inner": {"content": "password=hunter2"}});
        let written: Value =
            serde_json::from_str(&to_redacted_json_except(&nested, "content", "x").unwrap())
                .unwrap();
        assert_eq!(written["inner"]["content"], "password=[REDACTED]");
        assert_eq!(written["content"], "x");
        let keyed = json!({"password": "p", "content": "password=hunter2", "after": "token=abc"});
        let written = to_redacted_json_except(&keyed, "content", "password=hunter2").unwrap();
        assert_eq!(
            written,
            r#"{"after":"token=[REDACTED]","content":"password=hunter2","password":"[REDACTED]"}"#
        );
    }

    #[test]
    fn texts_are_escaped_as_serde_json_escapes_them() {
        let mut texts: Vec<String> = (0u8..=0x7F)
            .flat_map(|byte| {
                let c = char::from(byte);
                // The byte at every offset of an eight-byte word, and twice in one.
                (0..10).map(move |at| format!("{}{c}{}{c}", "a".repeat(at), "ü".repeat(at % 3)))
            })
            .collect();
        texts.extend([
            String::new(),
            "fn main() {\n\tprintln!(\"hi\\n\");\r\n}\u{7f}\u{1f}→ключ".repeat(37),
            "x".repeat(4096),
            "\"\\".repeat(9),
        ]);
        let mut random = Random(7);
        for _ in 0..2_000 {
            let length = usize::try_from(random.next() % 40).unwrap();
            let text: String = (0..length)
                .map(|_| match random.next() % 6 {
                    0 => char::from(u8::try_from(random.next() % 0x20).unwrap()),
                    1 => '"',
                    2 => '\\',
                    3 => 'é',
                    _ => char::from(b'a' + u8::try_from(random.next() % 26).unwrap()),
                })
                .collect();
            texts.push(text);
        }
        for text in &texts {
            let mut out = b"[".to_vec();
            super::escape_json_text(&mut out, text);
            let expected = serde_json::to_string(text).unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                format!("[{}", &expected[1..expected.len() - 1]),
                "{text:?}"
            );
            let message = ModelMessage::tool_result(
                "c1",
                "read_file",
                text.as_str(),
                ToolExecutionResult::success("x").summary(),
            );
            let written = to_redacted_json_except(&message, "content", text).unwrap();
            let back: ModelMessage = serde_json::from_str(&written).unwrap();
            assert_eq!(back.content, *text);
            assert_eq!(written, serde_json::to_string(&message).unwrap());
        }
    }

    #[test]
    fn raw_json_text_is_masked_not_copied_through() {
        /// What `serde_json::value::RawValue` does (the feature is off in this crate's build).
        struct Raw(&'static str);
        impl Serialize for Raw {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let mut raw = serializer.serialize_struct(super::RAW_VALUE_TOKEN, 1)?;
                raw.serialize_field(super::RAW_VALUE_TOKEN, self.0)?;
                raw.end()
            }
        }
        // Written through as raw text where serde_json's `raw_value` feature is on, as a field
        // holding that text where it is off.
        let unwrap_raw = |written: &Value| match written.get(super::RAW_VALUE_TOKEN) {
            Some(Value::String(inner)) => serde_json::from_str::<Value>(inner).unwrap(),
            _ => written.clone(),
        };
        let text = r#"{"password": "hunter2", "n": 1, "note": "token=abc123"}"#;
        let written: Value = serde_json::from_str(&to_redacted_json(&Raw(text)).unwrap()).unwrap();
        assert_eq!(
            unwrap_raw(&written),
            json!({"password": "[REDACTED]", "n": 1, "note": "token=[REDACTED]"})
        );
        let map = BTreeMap::from([("token", Raw(r#""hunter2""#)), ("plain", Raw("[1, 2]"))]);
        let written: Value = serde_json::from_str(&to_redacted_json(&map).unwrap()).unwrap();
        assert_eq!(unwrap_raw(&written["token"]), json!("[REDACTED]"));
        assert_eq!(unwrap_raw(&written["plain"]), json!([1, 2]));
    }

    /// The detector without its first-byte table (every word at every position), as the reference.
    fn is_secret_key_scanning_every_word(key: &str) -> bool {
        let lower = key.to_ascii_lowercase();
        if super::super::SECRET_KEY_ENDINGS
            .iter()
            .any(|ending| lower.ends_with(ending))
        {
            return true;
        }
        let key = key.as_bytes();
        SECRET_KEY_WORDS.iter().any(|word| {
            let word = word.as_bytes();
            key.len() >= word.len()
                && key
                    .windows(word.len())
                    .any(|window| window.eq_ignore_ascii_case(word))
        })
    }

    #[test]
    fn the_words_by_first_letter_are_the_list() {
        let mut by_letter: Vec<&str> = (0..=255u8)
            .flat_map(|byte| super::super::secret_key_words_from(byte).iter().copied())
            .collect();
        by_letter.sort_unstable();
        by_letter.dedup();
        let mut listed = SECRET_KEY_WORDS.to_vec();
        listed.sort_unstable();
        assert_eq!(by_letter, listed);
        for word in SECRET_KEY_WORDS {
            let first = word.as_bytes()[0];
            for byte in [first.to_ascii_lowercase(), first.to_ascii_uppercase()] {
                assert!(
                    super::super::secret_key_words_from(byte).contains(word),
                    "{word}"
                );
            }
        }
    }

    #[test]
    fn secret_keys_are_found_as_by_the_scan_of_every_word() {
        let mut keys: Vec<String> = KEYS.iter().map(|key| (*key).to_owned()).collect();
        for word in SECRET_KEY_WORDS {
            keys.push((*word).to_owned());
            keys.push(word.to_ascii_uppercase());
            keys.push(format!("my_{word}_x"));
            keys.push(word[..word.len() - 1].to_owned());
            keys.push(word[1..].to_owned());
        }
        let mut random = Random(7);
        let alphabet = b"pPaAsStTcCxXwWdDoOrRkKeEyY_-.0";
        for _ in 0..20_000 {
            let length = (random.next() % 14) as usize;
            keys.push(
                (0..length)
                    .map(|_| char::from(alphabet[(random.next() % alphabet.len() as u64) as usize]))
                    .collect(),
            );
        }
        let mut secret = 0;
        for key in &keys {
            assert_eq!(
                is_secret_key(key),
                is_secret_key_scanning_every_word(key),
                "{key}"
            );
            secret += usize::from(is_secret_key(key));
        }
        assert!(secret > 50, "the table holds secret keys ({secret})");
    }
}
