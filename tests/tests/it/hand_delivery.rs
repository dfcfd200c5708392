//! Delivery by hand, black-box over HTTP: a document whose delivery is `manual` waits in
//! `GET /v1/documents?delivery=pending_manual` until the issuer records how it was delivered
//! (`POST /v1/documents/{id}/deliveries`), which shows on its timeline with the caller as actor;
//! and the public link the issuer sends a customer (`/p/{token}`): long-lived, unguessable,
//! revocable.

use kuatia_infrastructure::sifen_sim::SimConfig;
use kuatia_tests::{Simulated, error_code, id, send};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// A document that was never accepted (its total does not add up: `validation_failed`).
async fn never_accepted(f: &Simulated, external_id: &str) -> String {
    let mut invalid = f.invoice(external_id);
    invalid["totals"]["grand_total"] = json!(1);
    let (status, created) = f.try_post(&invalid).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["status"], "validation_failed", "{created}");
    id(&created)
}

/// An invoice whose customer and issuer deliveries are manual, taken to `accepted`; waits until
/// its deliveries are planned (it shows in the pending list).
async fn accepted_manual(f: &Simulated, external_id: &str) -> String {
    let mut doc = f.invoice(external_id);
    doc["delivery"] = json!({
        "customer": {"mode": "manual", "channels": ["email"], "email": "cliente@example.com"},
        "issuer": {"mode": "manual", "channels": ["email"], "emails": ["contabilidad@example.com.py"]}
    });
    let doc = f.post(&doc).await;
    f.wait_status(&doc, "accepted", Duration::from_secs(30)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !f.ids("?delivery=pending_manual").await.contains(&doc) {
        assert!(
            std::time::Instant::now() < deadline,
            "{doc} never waited for a hand delivery"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    doc
}

async fn deliver(f: &Simulated, doc: &str, body: Value) -> (u16, Value) {
    send(
        f.req(Method::POST, &format!("/v1/documents/{doc}/deliveries"))
            .json(&body),
    )
    .await
}

#[tokio::test]
async fn a_manual_delivery_waits_until_the_issuer_records_it_then_leaves_the_pending_list() {
    let f = Simulated::named("hand", SimConfig::default(), |_| {}).await;
    let waiting = accepted_manual(&f, "HAND-1").await;
    let automatic = f.post(&f.invoice("HAND-2")).await;
    f.wait_status(&automatic, "accepted", Duration::from_secs(30))
        .await;
    let pending = f.ids("?delivery=pending_manual").await;
    assert_eq!(
        pending,
        std::slice::from_ref(&waiting),
        "only the manual one waits"
    );

    // The customer's copy, handed over at the counter.
    let (status, body) = deliver(
        &f,
        &waiting,
        json!({"channel": "in_person", "recipient": "  Juan Pérez  ", "note": "firmó el recibo"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["target"], "customer");
    assert_eq!(body["channel"], "in_person");
    assert_eq!(body["recipient"], "Juan Pérez", "trimmed");
    assert_eq!(body["settled"].as_array().map(Vec::len), Some(1), "{body}");
    // The issuer's own copy still waits.
    assert_eq!(
        f.ids("?delivery=pending_manual").await,
        std::slice::from_ref(&waiting)
    );
    let (status, body) = deliver(
        &f,
        &waiting,
        json!({"target": "issuer", "channel": "email", "recipient": "contabilidad@example.com.py"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert!(f.ids("?delivery=pending_manual").await.is_empty());
    // The filter combines with the others.
    assert!(f.ids("?delivery=pending_manual&status=accepted").await.is_empty());

    // On the timeline, with who recorded it.
    let timeline = f.timeline(&waiting).await;
    let by_hand: Vec<&Value> = timeline
        .iter()
        .filter(|e| e["type"] == "DeliveredByHand")
        .collect();
    assert_eq!(by_hand.len(), 2, "{timeline:?}");
    assert_eq!(by_hand[0]["data"]["DeliveredByHand"]["note"], "firmó el recibo");
    assert_eq!(by_hand[0]["actor"]["type"], "api_key", "{}", by_hand[0]);
    // A rebuild of the read model from the events leaves the same rows.
    let database = f.app.db.open().await;
    let sql = "SELECT CAST(id AS TEXT), CAST(document_id AS TEXT), target, channel, \
               CAST(pending AS TEXT), CAST(updated_at AS TEXT) FROM document_manual_deliveries ORDER BY id";
    let rows = kuatia_tests::snapshot(&database, sql).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    crate::documents::rebuilt_read_model(&database).await;
    assert_eq!(
        kuatia_tests::snapshot(&database, sql).await,
        rows,
        "as written == rebuilt"
    );
    assert!(f.ids("?delivery=pending_manual").await.is_empty());
    // Recorded again (another copy handed over): a record, settling nothing.
    let (status, body) = deliver(&f, &waiting, json!({"channel": "printed"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["settled"], json!([]));
    f.app.stop().await;
}

#[tokio::test]
async fn a_delivery_by_hand_is_refused_clearly_when_it_cannot_be_recorded() {
    let f = Simulated::named("hand-refusals", SimConfig::default(), |_| {}).await;
    let doc = accepted_manual(&f, "HAND-R1").await;
    for (body, field) in [
        (json!({"channel": "pigeon"}), None),
        (json!({"recipient": "x"}), None),
        (json!({"channel": "email", "colour": "red"}), None),
        (
            json!({"channel": "email", "recipient": "ñ".repeat(201)}),
            Some("recipient"),
        ),
        (json!({"channel": "email", "note": "n".repeat(501)}), Some("note")),
    ] {
        let (status, answer) = deliver(&f, &doc, body.clone()).await;
        error_code(status, &answer, 400, "validation_error");
        if let Some(field) = field {
            assert_eq!(answer["details"]["errors"][0]["field"], field, "{answer}");
            assert_eq!(answer["details"]["errors"][0]["code"], "too_long", "{answer}");
        }
    }
    let (status, answer) = send(f.req(Method::GET, "/v1/documents?delivery=everything")).await;
    assert_eq!(status, 400, "{answer}");
    // Nothing was recorded by the refusals: it still waits.
    assert_eq!(
        f.ids("?delivery=pending_manual").await,
        std::slice::from_ref(&doc)
    );

    // A document that is not accepted has nothing delivered.
    let refused = never_accepted(&f, "HAND-R2").await;
    let (status, answer) = deliver(&f, &refused, json!({"channel": "printed"})).await;
    error_code(status, &answer, 409, "conflict_error");

    // A viewer may not; another tenant does not see the document.
    let (secret, _) = f.api_key("viewer", None).await;
    let (status, answer) = send(
        f.app
            .as_key(
                Method::POST,
                &format!("/v1/documents/{doc}/deliveries"),
                &secret,
                &f.r.tenant,
            )
            .json(&json!({"channel": "printed"})),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    let other = f.app.ready_at("hand-other", &f.sim.base_url()).await;
    let (status, answer) = send(
        other
            .req(Method::POST, &format!("/v1/documents/{doc}/deliveries"))
            .json(&json!({"channel": "printed"})),
    )
    .await;
    assert_eq!(status, 404, "{answer}");
    assert_eq!(f.ids("?delivery=pending_manual").await, [doc]);
    f.app.stop().await;
}

#[tokio::test]
async fn a_public_link_serves_the_kude_until_it_is_revoked_or_expires() {
    let f = Simulated::named("links", SimConfig::default(), |c| c.public_link_days = 30).await;
    let doc = f.post(&f.invoice("LINK-1")).await;
    f.wait_status(&doc, "accepted", Duration::from_secs(30)).await;
    let kude_sha = f.wait_recorded(&doc, "kude", 1, Duration::from_secs(60)).await;
    let links = format!("/v1/documents/{doc}/public-links");

    let before = chrono::Utc::now();
    let (status, made) = send(f.req(Method::POST, &links)).await;
    assert_eq!(status, 201, "{made}");
    let url = made["url"].as_str().expect("the url, once").to_owned();
    let token = url.rsplit("/p/").next().expect("a /p/ path").to_owned();
    assert_eq!(token.len(), 43, "{url}");
    assert!(url.starts_with("http://"), "absolute: {url}");
    let expires: chrono::DateTime<chrono::Utc> = made["expires_at"]
        .as_str()
        .expect("expires_at")
        .parse()
        .expect("a time");
    let days = (expires - before).num_hours() as f64 / 24.0;
    assert!((29.9..=30.1).contains(&days), "{days} days");

    // The customer opens it with no credentials: the very KuDE stored, inline.
    let opened = reqwest::get(&url).await.expect("opened");
    assert_eq!(opened.status(), 200);
    assert_eq!(opened.headers()["content-type"], "application/pdf");
    assert!(
        opened.headers()["content-disposition"]
            .to_str()
            .is_ok_and(|d| d.starts_with("inline")),
        "{:?}",
        opened.headers()
    );
    let bytes = opened.bytes().await.expect("bytes");
    assert_eq!(kuatia_application::artifacts::sha256_hex(&bytes), kude_sha);

    // Listed without its token, on the timeline.
    let (status, listed_links) = send(f.req(Method::GET, &links)).await;
    assert_eq!(status, 200, "{listed_links}");
    assert_eq!(listed_links.as_array().map(Vec::len), Some(1), "{listed_links}");
    assert_eq!(listed_links[0]["url"], Value::Null);
    assert!(
        !listed_links.to_string().contains(&token),
        "the token is shown once"
    );
    let types: Vec<Value> = f
        .timeline(&doc)
        .await
        .into_iter()
        .map(|e| e["type"].clone())
        .collect();
    assert!(types.contains(&json!("PublicLinkCreated")), "{types:?}");

    // Anything that is not a live token is the same 404.
    let gone = |response: reqwest::Response| async move {
        assert_eq!(response.status(), 404);
        let body: Value = response.json().await.expect("an error body");
        assert_eq!(body["code"], "not_found", "{body}");
    };
    let base = url.trim_end_matches(&token).to_owned();
    gone(
        reqwest::get(format!("{base}{}", "A".repeat(43)))
            .await
            .expect("answered"),
    )
    .await;
    gone(reqwest::get(format!("{base}short")).await.expect("answered")).await;

    // Revoked: it stops at once; revoking again is the same answer; an unknown link is 404.
    let link = id(&made);
    let (status, _) = send(f.req(Method::DELETE, &format!("{links}/{link}"))).await;
    assert_eq!(status, 204);
    gone(reqwest::get(&url).await.expect("answered")).await;
    let (status, _) = send(f.req(Method::DELETE, &format!("{links}/{link}"))).await;
    assert_eq!(status, 204);
    let (status, answer) = send(f.req(Method::DELETE, &format!("{links}/{}", uuid::Uuid::now_v7()))).await;
    error_code(status, &answer, 404, "not_found");

    // Expired: a second link whose end has passed (the read model's clock moved on).
    let (status, second) = send(f.req(Method::POST, &links)).await;
    assert_eq!(status, 201, "{second}");
    let second_url = second["url"].as_str().expect("url").to_owned();
    assert_eq!(reqwest::get(&second_url).await.expect("opened").status(), 200);
    let database = f.app.db.open().await;
    let sql = "SELECT CAST(id AS TEXT), CAST(document_id AS TEXT), token_sha256, CAST(expires_at AS TEXT), \
               CAST(revoked_at AS TEXT), CAST(created_at AS TEXT) FROM document_public_links ORDER BY id";
    let rows = kuatia_tests::snapshot(&database, sql).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    crate::documents::rebuilt_read_model(&database).await;
    assert_eq!(
        kuatia_tests::snapshot(&database, sql).await,
        rows,
        "as written == rebuilt"
    );
    kuatia_tests::execute(
        &database,
        "UPDATE document_public_links SET expires_at = created_at WHERE revoked_at IS NULL",
    )
    .await
    .expect("moved");
    gone(reqwest::get(&second_url).await.expect("answered")).await;
    f.app.stop().await;
}

#[tokio::test]
async fn a_public_link_is_for_an_accepted_document_of_the_caller_s_tenant_and_role() {
    let f = Simulated::named("links-refusals", SimConfig::default(), |_| {}).await;
    let doc = f.post(&f.invoice("LINK-R1")).await;
    f.wait_status(&doc, "accepted", Duration::from_secs(30)).await;
    let links = format!("/v1/documents/{doc}/public-links");

    let refused = never_accepted(&f, "LINK-R2").await;
    let (status, answer) = send(f.req(Method::POST, &format!("/v1/documents/{refused}/public-links"))).await;
    error_code(status, &answer, 409, "conflict_error");

    let (secret, _) = f.api_key("viewer", None).await;
    let as_viewer = |m: Method| f.app.as_key(m, &links, &secret, &f.r.tenant);
    let (status, answer) = send(as_viewer(Method::POST)).await;
    error_code(status, &answer, 403, "permission_error");
    let (status, answer) = send(as_viewer(Method::GET)).await;
    assert_eq!(status, 200, "a viewer reads them: {answer}");

    let other = f.app.ready_at("links-other", &f.sim.base_url()).await;
    let (status, answer) = send(other.req(Method::POST, &links)).await;
    error_code(status, &answer, 404, "not_found");
    let (status, answer) = send(other.req(Method::GET, &links)).await;
    error_code(status, &answer, 404, "not_found");
    let (status, list) = send(f.req(Method::GET, &links)).await;
    assert_eq!((status, list), (200, json!([])), "nothing was made");
    f.app.stop().await;
}

/// A service whose mail server is an SMTP sink (`None`: no mail server at all); the sink refuses
/// `refused` for good (550).
async fn with_mail(slug: &str, refused: Option<&'static str>) -> (Simulated, crate::webhooks::Mailbox) {
    let (port, mail) = crate::webhooks::start_smtp_refusing(refused).await;
    let f = Simulated::named(slug, SimConfig::default(), |c| {
        c.smtp_url = Some(kuatia_infrastructure::config::Secret::new(format!(
            "smtp://127.0.0.1:{port}"
        )));
        c.smtp_from = "Facturas <facturas@example.com.py>".into();
    })
    .await;
    (f, mail)
}

fn hand_deliveries(timeline: &[Value]) -> Vec<Value> {
    timeline
        .iter()
        .filter(|e| e["type"] == "DeliveredByHand")
        .map(|e| e["data"]["DeliveredByHand"].clone())
        .collect()
}

/// `send`: the service emails the document through its mail server now (the KuDE and the signed
/// XML, byte for byte), and records the delivery with the server's answer only once the server
/// took it; the manual delivery it settles leaves the pending list.
#[tokio::test]
async fn a_document_emailed_by_the_service_for_the_issuer_is_sent_then_recorded() {
    let (f, mail) = with_mail("mailhand", None).await;
    let doc = accepted_manual(&f, "MAILHAND-1").await;
    let kude = f.wait_recorded(&doc, "kude", 1, Duration::from_secs(60)).await;
    let (status, body) = deliver(
        &f,
        &doc,
        json!({"channel": "email", "recipient": " cliente@example.com ", "note": "pidió copia", "send": true}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["channel"], "email");
    assert_eq!(body["recipient"], "cliente@example.com");
    assert!(
        body["sent"]
            .as_str()
            .is_some_and(|s| s.contains("queued as sink-")),
        "the server's answer: {body}"
    );
    assert_eq!(body["settled"].as_array().map(Vec::len), Some(1), "{body}");

    let (rcpt, raw) = mail.lock().expect("mail").first().cloned().expect("one message");
    assert_eq!(rcpt, ["cliente@example.com"]);
    let summary = crate::webhooks::summary(&raw);
    assert!(
        summary["subject"]
            .as_str()
            .is_some_and(|s| s.starts_with("Documento electrónico 001-001-")),
        "{summary}"
    );
    let attachments = summary["attachments"].as_array().cloned().unwrap_or_default();
    let timeline = f.timeline(&doc).await;
    let xml = timeline
        .iter()
        .filter(|e| e["data"]["ArtifactRecorded"]["kind"] == "signed_xml")
        .filter_map(|e| e["data"]["ArtifactRecorded"]["sha256"].as_str())
        .next_back()
        .expect("signed xml");
    let shas: Vec<&str> = attachments.iter().filter_map(|a| a["sha256"].as_str()).collect();
    assert_eq!(shas.len(), 2, "{summary}");
    assert!(shas.contains(&kude.as_str()) && shas.contains(&xml), "{summary}");

    let recorded = hand_deliveries(&timeline);
    assert_eq!(recorded.len(), 1, "{timeline:?}");
    assert_eq!(recorded[0]["sent"], body["sent"]);
    assert_eq!(recorded[0]["note"], "pidió copia");
    // The customer's copy was the one waiting; the issuer's still waits.
    assert!(f.ids("?delivery=pending_manual").await.contains(&doc));
    // Recording without `send` sends nothing and records no answer.
    let (status, body) = deliver(
        &f,
        &doc,
        json!({"target": "issuer", "channel": "email", "recipient": "contabilidad@example.com.py"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["sent"], Value::Null);
    assert_eq!(mail.lock().expect("mail").len(), 1, "nothing more was sent");
    assert!(f.ids("?delivery=pending_manual").await.is_empty());
    f.app.stop().await;
}

/// Every way `send` can fail says why, in the contract's shape, and neither sends nor records:
/// a channel other than email, not one address, an address the server refuses for good, a
/// server that does not answer, no server configured, a document not accepted, a viewer.
#[tokio::test]
async fn a_document_the_service_cannot_email_is_neither_sent_nor_recorded() {
    let (f, mail) = with_mail("mailfail", Some("nadie@example.com")).await;
    let doc = accepted_manual(&f, "MAILFAIL-1").await;
    f.wait_recorded(&doc, "kude", 1, Duration::from_secs(60)).await;
    let refused = |status: u16, code: &'static str, field: Option<&'static str>| {
        move |(got, body): (u16, Value)| {
            error_code(got, &body, status, code);
            if let Some(field) = field {
                assert_eq!(body["details"]["errors"][0]["field"], field, "{body}");
            }
        }
    };
    let email = |to: &str| json!({"channel": "email", "recipient": to, "send": true});
    refused(400, "validation_error", Some("send"))(
        deliver(
            &f,
            &doc,
            json!({"channel": "printed", "recipient": "a@example.com", "send": true}),
        )
        .await,
    );
    for not_one in ["", "cliente", "a@b@example.com", "a@example.com, b@example.com"] {
        refused(400, "validation_error", Some("recipient"))(deliver(&f, &doc, email(not_one)).await);
    }
    refused(400, "validation_error", Some("recipient"))(deliver(&f, &doc, email("nadie@example.com")).await);
    refused(400, "validation_error", Some("note"))(
        deliver(
            &f,
            &doc,
            json!({"channel": "email", "recipient": "a@example.com", "note": "x".repeat(501), "send": true}),
        )
        .await,
    );
    let never = never_accepted(&f, "MAILFAIL-2").await;
    refused(409, "conflict_error", None)(deliver(&f, &never, email("a@example.com")).await);
    let (viewer, _) = f.api_key("viewer", None).await;
    let path = format!("/v1/documents/{doc}/deliveries");
    let as_viewer = f.app.as_key(Method::POST, &path, &viewer, &f.r.tenant);
    let (status, _) = send(as_viewer.json(&email("a@example.com"))).await;
    assert_eq!(status, 403);
    assert!(mail.lock().expect("mail").is_empty(), "nothing was sent");
    assert!(hand_deliveries(&f.timeline(&doc).await).is_empty());
    assert!(f.ids("?delivery=pending_manual").await.contains(&doc));
    f.app.stop().await;

    // A mail server that does not answer: 502, nothing recorded.
    let closed = crate::webhooks::free_port().await;
    let f = Simulated::named("maildown", SimConfig::default(), |c| {
        c.smtp_url = Some(kuatia_infrastructure::config::Secret::new(format!(
            "smtp://127.0.0.1:{closed}"
        )));
    })
    .await;
    let doc = accepted_manual(&f, "MAILDOWN-1").await;
    f.wait_recorded(&doc, "kude", 1, Duration::from_secs(60)).await;
    refused(502, "upstream_error", None)(deliver(&f, &doc, email("a@example.com")).await);
    assert!(hand_deliveries(&f.timeline(&doc).await).is_empty());
    f.app.stop().await;

    // No mail server: 409, and the delivery can still be recorded without `send`.
    let f = Simulated::named("nomail", SimConfig::default(), |_| {}).await;
    let doc = accepted_manual(&f, "NOMAIL-1").await;
    let (status, body) = deliver(&f, &doc, email("a@example.com")).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("KUATIA_SMTP_URL")),
        "{body}"
    );
    assert!(hand_deliveries(&f.timeline(&doc).await).is_empty());
    f.app.stop().await;
}
