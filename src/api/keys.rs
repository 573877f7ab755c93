//! API keys with scopes: what `MERCER_API_KEYS` holds, and which key a bearer token is.
//!
//! An entry is `[NAME=]SECRET[:SCOPE]`, entries separated by commas:
//! - `SECRET` is the token itself, or `sha256:<64 hex digits>`, the SHA-256 digest of
//!   the token, so that a config file need not hold the secret;
//! - `SCOPE` is `predict` (read and predict), `train` (also fit, append, upload, run
//!   studies) or `admin` (also delete, and set aliases); without one the key may do
//!   everything, as a bare token always could;
//! - `NAME` (1 to 64 of `[A-Za-z0-9._-]`) labels the key in the audit log; without one a
//!   key is `key1`, `key2`, ... by its place in the list. The token is never logged.
//!
//! A token that itself contains `=` or `:` stays a bare token unless the text around them
//! reads as above: `NAME=` needs a valid name and something after it other than more
//! `=` (base64 padding), and `:SCOPE` only a known scope.

use sha2::{Digest, Sha256};
use std::fmt;

/// The name of the key a request was let in with, on its response: the request's log
/// line (the audit record of a mutation) names it.
#[derive(Clone)]
pub struct KeyName(pub String);

/// What a key may do; each scope includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Predict,
    Train,
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Predict, Scope::Train, Scope::Admin];

    pub fn name(self) -> &'static str {
        match self {
            Scope::Predict => "predict",
            Scope::Train => "train",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| scope.name() == s)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

enum Secret {
    Token(Vec<u8>),
    Sha256([u8; 32]),
}

/// One configured key. Its Debug shows the name and scope, never the secret.
pub struct ApiKey {
    pub name: String,
    pub scope: Scope,
    secret: Secret,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey").field("name", &self.name).field("scope", &self.scope).finish_non_exhaustive()
    }
}

/// The configured keys; empty means authentication is off.
#[derive(Debug, Default)]
pub struct KeyRing {
    keys: Vec<ApiKey>,
    /// No token is any key (a ring whose entries could not be read).
    closed: bool,
}

impl KeyRing {
    /// Parses the comma-separated entries of `MERCER_API_KEYS`; the error names the
    /// entry by its place (never by its text, which may be a secret).
    pub fn parse(entries: &str) -> Result<KeyRing, String> {
        let mut keys: Vec<ApiKey> = Vec::new();
        for (i, entry) in entries.split(',').map(str::trim).filter(|e| !e.is_empty()).enumerate() {
            let key = parse_entry(entry, i + 1).map_err(|why| format!("MERCER_API_KEYS entry {}: {why}", i + 1))?;
            if keys.iter().any(|k| k.name == key.name) {
                return Err(format!("MERCER_API_KEYS entry {}: the name `{}` is given twice", i + 1, key.name));
            }
            keys.push(key);
        }
        Ok(KeyRing { keys, closed: false })
    }

    /// A ring that no token opens.
    pub fn refusing() -> KeyRing {
        KeyRing { keys: Vec::new(), closed: true }
    }

    /// Whether authentication is off.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && !self.closed
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The key this token is, if any. Every key is compared, each in time independent of
    /// where it differs; the token is hashed once when digests are configured.
    pub fn find(&self, token: &str) -> Option<&ApiKey> {
        let digest: Option<[u8; 32]> =
            self.keys.iter().any(|k| matches!(k.secret, Secret::Sha256(_))).then(|| Sha256::digest(token).into());
        let mut found = None;
        for key in &self.keys {
            let same = match (&key.secret, &digest) {
                (Secret::Token(t), _) => constant_time_eq(token.as_bytes(), t),
                (Secret::Sha256(d), Some(got)) => constant_time_eq(got, d),
                (Secret::Sha256(_), None) => false,
            };
            if same && found.is_none() {
                found = Some(key);
            }
        }
        found
    }
}

