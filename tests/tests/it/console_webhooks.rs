//! The console's webhooks page over plain HTTP, against a real receiver on a local port: an
//! endpoint made with its secret shown once, a refused URL said by field with what was typed
//! kept, a test that arrives signed (checked by `tests/scripts/verify_webhook.py`) and one that
//! does not, a delivery's payload and every attempt, replays of the chosen deliveries that
//! arrive again with the same id and body, rotation, deactivation; a viewer sees no action and
//! is refused one; another tenant's user finds nothing. The browser drives the same pages in
//! `console_browser`.

use crate::console::{Visitor, flash, hidden, input_value, row_id, service_with_an_accepted_invoice};
use crate::webhooks::{Inbox, start_receiver, verify};
use std::time::Duration;

const PASSWORD: &str = "a long enough secret";

/// Waits until the receiver has `n` requests.
async fn received(inbox: &Inbox, n: usize) -> Vec<crate::webhooks::Received> {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let got = inbox.all();
        if got.len() >= n {
            return got;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {n} requests arrived",
            got.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_endpoint_made_in_the_console_is_tested_its_deliveries_read_and_replayed_signed() {
    let (f, _doc) = service_with_an_accepted_invoice().await;
    let inbox = Inbox::default();
    let (port, _server) = start_receiver(inbox.clone(), 0).await;
    let url = format!("http://127.0.0.1:{port}/hook");
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let page = v.get("/console/webhooks").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("aria-current=\"page\">Webhooks") && page.body.contains("id=\"no-endpoints\"")
    );
    let csrf = hidden(&page.body, "csrf");

    // A URL the API refuses is said by field, and what was typed stays.
    let refused = v
        .post(
            "/console/webhooks",
            &[
                ("csrf", &csrf),
                ("url", "ftp://erp.example.com/hook"),
                ("description", "ERP de la oficina"),
                ("events", "document.accepted"),
            ],
        )
        .await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    let problem = refused
        .body
        .split("id=\"webhooks-problem\" role=\"alert\">")
        .nth(1)
        .and_then(|r| r.split('<').next())
        .unwrap_or_else(|| panic!("no problem said: {}", refused.body));
    assert!(problem.starts_with("url: "), "{problem}");
    assert_eq!(
        input_value(&refused.body, "endpoint-url"),
        "ftp://erp.example.com/hook"
    );
    assert_eq!(
        input_value(&refused.body, "endpoint-description"),
        "ERP de la oficina"
    );
    assert!(
        refused.body.contains("value=\"document.accepted\" checked"),
        "the events chosen stay"
    );
    assert!(
        !refused
            .body
            .contains("id=\"events-all\" name=\"all\" type=\"checkbox\" value=\"1\" checked")
    );

    // Made: the secret is on the answer itself, once, never cached.
    let made = v
        .post(
            "/console/webhooks",
            &[
                ("csrf", &csrf),
                ("url", &url),
                ("description", "ERP de la oficina"),
                ("events", "document.accepted"),
                ("events", "webhook.test"),
            ],
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(made.headers["cache-control"], "no-store");
    let secret = input_value(&made.body, "once-value");
    assert!(secret.starts_with("whsec_"), "{secret}");
    let endpoint = row_id(&made.body, "endpoint", &url);
    assert!(
        made.body.contains("document.accepted, webhook.test"),
        "{}",
        made.body
    );
    let again = v.get("/console/webhooks").await;
    assert!(!again.body.contains(&secret), "the secret is shown once");

    // A test arrives signed with that secret, and says so.
    let tested = v
        .post(&format!("/console/webhooks/{endpoint}/test"), &[("csrf", &csrf)])
        .await;
    assert_eq!(
        (tested.status, tested.location.as_deref()),
        (303, Some("/console/webhooks"))
    );
    assert_eq!(
        flash(&v.get("/console/webhooks").await),
        "La prueba llegó: respondió HTTP 200."
    );
    let got = received(&inbox, 1).await;
    assert_eq!(got[0].event, "webhook.test");
    assert!(verify(&got[0], &[&secret]), "signed with the secret shown");

    // The receiver fails the next test: said, and listed as failed.
    inbox.answer(500);
    v.post(&format!("/console/webhooks/{endpoint}/test"), &[("csrf", &csrf)])
        .await;
    assert_eq!(
        flash(&v.get("/console/webhooks").await),
        "La prueba no llegó: respondió HTTP 500."
    );
    inbox.answer(0);
    let failed = v
        .get(&format!("/console/webhooks/{endpoint}?status=failed"))
        .await;
    assert_eq!(failed.status, 200, "{}", failed.body);
    assert_eq!(
        failed.body.matches("class=\"delivery-row\"").count(),
        1,
        "{}",
        failed.body
    );
    let failed_id = row_id(&failed.body, "delivery", "fallido");
    let delivered = v
        .get(&format!("/console/webhooks/{endpoint}?status=delivered"))
        .await;
    let delivered_id = row_id(&delivered.body, "delivery", "entregado");

    // A delivery's page: its payload as sent and every attempt's answer.
    let detail = v
        .get(&format!("/console/webhooks/{endpoint}/deliveries/{failed_id}"))
        .await;
    assert_eq!(detail.status, 200, "{}", detail.body);
    let payload = detail
        .body
        .split("id=\"payload\" tabindex=\"0\">")
        .nth(1)
        .and_then(|r| r.split("</pre>").next())
        .expect("the payload")
        .replace("&#34;", "\"")
        .replace("&quot;", "\"");
    let payload: serde_json::Value = serde_json::from_str(&payload).expect("the payload is the JSON sent");
    assert_eq!(payload["type"], "webhook.test");
    assert_eq!(payload["data"]["endpoint_id"], endpoint.as_str());
    assert_eq!(detail.body.matches("class=\"attempt-row\"").count(), 1);
    assert!(detail.body.contains("respondió HTTP 500"), "{}", detail.body);

    // Both replayed at once: each arrives again, the same id and body, signed.
    let before = inbox.all().len();
    let replayed = v
        .post(
            &format!("/console/webhooks/{endpoint}/replay"),
            &[
                ("csrf", &csrf),
                ("back", &format!("/console/webhooks/{endpoint}")),
                ("delivery_id", &failed_id),
                ("delivery_id", &delivered_id),
            ],
        )
        .await;
    assert_eq!(
        (replayed.status, replayed.location.clone()),
        (303, Some(format!("/console/webhooks/{endpoint}")))
    );
    assert!(
        flash(&v.get(&format!("/console/webhooks/{endpoint}")).await).starts_with("Envíos reenviados: 2.")
    );
    let got = received(&inbox, before + 2).await;
    for again in &got[before..] {
        let original = got[..before]
            .iter()
            .find(|r| r.id == again.id)
            .expect("a replay of a delivery sent before");
        assert_eq!(original.body, again.body, "the same body");
        assert!(verify(again, &[&secret]));
    }
    // The failed one's page now holds both rounds: the 500, then the replay's 200.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let detail = v
            .get(&format!("/console/webhooks/{endpoint}/deliveries/{failed_id}"))
            .await;
        if detail.body.matches("class=\"attempt-row\"").count() == 2 {
            assert!(detail.body.contains("respondió HTTP 200"), "{}", detail.body);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", detail.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A replay form that points elsewhere comes back to the endpoint, never away.
    let away = v
        .post(
            &format!("/console/webhooks/{endpoint}/replay"),
            &[
                ("csrf", &csrf),
                ("back", "https://evil.example"),
                ("delivery_id", &failed_id),
            ],
        )
        .await;
    assert_eq!(away.location, Some(format!("/console/webhooks/{endpoint}")));
    // Nothing chosen: said, nothing sent.
    let none = v
        .post(
            &format!("/console/webhooks/{endpoint}/replay"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(none.status, 303);
    assert_eq!(
        flash(&v.get(&format!("/console/webhooks/{endpoint}")).await),
        "Elegí al menos un envío para reenviar."
    );
    // Without the form's token: refused.
    let forged = v
        .post(
            &format!("/console/webhooks/{endpoint}/replay"),
            &[("delivery_id", &failed_id)],
        )
        .await;
    assert_eq!(forged.status, 403);

    // Rotated: a new secret, once; the old one still signs for a while.
    let rotated = v
        .post(
            &format!("/console/webhooks/{endpoint}/rotate"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new_secret = input_value(&rotated.body, "once-value");
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);
    assert!(rotated.body.contains("el secreto anterior también firma hasta"));

    // Deactivated, then active again.
    let off = v
        .post(
            &format!("/console/webhooks/{endpoint}/active"),
            &[("csrf", &csrf), ("active", "false")],
        )
        .await;
    assert_eq!(off.status, 303);
    let page = v.get("/console/webhooks").await;
    assert!(flash(&page).starts_with("Dirección desactivada"), "{}", page.body);
    assert!(page.body.contains("desactivada</span>"));
    v.post(
        &format!("/console/webhooks/{endpoint}/active"),
        &[("csrf", &csrf), ("active", "true")],
    )
    .await;
    let (_, listed) = kuatia_tests::send(f.req(reqwest::Method::GET, "/v1/webhooks")).await;
    assert_eq!(listed[0]["active"], true, "{listed}");

    // A viewer reads the deliveries but is offered no action, and is refused one anyway.
    let mut viewer = Visitor::new(&f.app.base);
    viewer.log_in("consulta@example.com.py", PASSWORD).await;
    let seen = viewer.get(&format!("/console/webhooks/{endpoint}")).await;
    assert_eq!(seen.status, 200, "{}", seen.body);
    assert!(seen.body.contains("class=\"delivery-row\""));
    for action in ["replay-chosen", "name=\"delivery_id\""] {
        assert!(!seen.body.contains(action), "a viewer sees no {action}");
    }
    let list = viewer.get("/console/webhooks").await;
    assert!(!list.body.contains("endpoint-form") && !list.body.contains("test-endpoint"));
    let viewer_csrf = hidden(&list.body, "csrf");
    let refused = viewer
        .post(
            &format!("/console/webhooks/{endpoint}/replay"),
            &[("csrf", &viewer_csrf), ("delivery_id", &failed_id)],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);

    // Another tenant's owner finds none of it.
    let (tenant_b, key_b) = f.app.tenant("otra").await;
    crate::identity::join(&f.app, &tenant_b, &key_b, "otro@example.com.py", "owner").await;
    let mut other = Visitor::new(&f.app.base);
    other.log_in("otro@example.com.py", PASSWORD).await;
    for path in [
        format!("/console/webhooks/{endpoint}"),
        format!("/console/webhooks/{endpoint}/deliveries/{failed_id}"),
    ] {
        assert_eq!(other.get(&path).await.status, 404, "{path}");
    }
    let other_csrf = hidden(&other.get("/console/webhooks").await.body, "csrf");
    for action in ["test", "rotate", "delete"] {
        let answer = other
            .post(
                &format!("/console/webhooks/{endpoint}/{action}"),
                &[("csrf", &other_csrf)],
            )
            .await;
        assert_eq!(answer.status, 404, "{action}: {}", answer.body);
    }

    // Deleted: gone from the list.
    let deleted = v
        .post(
            &format!("/console/webhooks/{endpoint}/delete"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(deleted.status, 303);
    let page = v.get("/console/webhooks").await;
    assert_eq!(flash(&page), "Dirección eliminada.");
    assert!(!page.body.contains(&url));
    f.app.stop().await;
}
