//! A JSON field of a reply, found without building the document: the
//! scanner walks the bytes to the value a path names and returns its
//! span, skipping every other value by its brackets and strings. It
//! allocates nothing, reads each byte at most a few times, and ends in
//! `None` on anything that is not the JSON it expects (a cut body, a
//! wrong type on the path, garbage).
//!
//! A path is written `$.data.items[0].id`, `.data.items[0].id` or
//! `data.items[0].id`: object keys (matched as they are written in the
//! document, escapes and all) and array indices from 0.

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(Box<str>),
    Index(usize),
}

/// The largest index a path may name.
const MAX_INDEX: usize = 1_000_000;

/// Parses a path; the error says what is wrong with it.
pub(crate) fn parse_path(text: &str) -> Result<Vec<Seg>, String> {
    let rest = text.strip_prefix('$').unwrap_or(text);
    let mut segs = Vec::new();
    let mut chars = rest;
    while !chars.is_empty() {
        if let Some(after) = chars.strip_prefix('[') {
            let (index, tail) = after
                .split_once(']')
                .ok_or_else(|| format!("'{text}' opens [ without closing it"))?;
            let index: usize = index
                .parse()
                .ok()
                .filter(|i| *i <= MAX_INDEX)
                .ok_or_else(|| {
                    format!("'{text}': [{index}] is not an index from 0 to {MAX_INDEX}")
                })?;
            segs.push(Seg::Index(index));
            chars = tail;
            continue;
        }
        let after = chars.strip_prefix('.').unwrap_or(chars);
        let end = after.find(['.', '[']).unwrap_or(after.len());
        let key = &after[..end];
        if key.is_empty() {
            return Err(format!("'{text}' holds an empty key"));
        }
        segs.push(Seg::Key(key.into()));
        chars = &after[end..];
    }
    if segs.is_empty() {
        return Err(format!(
            "'{text}' names no field; write a path like $.token or $.items[0].id"
        ));
    }
    Ok(segs)
}

/// The raw bytes of the value at `path` in `doc` (a string with its
/// quotes), or none.
pub(crate) fn find<'a>(doc: &'a [u8], path: &[Seg]) -> Option<&'a [u8]> {
    let mut i = ws(doc, 0);
    for seg in path {
        i = match seg {
            Seg::Key(key) => member(doc, i, key.as_bytes())?,
            Seg::Index(n) => element(doc, i, *n)?,
        };
    }
    let end = value_end(doc, i)?;
    Some(&doc[i..end])
}

/// The start of the value of member `key` of the object at `i`.
fn member(doc: &[u8], i: usize, key: &[u8]) -> Option<usize> {
    if doc.get(i) != Some(&b'{') {
        return None;
    }
    let mut i = ws(doc, i + 1);
    loop {
        if doc.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(doc, i)?;
        let name = &doc[i + 1..key_end - 1];
        i = ws(doc, key_end);
        if doc.get(i) != Some(&b':') {
            return None;
        }
        i = ws(doc, i + 1);
        if name == key {
            return Some(i);
        }
        i = ws(doc, value_end(doc, i)?);
        if doc.get(i) != Some(&b',') {
            return None;
        }
        i = ws(doc, i + 1);
    }
}

/// The start of element `n` of the array at `i`.
fn element(doc: &[u8], i: usize, n: usize) -> Option<usize> {
    if doc.get(i) != Some(&b'[') {
        return None;
    }
    let mut i = ws(doc, i + 1);
    for _ in 0..n {
        if doc.get(i) == Some(&b']') {
            return None;
        }
        i = ws(doc, value_end(doc, i)?);
        if doc.get(i) != Some(&b',') {
            return None;
        }
        i = ws(doc, i + 1);
    }
    (doc.get(i).is_some_and(|b| *b != b']')).then_some(i)
}

/// Past the white space from `i`.
fn ws(doc: &[u8], mut i: usize) -> usize {
    while doc
        .get(i)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    i
}

