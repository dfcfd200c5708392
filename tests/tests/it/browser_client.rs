//! The WebDriver client on a real page of the service: headless Chromium opens the invitation
//! page of an unknown token, reads it, takes a screenshot and runs axe-core on it.

use axum::http::header;
use kuatia_tests::TestApp;
use kuatia_tests::browser::Browser;
use serde_json::Value;
use std::time::Duration;

/// A page served under a strict Content-Security-Policy and without a language: axe-core,
/// injected through WebDriver, must still run there and find the missing `lang`.
async fn strict_csp_page() -> (String, tokio::task::JoinHandle<()>) {
    let router = axum::Router::new().route(
        "/",
        axum::routing::get(|| async {
            (
                [(
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; script-src 'self'; style-src 'self'",
                )],
                axum::response::Html(
                    "<!doctype html><html><head><title>CSP</title></head>\
                     <body><main><h1>Estricta</h1></main></body></html>",
                ),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (base, server)
}

fn describe(violations: &[Value]) -> String {
    violations
        .iter()
        .map(|v| {
            format!(
                "{} ({}): {} — {}",
                v["id"].as_str().unwrap_or("?"),
                v["impact"].as_str().unwrap_or("?"),
                v["help"].as_str().unwrap_or(""),
                v["nodes"]
                    .as_array()
                    .map(|nodes| nodes
                        .iter()
                        .filter_map(|n| n["html"].as_str())
                        .collect::<Vec<_>>()
                        .join(" | "))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn headless_chromium_reads_the_invitation_page_and_axe_finds_nothing_serious() {
    let Some(browser) = Browser::start().await.expect("start the browser") else {
        eprintln!("notice: no chromedriver or Chromium here; the browser test did nothing");
        return;
    };
    let app = TestApp::spawn().await;

    browser
        .goto(&format!("{}/invitations/not-a-token", app.base))
        .await
        .expect("open the page");
    let h1 = browser
        .wait_for("h1", Duration::from_secs(5))
        .await
        .expect("a heading");
    assert_eq!(h1.text().await.expect("text"), "Invitación no encontrada");
    assert_eq!(
        browser.title().await.expect("title"),
        "Invitación no encontrada · kuatia"
    );
    assert!(
        browser
            .current_url()
            .await
            .expect("url")
            .ends_with("/invitations/not-a-token")
    );
    assert_eq!(
        browser
            .find("html")
            .await
            .expect("html")
            .attribute("lang")
            .await
            .expect("lang"),
        Some("es-PY".into())
    );
    assert!(!browser.exists("form").await.expect("query"));
    let missing = browser.find("#nothing-here").await.expect_err("no such element");
    assert!(
        missing.to_string().contains("#nothing-here") && missing.to_string().contains("/invitations/"),
        "{missing}"
    );
    assert_eq!(
        browser
            .execute("return navigator.languages;", vec![])
            .await
            .expect("script"),
        serde_json::json!(["es-PY", "es"])
    );

    let png = browser.screenshot_png().await.expect("screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");

    let violations = browser.axe().await.expect("axe");
    assert!(
        violations.is_empty(),
        "serious or critical accessibility violations:\n{}",
        describe(&violations)
    );

    // axe-core is injected as a WebDriver script, which the page's CSP does not govern; the
    // page without `lang` proves it ran rather than found nothing.
    let axe_installed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("browser/node_modules/axe-core/axe.min.js")
        .exists();
    let (strict, server) = strict_csp_page().await;
    browser
        .goto(&format!("{strict}/"))
        .await
        .expect("open the strict page");
    let found = browser.axe().await.expect("axe under a strict CSP");
    if axe_installed {
        assert!(
            found.iter().any(|v| v["id"] == "html-has-lang"),
            "axe should report the missing lang:\n{}",
            describe(&found)
        );
    }
    server.abort();

    browser.quit().await.expect("quit");
    app.stop().await;
}
