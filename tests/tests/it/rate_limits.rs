//! Rate limits: bucket `requests_minute` per API key and per IP, counted across
//! instances, with `X-RateLimit-*` headers and 429 + `Retry-After`.

use kuatia_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// Windows are whole minutes: start a test early enough in one that it cannot straddle two.
async fn away_from_a_window_edge() {
    let second = chrono::Utc::now().timestamp() % 60;
    if second > 50 {
        tokio::time::sleep(Duration::from_secs((61 - second) as u64)).await;
    }
}

fn header(response: &reqwest::Response, name: &str) -> Option<i64> {
    response.headers().get(name)?.to_str().ok()?.parse().ok()
}

#[tokio::test]
async fn each_api_key_has_its_own_bucket_and_a_spent_one_answers_429() {
    away_from_a_window_edge().await;
    let app = TestApp::spawn_with(|c| c.rate_limit_per_key = 5).await;
    let (tenant, owner) = app.tenant("acme").await;
    let (_, other) = {
        let r = app
            .as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "other", "role": "viewer"}))
            .send()
            .await
            .expect("post");
        (r.status(), r.json::<Value>().await.expect("json"))
    };
    // The key creation above was the owner's first request.
    let mut remaining = Vec::new();
    for _ in 0..4 {
        let r = app
            .as_key(Method::GET, "/v1/api-keys/current", &owner, &tenant)
            .send()
            .await
            .expect("get");
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-ratelimit-limit"), Some(5));
        remaining.push(header(&r, "x-ratelimit-remaining").expect("remaining"));
        assert!(header(&r, "x-ratelimit-reset").expect("reset") > chrono::Utc::now().timestamp());
    }
    assert_eq!(remaining, vec![3, 2, 1, 0]);
    let spent = app
        .as_key(Method::GET, "/v1/api-keys/current", &owner, &tenant)
        .send()
        .await
        .expect("get");
    assert_eq!(spent.status(), 429);
    let retry_after = header(&spent, "retry-after").expect("Retry-After");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(header(&spent, "x-ratelimit-remaining"), Some(0));
    let body: Value = spent.json().await.expect("json");
    assert_eq!(body["code"], "rate_limit_error");
    assert_eq!(body["details"]["bucket"], "requests_minute");
    assert_eq!(body["details"]["limit"], 5);
    assert!(body["details"]["reset_at"].is_string());

    let other_key = other["key"].as_str().expect("key");
    let fresh = app
        .as_key(Method::GET, "/v1/api-keys/current", other_key, &tenant)
        .send()
        .await
        .expect("get");
    assert_eq!(fresh.status(), 200, "another key has its own bucket");
    app.stop().await;
}

#[tokio::test]
async fn unauthenticated_endpoints_count_against_the_callers_ip() {
    away_from_a_window_edge().await;
    let app = TestApp::spawn_with(|c| c.rate_limit_per_ip = 3).await;
    for i in 0..3 {
        let r = app
            .client
            .post(format!("{}/v1/users", app.base))
            .json(&json!({"email": format!("u{i}@example.com"), "password": "long enough secret"}))
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), 201);
        assert_eq!(header(&r, "x-ratelimit-limit"), Some(3));
    }
    let login = app
        .client
        .post(format!("{}/v1/auth/login", app.base))
        .json(&json!({"email": "u0@example.com", "password": "long enough secret"}))
        .send()
        .await
        .expect("post");
    assert_eq!(login.status(), 429, "login shares the IP's bucket");
    let health = app.get("/health").await;
    assert_eq!(health.status(), 200, "health is never limited");
    assert!(health.headers().get("x-ratelimit-limit").is_none());
    app.stop().await;
}

#[tokio::test]
async fn a_second_instance_sees_what_the_first_counted() {
    away_from_a_window_edge().await;
    let app = TestApp::spawn_with(|c| c.rate_limit_per_key = 6).await;
    let (tenant, key) = app.tenant("acme").await;
    let second = app.second_instance(|c| c.rate_limit_per_key = 6).await;
    let second_base = format!("http://{}", second.addr);
    for _ in 0..4 {
        let r = app
            .as_key(Method::GET, "/v1/api-keys/current", &key, &tenant)
            .send()
            .await
            .expect("get");
        assert_eq!(r.status(), 200);
    }
    // The first instance adds its counts to the shared row within a second.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let r = app
            .client
            .get(format!("{second_base}/v1/api-keys/current"))
            .bearer_auth(&key)
            .header("X-Tenant-Id", &tenant)
            .send()
            .await
            .expect("get");
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses, vec![200, 200, 429], "6 in all across both instances");
    second.stop().await.expect("stop");
    app.stop().await;
}

#[tokio::test]
async fn minting_more_keys_does_not_multiply_a_tenant_s_rate_limit() {
    // 5 a minute per key, 8 per tenant: two fresh keys spend the tenant's ceiling between them,
    // and a third, untouched key is refused at once.
    away_from_a_window_edge().await;
    let app = TestApp::spawn_with(|c| {
        c.rate_limit_per_key = 5;
        c.rate_limit_per_tenant = 8;
    })
    .await;
    let (tenant, owner) = app.tenant("ceiling").await;
    let mut keys = Vec::new();
    for n in 0..3 {
        let r = app
            .as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": format!("k{n}"), "role": "viewer"}))
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), 201);
        keys.push(
            r.json::<Value>().await.expect("json")["key"]
                .as_str()
                .expect("key")
                .to_owned(),
        );
    }
    // The owner's three requests count: 5 left for the tenant.
    let get = |key: String| {
        let (app, tenant) = (&app, tenant.clone());
        async move {
            app.as_key(Method::GET, "/v1/api-keys/current", &key, &tenant)
                .send()
                .await
                .expect("get")
        }
    };
    for key in [&keys[0], &keys[0], &keys[0], &keys[1], &keys[1]] {
        let r = get(key.clone()).await;
        assert_eq!(r.status(), 200);
    }
    let last = get(keys[1].clone()).await;
    assert_eq!(last.status(), 429, "the tenant's ceiling is spent");
    let fresh = get(keys[2].clone()).await;
    assert_eq!(fresh.status(), 429, "a fresh key of the tenant too");
    assert_eq!(header(&fresh, "x-ratelimit-limit"), Some(8));
    assert!(header(&fresh, "retry-after").is_some());
    // Another tenant is not affected.
    let (other, other_owner) = app.tenant("elsewhere").await;
    let r = app
        .as_key(Method::GET, "/v1/api-keys/current", &other_owner, &other)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 200);
    app.stop().await;
}
