//! JSON pointers (RFC 6901) into a training body's `kernel` and `params`: the keys of a
//! search space. A pointer names a place that exists, or a field that its (existing)
//! parent object leaves out; whether that field is one the kernel or model has is for
//! the model's own parser to say once the value is in place.

use serde_json::{Map, Value};

/// A checked pointer: its text as the client wrote it and its reference tokens.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pointer {
    pub text: String,
    pub tokens: Vec<String>,
}

impl Pointer {
    /// The tokens of `text`, or None when it is not a pointer into `kernel` or `params`
    /// (empty, not starting with `/`, a bad `~` escape, or rooted elsewhere).
    pub fn parse(text: &str) -> Option<Pointer> {
        let rest = text.strip_prefix('/')?;
        let mut tokens = Vec::new();
        for raw in rest.split('/') {
            let mut token = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => token.push('~'),
                        Some('1') => token.push('/'),
                        _ => return None,
                    }
                } else {
                    token.push(c);
                }
            }
            tokens.push(token);
        }
        if !matches!(tokens[0].as_str(), "kernel" | "params") {
            return None;
        }
        Some(Pointer { text: text.to_string(), tokens })
    }

    /// Whether every token of `self` starts `other` (a place inside or equal to it).
    pub fn is_prefix_of(&self, other: &Pointer) -> bool {
        self.tokens.len() <= other.tokens.len() && other.tokens.starts_with(&self.tokens)
    }

    /// Whether `pointer` (an error's place in the body) lies at or under this place.
    pub fn covers(&self, pointer: &str) -> bool {
        pointer == self.text || pointer.starts_with(&format!("{}/", self.text))
    }
}

/// A body's `kernel` and `params` as one document `{"kernel": ..., "params": ...}`, into
/// which candidate values are put.
#[derive(Debug, Clone, PartialEq)]
pub struct Document(Value);

impl Document {
    /// An absent `params` is an empty object; an absent `kernel` is `{"type": "rbf"}`
    /// (the default kernel with its width left to its default, so that either
    /// `length_scale` or `gamma` can be searched).
    pub fn new(kernel: Option<&Value>, params: Option<&Value>) -> Document {
        let mut root = Map::new();
        root.insert("kernel".into(), kernel.cloned().unwrap_or_else(|| serde_json::json!({"type": "rbf"})));
        root.insert("params".into(), params.cloned().unwrap_or_else(|| Value::Object(Map::new())));
        Document(Value::Object(root))
    }

    pub fn kernel(&self) -> &Value {
        &self.0["kernel"]
    }

    pub fn params(&self) -> &Value {
        &self.0["params"]
    }

    /// Whether `pointer` names a place here: every parent exists, and the last token is
    /// a key of an object (present or not) or an index of an array within its length.
    pub fn has_place(&self, pointer: &Pointer) -> bool {
        self.clone().set(pointer, Value::Null).is_ok()
    }

    /// Puts `value` at `pointer`; Err when the pointer names no place here.
    pub fn set(&mut self, pointer: &Pointer, value: Value) -> Result<(), NoPlace> {
        let (last, parents) = pointer.tokens.split_last().ok_or(NoPlace)?;
        let mut node = &mut self.0;
        for token in parents {
            node = match node {
                Value::Object(map) => map.get_mut(token).ok_or(NoPlace)?,
                Value::Array(items) => items.get_mut(index(token)?).ok_or(NoPlace)?,
                _ => return Err(NoPlace),
            };
        }
        match node {
            Value::Object(map) => {
                map.insert(last.clone(), value);
                Ok(())
            }
            Value::Array(items) => {
                let slot = items.get_mut(index(last)?).ok_or(NoPlace)?;
                *slot = value;
                Ok(())
            }
            _ => Err(NoPlace),
        }
    }
}

/// A pointer that names no place in a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoPlace;

/// An array index token: digits without a leading zero (RFC 6901).
fn index(token: &str) -> Result<usize, NoPlace> {
    if token.is_empty() || (token.len() > 1 && token.starts_with('0')) || !token.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NoPlace);
    }
    token.parse().map_err(|_| NoPlace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_parse_with_escapes_and_only_into_kernel_or_params() {
        let p = Pointer::parse("/kernel/kernels/0/length_scale").unwrap();
        assert_eq!(p.tokens, ["kernel", "kernels", "0", "length_scale"]);
        assert_eq!(Pointer::parse("/params/a~1b~0c").unwrap().tokens, ["params", "a/b~c"]);
        for bad in ["", "kernel", "/", "/x/c", "/params/a~2", "/params/a~"] {
            assert!(Pointer::parse(bad).is_none(), "{bad}");
        }
        let k = Pointer::parse("/kernel").unwrap();
        assert!(k.is_prefix_of(&Pointer::parse("/kernel/gamma").unwrap()));
        assert!(!Pointer::parse("/params/c").unwrap().is_prefix_of(&Pointer::parse("/params/cache_mb").unwrap()));
        assert!(k.covers("/kernel/gamma") && !Pointer::parse("/params/c").unwrap().covers("/params/cache_mb"));
    }

    #[test]
    fn values_go_into_existing_places_or_left_out_fields() {
        let kernel = json!({"type": "sum", "kernels": [{"type": "rbf"}, {"type": "white"}]});
        let mut doc = Document::new(Some(&kernel), None);
        let at = |s: &str| Pointer::parse(s).unwrap();
        doc.set(&at("/kernel/kernels/0/length_scale"), json!(2.0)).unwrap();
        doc.set(&at("/params/lambda"), json!(0.5)).unwrap();
        assert_eq!(doc.kernel()["kernels"][0]["length_scale"], 2.0);
        assert_eq!(doc.params()["lambda"], 0.5);
        assert!(doc.set(&at("/kernel/kernels/2/length_scale"), json!(1)).is_err(), "no third part");
        assert!(doc.set(&at("/kernel/kernels/01"), json!(1)).is_err(), "leading zero");
        assert!(doc.set(&at("/kernel/type/x"), json!(1)).is_err(), "through a string");
        assert!(doc.set(&at("/params/missing/x"), json!(1)).is_err(), "through a missing place");
        doc.set(&at("/kernel"), json!({"type": "linear"})).unwrap();
        assert_eq!(doc.kernel(), &json!({"type": "linear"}));
        let plain = Document::new(None, None);
        assert_eq!(plain.kernel(), &json!({"type": "rbf"}));
        assert!(plain.has_place(&at("/kernel/gamma")));
    }
}