/// `MERCER_API_KEYS` as `mercer config` shows it: each entry's name and scope, never its
/// secret nor its digest (`NAME=<redacted>:SCOPE`; an entry that cannot be read, by its
/// place).
pub fn redacted(entries: &str) -> String {
    entries
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .enumerate()
        .map(|(i, entry)| match parse_entry(entry, i + 1) {
            Ok(key) => format!("{}=<redacted>:{}", key.name, key.scope),
            Err(_) => format!("<entry {} unreadable>", i + 1),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_entry(entry: &str, place: usize) -> Result<ApiKey, String> {
    let (name, rest) = match entry.split_once('=') {
        Some((name, rest)) if is_name(name) && !rest.is_empty() && !rest.starts_with('=') => (name.to_string(), rest),
        _ => (format!("key{place}"), entry),
    };
    let (secret, scope) = match rest.rsplit_once(':').and_then(|(s, scope)| Some((s, Scope::parse(scope)?))) {
        Some((secret, scope)) => (secret, scope),
        None => (rest, Scope::Admin),
    };
    if secret.is_empty() {
        return Err("the token is empty".into());
    }
    let secret = match secret.strip_prefix("sha256:") {
        Some(hex) => Secret::Sha256(parse_digest(hex).ok_or("`sha256:` takes the digest as 64 hex digits")?),
        None => Secret::Token(secret.as_bytes().to_vec()),
    };
    Ok(ApiKey { name, scope, secret })
}

fn is_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Equality in time that depends on the lengths only.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(entry: &str) -> (String, Scope) {
        let ring = KeyRing::parse(entry).unwrap();
        assert_eq!(ring.len(), 1, "{entry}");
        let k = &ring.keys[0];
        (k.name.clone(), k.scope)
    }

    #[test]
    fn entries_carry_names_scopes_and_digests() {
        assert_eq!(one("tok"), ("key1".into(), Scope::Admin));
        assert_eq!(one("tok:predict"), ("key1".into(), Scope::Predict));
        assert_eq!(one("ci=tok:train"), ("ci".into(), Scope::Train));
        assert_eq!(one("ops.team-1=tok:admin"), ("ops.team-1".into(), Scope::Admin));
        // Bare tokens that merely contain the separators stay bare and all-powerful.
        assert_eq!(one("abc=="), ("key1".into(), Scope::Admin));
        assert_eq!(one("a:b"), ("key1".into(), Scope::Admin));
        assert_eq!(one("we ird=x"), ("key1".into(), Scope::Admin));
        let ring = KeyRing::parse("a:predict, b:train ,c").unwrap();
        assert_eq!(ring.find("a").map(|k| (k.name.as_str(), k.scope)), Some(("key1", Scope::Predict)));
        assert_eq!(ring.find("b").map(|k| (k.name.as_str(), k.scope)), Some(("key2", Scope::Train)));
        assert_eq!(ring.find("c").map(|k| k.scope), Some(Scope::Admin));
        assert!(ring.find("a:predict").is_none() && ring.find("d").is_none() && ring.find("").is_none());
        assert!(ring.find("abc==").is_none());
        assert_eq!(KeyRing::parse("abc==").unwrap().find("abc==").map(|k| k.scope), Some(Scope::Admin));
    }

    #[test]
    fn digests_match_the_token_they_hash() {
        let hex = |t: &str| -> String { Sha256::digest(t).iter().map(|b| format!("{b:02x}")).collect() };
        let computed = hex("s3cret");
        // The digest as `sha256sum` prints it for the text "abc" (FIPS 180-2's example).
        assert_eq!(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let ring = KeyRing::parse(&format!("auditor=sha256:{computed}:predict,other=sha256:{}", hex("other"))).unwrap();
        assert_eq!(ring.find("other").map(|k| k.scope), Some(Scope::Admin));
        let upper = KeyRing::parse(&format!("sha256:{}", computed.to_uppercase())).unwrap();
        assert!(upper.find("s3cret").is_some(), "hex digits in either case");
        assert_eq!(ring.find("s3cret").map(|k| (k.name.as_str(), k.scope)), Some(("auditor", Scope::Predict)));
        assert!(ring.find(&computed).is_none(), "the digest itself is not a token");
        assert!(ring.find(&format!("sha256:{computed}")).is_none());
    }

    #[test]
    fn bad_entries_fail_naming_the_place_not_the_secret() {
        for (entries, want) in [
            ("a,sha256:abc", "entry 2: `sha256:` takes"),
            ("n=:train", "entry 1: the token is empty"),
            (":admin", "entry 1: the token is empty"),
            ("x=a,x=b", "entry 2: the name `x` is given twice"),
        ] {
            let e = KeyRing::parse(entries).unwrap_err();
            assert!(e.contains(want), "{entries}: {e}");
        }
        let e = KeyRing::parse("x=sha256:zz").unwrap_err();
        assert!(!e.contains("zz"), "{e}");
        assert!(KeyRing::parse(" , ,").unwrap().is_empty());
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn shown_keys_keep_names_and_scopes_not_secrets() {
        let digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let entries = format!("dash=sha256:{digest}:predict, ci=ci-token:train,plain-secret,,bad=sha256:12");
        let shown = redacted(&entries);
        assert_eq!(shown, "dash=<redacted>:predict,ci=<redacted>:train,key3=<redacted>:admin,<entry 4 unreadable>");
        for secret in [digest, "ci-token", "plain-secret", "sha256:12"] {
            assert!(!shown.contains(secret), "{secret} shown in {shown}");
        }
        assert_eq!(redacted(""), "");
    }
}
