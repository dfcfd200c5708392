//! Small helpers for talking to the service over HTTP: sending a request, reading an answer,
//! and the values the API's bodies carry.

use base64::Engine;
use chrono::{DateTime, Duration, FixedOffset, SecondsFormat, Utc};
use reqwest::header::HeaderMap;
use serde_json::Value;

/// Sends a request; returns its status and JSON body (`Null` when the body is not JSON).
pub async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let (status, _, body) = send_with_headers(request).await;
    (status, body)
}

/// [`send`], with the answer's headers too.
pub async fn send_with_headers(request: reqwest::RequestBuilder) -> (u16, HeaderMap, Value) {
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap_or(Value::Null))
}

/// Sends the requests at once, as concurrent clients would; asserts each answers 201 and
/// returns the ids they created, in the order they answered.
pub async fn post_together(requests: impl IntoIterator<Item = reqwest::RequestBuilder>) -> Vec<String> {
    let mut posts = tokio::task::JoinSet::new();
    for request in requests {
        posts.spawn(send(request));
    }
    let mut ids = Vec::new();
    while let Some(joined) = posts.join_next().await {
        let (status, body) = joined.expect("post");
        assert_eq!(status, 201, "{body}");
        ids.push(id(&body));
    }
    ids
}

/// The `id` of a body.
pub fn id(value: &Value) -> String {
    value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {value}"))
        .to_owned()
}

/// Standard base64 of `bytes`.
pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `now − hours`, in Paraguay's offset, RFC 3339.
pub fn hours_ago(hours: i64) -> String {
    in_paraguay(Utc::now() - Duration::hours(hours))
}

/// `t` in Paraguay's offset (−03:00), RFC 3339 to the second.
pub fn in_paraguay(t: DateTime<Utc>) -> String {
    let py = FixedOffset::west_opt(3 * 3600).expect("offset");
    t.with_timezone(&py).to_rfc3339_opts(SecondsFormat::Secs, false)
}

/// Asserts the status, the code and the contract's error body `{code, message, request_id}`.
pub fn error_code(status: u16, body: &Value, expected_status: u16, expected_code: &str) {
    assert_eq!(
        (status, body["code"].as_str()),
        (expected_status, Some(expected_code)),
        "{body}"
    );
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(
        body["request_id"].as_str().is_some_and(|r| !r.is_empty()),
        "{body}"
    );
}
