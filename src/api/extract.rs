//! Request-body extraction: the body is parsed as JSON whatever its Content-Type (so that
//! `curl -d` works), and every failure comes back as our problem with a JSON pointer.

use super::problem::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

/// A JSON body of type `T`.
pub struct JsonBody<T>(pub T);

/// Bodies above this size are parsed on a blocking thread: a 64 MB training set takes
/// hundreds of milliseconds to parse, which must not stall the async runtime.
const INLINE_PARSE_MAX_BYTES: usize = 256 << 10;

impl<S: Send + Sync, T: DeserializeOwned + Send + 'static> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limit = req.extensions().get::<BodyLimit>().map_or(usize::MAX, |l| l.0);
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::BodyTooLarge { limit }
            } else {
                ApiError::MalformedBody {
                    pointer: String::new(),
                    message: format!("cannot read the body: {rejection}"),
                }
            }
        })?;
        if bytes.len() <= INLINE_PARSE_MAX_BYTES {
            return parse_json(&bytes).map(JsonBody);
        }
        tokio::task::spawn_blocking(move || parse_json(&bytes))
            .await
            .unwrap_or_else(|e| {
                Err(ApiError::MalformedBody { pointer: String::new(), message: format!("cannot parse the body: {e}") })
            })
            .map(JsonBody)
    }
}

/// The configured body limit, put into request extensions so rejections can name it.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit(pub usize);

/// Parses `bytes` as `T`, reporting where the document departs from `T`'s shape.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let mut pointer = String::new();
        for seg in e.path().iter() {
            match seg {
                Segment::Seq { index } => pointer.push_str(&format!("/{index}")),
                Segment::Map { key } => pointer.push_str(&format!("/{}", crate::spec::pointer_token(key))),
                Segment::Enum { .. } | Segment::Unknown => {}
            }
        }
        let inner = e.into_inner();
        let mut message = inner.to_string();
        // serde names a missing or unknown field in the message but points at its parent.
        for prefix in ["missing field `", "unknown field `"] {
            if let Some(rest) = message.strip_prefix(prefix) {
                if let Some(name) = rest.split('`').next() {
                    let token = format!("/{}", crate::spec::pointer_token(name));
                    if !pointer.ends_with(&token) {
                        pointer.push_str(&token);
                    }
                }
            }
        }
        if message.starts_with("data did not match any variant of untagged enum Target") {
            message = message
                .replace("data did not match any variant of untagged enum Target", "expected a number or a string");
        }
        ApiError::MalformedBody { pointer, message }
    })?;
    de.end().map_err(|e| ApiError::MalformedBody { pointer: String::new(), message: e.to_string() })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::types::TrainBody;

    fn pointer_of(body: &str) -> String {
        match parse_json::<TrainBody>(body.as_bytes()) {
            Err(ApiError::MalformedBody { pointer, .. }) => pointer,
            other => panic!("expected a malformed-body error, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn pointers_name_the_offending_place() {
        assert_eq!(pointer_of(r#"{"model":"kernel_ridge","x":[[1,2],[3,"a"]],"y":[1,2]}"#), "/x/1/1");
        assert_eq!(pointer_of(r#"{"model":"kernel_ridge","x":[[1e400]],"y":[1]}"#), "/x/0/0");
        assert_eq!(pointer_of(r#"{"x":[[1]],"y":[1]}"#), "/model");
        assert_eq!(pointer_of(r#"{"model":"kernel_ridge","x":[[1]],"y":[1],"colour":1}"#), "/colour");
        assert_eq!(pointer_of(r#"{"model":"kernel_ridge","x":[[1]],"y":[true]}"#), "/y/0");
        assert_eq!(pointer_of(r#"not json"#), "");
        assert_eq!(pointer_of(r#"{"model":"kernel_ridge","x":[[1]],"y":[1]} trailing"#), "");
    }
}