/// Just past the string that opens at `i` (its closing quote).
fn string_end(doc: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < doc.len() {
        match doc[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// Just past the value that starts at `i`.
fn value_end(doc: &[u8], i: usize) -> Option<usize> {
    match doc.get(i)? {
        b'"' => string_end(doc, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < doc.len() {
                match doc[j] {
                    b'"' => {
                        j = string_end(doc, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        b'}' | b']' | b',' | b':' => None,
        _ => {
            let mut j = i;
            while doc
                .get(j)
                .is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                j += 1;
            }
            Some(j)
        }
    }
}

/// Writes the value `raw` as a request carries it into `out`: a string's
/// text with its escapes read, anything else as written. False when the
/// text holds a control character (which no request line or header may
/// carry) or a broken escape.
pub(crate) fn text_into(raw: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let Some(inner) = raw.strip_prefix(b"\"").and_then(|r| r.strip_suffix(b"\"")) else {
        out.extend_from_slice(raw);
        return !raw.iter().any(u8::is_ascii_control);
    };
    let mut i = 0;
    while i < inner.len() {
        let b = inner[i];
        if b != b'\\' {
            if b.is_ascii_control() {
                return false;
            }
            out.push(b);
            i += 1;
            continue;
        }
        let Some(&e) = inner.get(i + 1) else {
            return false;
        };
        i += 2;
        match e {
            b'"' | b'\\' | b'/' => out.push(e),
            b'u' => {
                let Some(code) = inner
                    .get(i..i + 4)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                else {
                    return false;
                };
                i += 4;
                let c = char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
                if c.is_control() {
                    return false;
                }
                let mut utf8 = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
            // \b \f \n \r \t: control characters.
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at<'a>(doc: &'a str, path: &str) -> Option<&'a str> {
        find(doc.as_bytes(), &parse_path(path).unwrap()).map(|v| std::str::from_utf8(v).unwrap())
    }

    #[test]
    fn paths_reach_keys_indices_and_nested_values() {
        let doc = r#" { "a" : 1, "skip": {"x": [1, {"}": "]"}], "y": "a\"b"},
            "data": {"items": [ {"id": 17}, {"id": "x-2", "tags": [true, null]} ]},
            "token": "t\u0041k" } "#;
        assert_eq!(at(doc, "$.a"), Some("1"));
        assert_eq!(at(doc, "data.items[0].id"), Some("17"));
        assert_eq!(at(doc, ".data.items[1].id"), Some("\"x-2\""));
        assert_eq!(at(doc, "$.data.items[1].tags[1]"), Some("null"));
        assert_eq!(at(doc, "$.data.items[1].tags"), Some("[true, null]"));
        assert_eq!(at(doc, "$.token"), Some(r#""t\u0041k""#));
        assert_eq!(at(doc, "$.data.items[2]"), None);
        assert_eq!(at(doc, "$.missing"), None);
        assert_eq!(at(doc, "$.a.b"), None);
        assert_eq!(at(doc, "$.data[0]"), None);
        assert_eq!(at("[1,2,3]", "$[2]"), Some("3"));
        assert_eq!(at("{\"a\": [1, 2", "$.a[1]"), Some("2"));
        assert_eq!(at("{\"a\": [1, 2", "$.a"), None, "a cut array");
    }

    #[test]
    fn bad_paths_are_refused_with_what_is_wrong() {
        assert!(parse_path("$").unwrap_err().contains("names no field"));
        assert!(parse_path("$.a..b").unwrap_err().contains("empty key"));
        assert!(parse_path("$.a[x]").unwrap_err().contains("not an index"));
        assert!(parse_path("$.a[1").unwrap_err().contains("without closing"));
        assert_eq!(
            parse_path("$.a[3].b").unwrap(),
            vec![Seg::Key("a".into()), Seg::Index(3), Seg::Key("b".into())]
        );
    }

    #[test]
    fn a_strings_text_is_unescaped_and_control_characters_refused() {
        let mut out = Vec::new();
        assert!(text_into(br#""t\u0041k\/\"""#, &mut out));
        assert_eq!(out, b"tAk/\"");
        assert!(text_into(b"17", &mut out));
        assert_eq!(out, b"17");
        assert!(!text_into(br#""a\nb""#, &mut out));
        assert!(!text_into(br#""a\u000db""#, &mut out));
        assert!(!text_into(b"\"a\rb\"", &mut out));
        assert!(!text_into(br#""a\u00""#, &mut out));
    }

    proptest! {
        #[test]
        fn any_bytes_and_any_path_end_without_a_panic(
            doc in proptest::collection::vec(prop_oneof![
                Just(b'{'), Just(b'}'), Just(b'['), Just(b']'), Just(b'"'), Just(b'\\'),
                Just(b':'), Just(b','), Just(b'a'), Just(b' '), any::<u8>()
            ], 0..64),
            path in "[$.a\\[\\]0-9]{0,12}",
        ) {
            if let Ok(path) = parse_path(&path) {
                if let Some(v) = find(&doc, &path) {
                    let mut out = Vec::new();
                    let _ = text_into(v, &mut out);
                }
            }
        }
    }
}
