//! The console in headless Chromium (Debian's `chromium` and `chromedriver`, through WebDriver):
//! what an office clerk, an auditor, a viewer and a user of another tenant do, on the real service
//! with the SIFEN simulator, and axe-core on every page. With `KUATIA_SCREENSHOTS=<dir>` the
//! pages are saved there as PNG (`docs/console/` holds the ones docs/console.md shows).

use std::time::{Duration, Instant};

use kuatia_tests::browser::Browser;
use kuatia_tests::{Ready, Simulated};
use serde_json::json;

use crate::console::service_with_an_accepted_invoice;

const PASSWORD: &str = "a long enough secret";

/// Chromium, or `None` (with a notice) where it is not installed outside CI.
async fn browser(lang: &str) -> Option<Browser> {
    Browser::start_with_language(lang)
        .await
        .expect("the browser starts")
}

/// Saves the page as `<name>.png` when `KUATIA_SCREENSHOTS` names a folder.
async fn shot(b: &Browser, name: &str) {
    if let Ok(dir) = std::env::var("KUATIA_SCREENSHOTS") {
        std::fs::create_dir_all(&dir).expect("screenshot folder");
        b.save_screenshot(format!("{dir}/{name}.png"))
            .await
            .expect("screenshot");
    }
}

/// axe-core finds no serious or critical violation on the page.
async fn accessible(b: &Browser, page: &str) {
    let violations = b.axe().await.expect("axe runs");
    assert!(
        violations.is_empty(),
        "{page}: {}",
        serde_json::to_string_pretty(&violations).unwrap_or_default()
    );
}

async fn log_in(b: &Browser, base: &str, email: &str) {
    b.delete_all_cookies().await.ok();
    b.goto(&format!("{base}/console")).await.expect("goto");
    assert!(b.current_url().await.expect("url").contains("/console/login"));
    b.find("#email")
        .await
        .expect("email")
        .send_keys(email)
        .await
        .expect("type");
    b.find("#password")
        .await
        .expect("password")
        .send_keys(PASSWORD)
        .await
        .expect("type");
    b.find("#login-submit")
        .await
        .expect("submit")
        .click()
        .await
        .expect("click");
    b.wait_for("main h1", Duration::from_secs(10))
        .await
        .expect("home");
}

/// Reloads the page until `#doc-status` says `status`.
async fn page_status(b: &Browser, url: &str, status: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        b.goto(url).await.expect("goto");
        let shown = b
            .find("#doc-status")
            .await
            .expect("status")
            .attribute("data-status")
            .await
            .expect("attribute");
        if shown.as_deref() == Some(status) {
            return;
        }
        assert!(Instant::now() < deadline, "{url} stayed {shown:?}, not {status}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// An accepted invoice whose customer delivery waits for the issuer's hand.
async fn accepted_manual(f: &Ready, external_id: &str) -> String {
    let mut doc = f.invoice(external_id);
    doc["delivery"] =
        json!({"customer": {"mode": "manual", "channels": ["email"], "email": "cliente@example.com"}});
    let id = f.post(&doc).await["id"].as_str().expect("id").to_owned();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f.ids("?delivery=pending_manual").await.contains(&id) {
        assert!(Instant::now() < deadline, "the manual delivery never waited");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    id
}

#[tokio::test]
async fn an_office_clerk_finds_opens_delivers_cancels_and_issues_in_the_browser() {
    let (f, first) = service_with_an_accepted_invoice().await;
    let Some(b) = browser("es-PY").await else { return };
    let base = f.app.base.clone();
    let manual = accepted_manual(&f, "CONSOLE-MANUAL").await;

    log_in(&b, &base, "duena@example.com.py").await;
    assert_eq!(b.find("main h1").await.unwrap().text().await.unwrap(), "Inicio");
    assert!(
        b.exists("#pending-manual").await.unwrap(),
        "home lists the delivery waiting"
    );
    shot(&b, "home").await;
    accessible(&b, "home").await;

    // The list, filtered and searched.
    b.goto(&format!("{base}/console/documents")).await.unwrap();
    assert_eq!(b.find_all("#documents tbody tr").await.unwrap().len(), 2);
    shot(&b, "documents").await;
    accessible(&b, "documents").await;
    let number = f.status(&first).await["number"].as_str().unwrap().to_owned();
    // From the keyboard: the number, then Enter.
    b.find("#q")
        .await
        .unwrap()
        .send_keys(&format!("{number}\u{E007}"))
        .await
        .unwrap();
    b.wait_for("#documents", Duration::from_secs(5)).await.unwrap();
    let rows = b.find_all("#documents tbody tr").await.unwrap();
    assert_eq!(rows.len(), 1, "the search finds the one number");
    assert_eq!(
        rows[0].attribute("data-id").await.unwrap().as_deref(),
        Some(first.as_str())
    );
    b.goto(&format!("{base}/console/documents?status=rejected"))
        .await
        .unwrap();
    assert!(b.exists("#no-documents").await.unwrap());
    let export = b
        .find("#export-csv")
        .await
        .unwrap()
        .attribute("href")
        .await
        .unwrap()
        .unwrap();
    assert!(
        export.starts_with("/console/documents/export?status=rejected"),
        "{export}"
    );

    // A document: header, SIFEN's answer, the KuDE to view and to save.
    b.goto(&format!("{base}/console/documents/{first}"))
        .await
        .unwrap();
    assert!(
        b.find("#doc-cdc")
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains(' '),
        "the CDC in groups"
    );
    assert!(b.exists("#sifen-answer").await.unwrap());
    shot(&b, "document").await;
    accessible(&b, "document").await;
    let view = b
        .find(".view-artifact")
        .await
        .unwrap()
        .attribute("href")
        .await
        .unwrap()
        .unwrap();
    let download = b
        .find(".download-artifact")
        .await
        .unwrap()
        .attribute("href")
        .await
        .unwrap()
        .unwrap();
    let kude = reqwest::get(&view).await.unwrap();
    assert_eq!(kude.headers()["content-type"], "application/pdf");
    assert!(
        kude.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("inline")
    );
    assert!(kude.bytes().await.unwrap().starts_with(b"%PDF"));
    let saved = reqwest::get(&download).await.unwrap();
    assert!(
        saved.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );

    // Delivery by hand: recorded, and the document leaves the pending list.
    b.goto(&format!("{base}/console/documents/{manual}"))
        .await
        .unwrap();
    assert!(b.exists("#pending-manual-note").await.unwrap());
    b.find("#make-link").await.unwrap().click().await.unwrap();
    let link = b.wait_for("#public-link", Duration::from_secs(5)).await.unwrap();
    let url = link
        .property("value")
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(url.contains("/p/"), "{url}");
    assert!(b.exists("#whatsapp-link").await.unwrap());
    shot(&b, "delivery-by-hand").await;
    accessible(&b, "delivery by hand").await;
    let public = reqwest::get(&url).await.unwrap();
    assert_eq!(public.status(), 200);
    b.find("#hand-channel")
        .await
        .unwrap()
        .select_by_value("whatsapp")
        .await
        .unwrap();
    // Enter in the last field sends the form, as a keyboard user would.
    b.find("#hand-recipient")
        .await
        .unwrap()
        .send_keys("0981 123 456\u{E007}")
        .await
        .unwrap();
    b.wait_for(".hand-delivery", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!b.exists("#pending-manual-note").await.unwrap());
    b.goto(&format!("{base}/console/documents?delivery=pending_manual"))
        .await
        .unwrap();
    assert!(b.exists("#no-documents").await.unwrap(), "no longer pending");

    // A form stripped of its token is refused.
    b.goto(&format!("{base}/console/documents/{manual}"))
        .await
        .unwrap();
    b.execute(
        "document.querySelectorAll('#hand-form input[name=csrf]').forEach(function (e) { e.remove(); });",
        vec![],
    )
    .await
    .unwrap();
    b.find("#hand-submit").await.unwrap().click().await.unwrap();
    let refused = b
        .wait_for("#error-message", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(refused.text().await.unwrap().contains("El formulario venció"));

    // Cancel inside the window.
    b.goto(&format!("{base}/console/documents/{first}"))
        .await
        .unwrap();
    assert!(
        b.find("#cancel-window")
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains("Quedan")
    );
    b.find("#cancel-reason")
        .await
        .unwrap()
        .send_keys("Error en el precio")
        .await
        .unwrap();
    b.find("#cancel-submit").await.unwrap().click().await.unwrap();
    b.wait_for("#flash", Duration::from_secs(15)).await.unwrap();
    page_status(&b, &format!("{base}/console/documents/{first}"), "cancelled").await;

    // Issue an invoice by hand: live totals, the check, the issue, accepted.
    b.goto(&format!("{base}/console/issue")).await.unwrap();
    assert!(
        b.find("#related")
            .await
            .unwrap()
            .property("offsetParent")
            .await
            .unwrap()
            .is_null(),
        "the credit note's fields hide for an invoice"
    );
    shot(&b, "issue").await;
    accessible(&b, "issue").await;
    b.find("#buyer_ruc")
        .await
        .unwrap()
        .send_keys("80013884-8")
        .await
        .unwrap();
    b.find("#buyer_name")
        .await
        .unwrap()
        .send_keys("CLIENTE S.A.")
        .await
        .unwrap();
    let line = |field: &str| format!("#lines tbody tr:first-child [name={field}]");
    b.find(&line("description"))
        .await
        .unwrap()
        .send_keys("Licencia anual")
        .await
        .unwrap();
    b.find(&line("quantity")).await.unwrap().clear().await.unwrap();
    b.find(&line("quantity"))
        .await
        .unwrap()
        .send_keys("2")
        .await
        .unwrap();
    b.find(&line("unit_price"))
        .await
        .unwrap()
        .send_keys("55.000")
        .await
        .unwrap();
    assert_eq!(
        b.find("#total-grand").await.unwrap().text().await.unwrap(),
        "Gs. 110.000"
    );
    assert_eq!(
        b.find("#total-tax10").await.unwrap().text().await.unwrap(),
        "Gs. 10.000"
    );
    b.find("#validate").await.unwrap().click().await.unwrap();
    b.wait_for("#issue-valid", Duration::from_secs(10)).await.unwrap();
    // Two clicks, one document.
    let before = f.document_count().await;
    b.execute(
        "document.getElementById('issue-submit').click(); document.getElementById('issue-submit').click();",
        vec![],
    )
    .await
    .unwrap();
    b.wait_for("#doc-status", Duration::from_secs(15)).await.unwrap();
    let issued = b.current_url().await.unwrap();
    page_status(&b, &issued, "accepted").await;
    assert_eq!(
        f.document_count().await,
        before + 1,
        "one document for two clicks"
    );
    assert_eq!(
        b.find("#buyer-name").await.unwrap().text().await.unwrap(),
        "CLIENTE S.A."
    );

    // The same pages in English.
    b.goto(&format!("{base}/console/lang?to=en&next=/console"))
        .await
        .unwrap();
    assert_eq!(b.find("main h1").await.unwrap().text().await.unwrap(), "Home");
    shot(&b, "home-en").await;
    accessible(&b, "home in English").await;
    // And at a phone's width: nothing wider than the screen, on every page.
    b.set_window_size(360, 800).await.unwrap();
    for (name, path) in [
        ("home", "/console".to_owned()),
        ("documents", "/console/documents".to_owned()),
        ("document", format!("/console/documents/{manual}")),
        ("audit", format!("/console/documents/{manual}/audit")),
        ("issue", "/console/issue".to_owned()),
    ] {
        b.goto(&format!("{base}{path}")).await.unwrap();
        let width = b
            .execute("return document.documentElement.scrollWidth;", vec![])
            .await
            .unwrap();
        assert!(
            width.as_u64().unwrap_or(9999) <= 360,
            "{name}: scrollWidth {width}"
        );
        accessible(&b, &format!("{name} at 360 px")).await;
    }
    b.goto(&format!("{base}/console/documents")).await.unwrap();
    shot(&b, "documents-phone").await;
    b.quit().await.ok();
    f.app.stop().await;
}

/// A document whose approval is 49 hours old (outside the invoice's cancellation window).
async fn approved_long_ago(f: &Simulated, external_id: &str) -> String {
    let doc = f.retrying(&f.invoice(external_id)).await;
    f.record_approval(&doc, chrono::Utc::now() - chrono::Duration::hours(49))
        .await;
    doc
}

#[tokio::test]
async fn an_auditor_a_viewer_and_another_tenant_see_what_their_roles_allow() {
    let (f, first) = service_with_an_accepted_invoice().await;
    crate::identity::join(&f.app, &f.tenant, &f.key, "auditora@example.com.py", "auditor").await;
    let (tenant_b, key_b) = f.app.tenant("otra").await;
    crate::identity::join(&f.app, &tenant_b, &key_b, "otro@example.com.py", "owner").await;
    let late = approved_long_ago(&f, "CONSOLE-LATE").await;
    let Some(b) = browser("es-PY").await else { return };
    let base = f.app.base.clone();

    // The owner is refused a cancellation outside the window, with the reason.
    log_in(&b, &base, "duena@example.com.py").await;
    b.goto(&format!("{base}/console/documents/{late}")).await.unwrap();
    assert!(
        b.find("#cancel-window")
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains("venció")
    );
    b.find("#cancel-reason")
        .await
        .unwrap()
        .send_keys("Error en el precio")
        .await
        .unwrap();
    b.find("#cancel-submit").await.unwrap().click().await.unwrap();
    let flash = b.wait_for("#flash.bad", Duration::from_secs(10)).await.unwrap();
    assert!(
        flash.text().await.unwrap().contains("window"),
        "SIFEN's window, in the API's words"
    );
    assert_eq!(f.status(&late).await["status"], "accepted");

    // The auditor: the chain verified when the page was drawn, the state as of an earlier event.
    log_in(&b, &base, "auditora@example.com.py").await;
    b.goto(&format!("{base}/console/documents/{first}"))
        .await
        .unwrap();
    assert!(
        !b.exists("#cancel-form").await.unwrap(),
        "an auditor cancels nothing"
    );
    b.find("#audit-link").await.unwrap().click().await.unwrap();
    let verified = b
        .wait_for("#chain-verified", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(verified.text().await.unwrap().contains("verificada"));
    let events = b.find_all("#timeline > li").await.unwrap();
    assert!(events.len() >= 5, "the whole stream");
    assert!(
        !b.find("#v1 .actor")
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .is_empty(),
        "each event names its actor"
    );
    shot(&b, "audit").await;
    accessible(&b, "audit").await;
    b.find("#v1 .as-of-link").await.unwrap().click().await.unwrap();
    let state = b
        .wait_for("#state-as-of pre", Duration::from_secs(5))
        .await
        .unwrap();
    let text = state.text().await.unwrap();
    assert!(
        text.contains("\"status\": \"received\"") || text.contains("\"status\": \"queued\""),
        "{text}"
    );
    assert!(
        !text.contains("\"status\": \"accepted\""),
        "as it was then, not now"
    );
    shot(&b, "audit-state-as-of").await;
    let ndjson = b
        .find("#download-ndjson")
        .await
        .unwrap()
        .attribute("href")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ndjson, format!("/console/documents/{first}/events"));

    // A viewer sees no action at all.
    log_in(&b, &base, "consulta@example.com.py").await;
    b.goto(&format!("{base}/console/documents/{first}"))
        .await
        .unwrap();
    for action in ["#actions", "#hand-form", "#make-link", "#audit-link"] {
        assert!(!b.exists(action).await.unwrap(), "a viewer sees no {action}");
    }
    assert!(
        !b.exists("a[href='/console/issue']").await.unwrap(),
        "nor the issue form in the menu"
    );

    // Another tenant's user: 404 on this tenant's document URLs.
    log_in(&b, &base, "otro@example.com.py").await;
    for path in [
        format!("/console/documents/{first}"),
        format!("/console/documents/{first}/audit"),
    ] {
        b.goto(&format!("{base}{path}")).await.unwrap();
        assert_eq!(
            b.find("main h1").await.unwrap().text().await.unwrap(),
            "No encontrado",
            "{path}"
        );
    }
    shot(&b, "not-found").await;
    accessible(&b, "not found").await;
    b.quit().await.ok();
    f.app.stop().await;
}

#[tokio::test]
async fn the_login_page_renders_in_spanish_and_in_english() {
    let (f, _) = service_with_an_accepted_invoice().await;
    for (lang, title) in [("es-PY", "Ingresar"), ("en-US", "Log in")] {
        let Some(b) = browser(lang).await else { return };
        b.goto(&format!("{}/console/login", f.app.base)).await.unwrap();
        assert_eq!(b.find("h1").await.unwrap().text().await.unwrap(), title);
        shot(&b, &format!("login-{}", &lang[..2])).await;
        accessible(&b, "login").await;
        if lang == "es-PY" {
            // From the keyboard alone: the email, Tab to the password, Enter.
            let keys = format!("duena@example.com.py\u{E004}{PASSWORD}\u{E007}");
            b.find("#email").await.unwrap().send_keys(&keys).await.unwrap();
            let home = b.wait_for("main h1", Duration::from_secs(10)).await.unwrap();
            assert_eq!(home.text().await.unwrap(), "Inicio");
        }
        b.quit().await.ok();
    }
    f.app.stop().await;
}

/// Issue 29's access: a key made in the browser works over REST and stops once revoked there;
/// a person invited; axe on the page in both languages and at 360 px.
#[tokio::test]
async fn an_owner_makes_a_key_uses_it_over_rest_and_revokes_it_in_the_browser() {
    let (f, _) = service_with_an_accepted_invoice().await;
    let Some(b) = browser("es-PY").await else { return };
    let base = f.app.base.clone();
    log_in(&b, &base, "duena@example.com.py").await;
    b.find("a[href='/console/access']")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for("#key-form", Duration::from_secs(5)).await.unwrap();
    accessible(&b, "access").await;
    b.find("#key-name")
        .await
        .unwrap()
        .send_keys("ERP de la oficina")
        .await
        .unwrap();
    b.find("#key-role")
        .await
        .unwrap()
        .select_by_value("issuer")
        .await
        .unwrap();
    b.find("#key-submit").await.unwrap().click().await.unwrap();
    let shown = b.wait_for("#once-value", Duration::from_secs(10)).await.unwrap();
    let key = shown.property("value").await.unwrap();
    let key = key.as_str().expect("the key").to_owned();
    shot(&b, "access-key-made").await;
    accessible(&b, "access, key shown").await;
    let rest = |key: String| {
        let request = f
            .app
            .as_key(reqwest::Method::GET, "/v1/documents?limit=1", &key, &f.tenant);
        async move { request.send().await.expect("send").status().as_u16() }
    };
    assert_eq!(rest(key.clone()).await, 200, "the key works over REST");

    // Revoked from its row: the key is refused from then on.
    b.find(".revoke-key[aria-label='Revocar ERP de la oficina']")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let flash = b.wait_for("#flash.ok", Duration::from_secs(10)).await.unwrap();
    assert!(flash.text().await.unwrap().contains("revocada"));
    assert_eq!(rest(key).await, 401, "revoked in the console, refused over REST");

    // A person invited; without a mail server the link to pass on is shown.
    b.find("#invite-email")
        .await
        .unwrap()
        .send_keys("contador@example.com.py")
        .await
        .unwrap();
    b.find("#invite-role")
        .await
        .unwrap()
        .select_by_value("auditor")
        .await
        .unwrap();
    b.find("#invite-submit").await.unwrap().click().await.unwrap();
    let link = b.wait_for("#once-value", Duration::from_secs(10)).await.unwrap();
    assert!(
        link.property("value")
            .await
            .unwrap()
            .as_str()
            .unwrap_or_default()
            .contains("/invitations/")
    );
    b.set_window_size(360, 800).await.unwrap();
    b.goto(&format!("{base}/console/access")).await.unwrap();
    let wide: i64 = b
        .execute("return document.documentElement.scrollWidth;", vec![])
        .await
        .unwrap()
        .as_i64()
        .unwrap_or(i64::MAX);
    if wide > 360 {
        let wider = b
            .execute(
                "return [...document.querySelectorAll('body *')]\
                   .filter(e => e.getBoundingClientRect().right > 361 && !e.closest('.scroll'))\
                   .map(e => e.tagName + '#' + e.id + '.' + e.className).slice(0, 12);",
                vec![],
            )
            .await
            .unwrap();
        panic!("the access page is {wide} px wide at 360: {wider}");
    }
    shot(&b, "access-phone").await;
    accessible(&b, "access at 360 px").await;
    b.quit().await.ok();

    let Some(b) = browser("en-US").await else { return };
    log_in(&b, &base, "duena@example.com.py").await;
    b.goto(&format!("{base}/console/access")).await.unwrap();
    assert_eq!(b.find("main h1").await.unwrap().text().await.unwrap(), "Access");
    accessible(&b, "access in English").await;
    b.quit().await.ok();
    f.app.stop().await;
}

#[tokio::test]
async fn an_owner_makes_a_webhook_tests_it_and_replays_a_delivery_that_arrives_signed_again() {
    use crate::webhooks::{Inbox, start_receiver, verify};
    let (f, _) = service_with_an_accepted_invoice().await;
    let Some(b) = browser("es-PY").await else { return };
    let inbox = Inbox::default();
    let (port, _server) = start_receiver(inbox.clone(), 0).await;
    let url = format!("http://127.0.0.1:{port}/hook");
    let base = f.app.base.clone();
    log_in(&b, &base, "duena@example.com.py").await;
    b.find("a[href='/console/webhooks']")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for("#endpoint-form", Duration::from_secs(5))
        .await
        .unwrap();
    accessible(&b, "webhooks").await;
    b.find("#endpoint-url")
        .await
        .unwrap()
        .send_keys(&url)
        .await
        .unwrap();
    b.find("#endpoint-description")
        .await
        .unwrap()
        .send_keys("ERP de la oficina")
        .await
        .unwrap();
    b.find("#endpoint-submit").await.unwrap().click().await.unwrap();
    let shown = b.wait_for("#once-value", Duration::from_secs(10)).await.unwrap();
    let secret = shown.property("value").await.unwrap();
    let secret = secret.as_str().expect("the secret").to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    shot(&b, "webhooks-made").await;
    accessible(&b, "webhooks, secret shown").await;

    // Tested from its row: the receiver gets it, signed with the secret shown.
    b.find(&format!(".test-endpoint[aria-label='Probar {url}']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let flash = b.wait_for("#flash.ok", Duration::from_secs(10)).await.unwrap();
    assert!(flash.text().await.unwrap().contains("HTTP 200"));
    assert_eq!(inbox.all().len(), 1);

    // Its deliveries; the test's page with the payload and the attempt; replayed from there.
    b.find("a[href^='/console/webhooks/']")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for("#deliveries", Duration::from_secs(5)).await.unwrap();
    accessible(&b, "an endpoint's deliveries").await;
    b.find(".delivery-row a").await.unwrap().click().await.unwrap();
    b.wait_for("#payload", Duration::from_secs(5)).await.unwrap();
    assert_eq!(b.find_all(".attempt-row").await.unwrap().len(), 1);
    shot(&b, "webhooks-delivery").await;
    accessible(&b, "a delivery").await;
    b.find("#replay-one").await.unwrap().click().await.unwrap();
    let flash = b.wait_for("#flash.ok", Duration::from_secs(10)).await.unwrap();
    assert!(flash.text().await.unwrap().contains("reenviados: 1"));
    let deadline = Instant::now() + Duration::from_secs(15);
    while inbox.all().len() < 2 {
        assert!(Instant::now() < deadline, "the replay never arrived");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let got = inbox.all();
    assert_eq!(got[1].id, got[0].id, "the same event id");
    assert_eq!(got[1].body, got[0].body, "the same body");
    assert!(
        verify(&got[1], &[&secret]),
        "signed again with the endpoint's secret"
    );
    b.quit().await.ok();

    let Some(b) = browser("en-US").await else { return };
    log_in(&b, &base, "duena@example.com.py").await;
    b.goto(&format!("{base}/console/webhooks")).await.unwrap();
    assert_eq!(b.find("main h1").await.unwrap().text().await.unwrap(), "Webhooks");
    assert!(
        b.find("#endpoint-form legend")
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains("New address")
    );
    accessible(&b, "webhooks in English").await;
    b.quit().await.ok();
    f.app.stop().await;
}

#[tokio::test]
async fn the_playground_runs_an_example_and_shows_sifen_s_answer_in_the_browser() {
    let (f, _) = service_with_an_accepted_invoice().await;
    let Some(b) = browser("es-PY").await else { return };
    let base = f.app.base.clone();
    log_in(&b, &base, "duena@example.com.py").await;
    b.find("a[href='/console/sandbox']")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for("#sandbox-form", Duration::from_secs(5)).await.unwrap();
    accessible(&b, "sandbox").await;
    b.find("#sandbox-run").await.unwrap().click().await.unwrap();
    let answer = b
        .wait_for("#sandbox-answer", Duration::from_secs(20))
        .await
        .unwrap();
    assert!(
        answer.text().await.unwrap().contains("0260"),
        "SIFEN approved the preview"
    );
    assert!(!b.find_all("#signed-xml .x-tag").await.unwrap().is_empty());
    b.execute(
        "document.getElementById('sandbox-outcome').scrollIntoView();",
        vec![],
    )
    .await
    .unwrap();
    shot(&b, "sandbox").await;
    accessible(&b, "sandbox, outcome").await;
    b.quit().await.ok();
    f.app.stop().await;
}

/// Types `text` into the field `#id`, replacing what it held.
async fn type_into(b: &Browser, id: &str, text: &str) {
    let field = b.find(id).await.unwrap_or_else(|e| panic!("{id}: {e}"));
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

/// The error said beside field `name` (waits for the page that says it).
async fn error_beside(b: &Browser, name: &str) -> String {
    b.wait_for(&format!("#e-{name}"), Duration::from_secs(15))
        .await
        .unwrap_or_else(|e| panic!("no error beside {name}: {e}"))
        .text()
        .await
        .unwrap()
}

async fn value_of(b: &Browser, id: &str) -> String {
    b.find(id)
        .await
        .unwrap()
        .property("value")
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_new_tenant_sets_up_in_the_wizard_and_issues_an_accepted_invoice_in_the_browser() {
    let (app, sim, _tenant, _key) = crate::console_setup::new_tenant().await;
    let Some(b) = browser("es-PY").await else { return };
    let base = app.base.clone();
    log_in(&b, &base, "duena@example.com.py").await;
    b.find("#setup-needed a").await.unwrap().click().await.unwrap();
    b.wait_for("#setup-company", Duration::from_secs(10))
        .await
        .unwrap();
    accessible(&b, "setup: company").await;

    // The company: the check digit is judged as typed; the place is chosen from SET's tables,
    // the districts and cities following the department (redrawn, nothing typed lost).
    type_into(&b, "#f-ruc", "80069563-2").await;
    let said = b.find("#ruc-check").await.unwrap().text().await.unwrap();
    assert!(said.contains("no corresponde") && said.contains('1'), "{said}");
    type_into(&b, "#f-legal_name", "DE GENERACION ELECTRONICA S.A.").await;
    type_into(&b, "#f-address", "Avda. Mcal. López").await;
    type_into(&b, "#f-house_number", "1234").await;
    b.find("#f-department_code")
        .await
        .unwrap()
        .select_by_value("12")
        .await
        .unwrap();
    b.wait_for("#f-district_code option[value='159']", Duration::from_secs(10))
        .await
        .unwrap();
    b.find("#f-district_code")
        .await
        .unwrap()
        .select_by_value("159")
        .await
        .unwrap();
    b.wait_for("#f-city_code option[value='5946']", Duration::from_secs(10))
        .await
        .unwrap();
    b.find("#f-city_code")
        .await
        .unwrap()
        .select_by_value("5946")
        .await
        .unwrap();
    assert_eq!(
        value_of(&b, "#f-address").await,
        "Avda. Mcal. López",
        "kept through the redraws"
    );
    type_into(&b, "#f-phone", "021 000 000").await;
    type_into(&b, "#f-email", "facturas@example.com.py").await;
    type_into(&b, "#f-activity_code", "62010").await;
    type_into(&b, "#f-activity_description", "Programación informática").await;
    b.find("#setup-company-save")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(error_beside(&b, "ruc").await.contains('1'));
    assert_eq!(value_of(&b, "#f-email").await, "facturas@example.com.py");
    shot(&b, "setup-company").await;
    accessible(&b, "setup: company refused").await;
    type_into(&b, "#f-ruc", "80069563-1").await;
    assert!(
        b.find("#ruc-check")
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains("es correcto")
    );
    b.find("#setup-company-save")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();

    // Branch and point: a point code of letters is said beside it.
    b.wait_for("#setup-branch", Duration::from_secs(10))
        .await
        .unwrap();
    accessible(&b, "setup: branch").await;
    type_into(&b, "#f-point_code", "A1").await;
    b.find("#setup-branch-save").await.unwrap().click().await.unwrap();
    error_beside(&b, "point_code").await;
    assert_eq!(value_of(&b, "#f-branch_name").await, "Casa matriz");
    type_into(&b, "#f-point_code", "001").await;
    b.find("#setup-branch-save").await.unwrap().click().await.unwrap();

    // The certificate, uploaded from a file: a wrong password, then its checks all green.
    b.wait_for("#setup-certificate", Duration::from_secs(10))
        .await
        .unwrap();
    accessible(&b, "setup: certificate").await;
    let dir = std::env::temp_dir().join(format!("kuatia-setup-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    let pfx = dir.join("firma.pfx");
    std::fs::write(
        &pfx,
        kuatia_infrastructure::selfsigned::SelfSigned::for_ruc(
            "DE GENERACION ELECTRONICA S.A.",
            "80069563-1",
            365,
        )
        .pfx("firma 2026 pass")
        .unwrap(),
    )
    .unwrap();
    let upload = |password: &'static str| {
        let path = pfx.to_str().unwrap().to_owned();
        let b = &b;
        async move {
            b.find("#f-pfx").await.unwrap().send_keys(&path).await.unwrap();
            type_into(b, "#f-password", password).await;
            b.find("#setup-certificate-save")
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
        }
    };
    type_into(&b, "#f-label", "firma 2026").await;
    upload("otra clave").await;
    error_beside(&b, "pfx").await;
    assert_eq!(value_of(&b, "#f-label").await, "firma 2026");
    upload("firma 2026 pass").await;
    b.wait_for("#flash", Duration::from_secs(15)).await.unwrap();
    assert!(b.find_all(".check-bad").await.unwrap().is_empty());
    assert!(b.find_all(".check-ok").await.unwrap().len() >= 4);
    shot(&b, "setup-certificate").await;
    accessible(&b, "setup: certificate checked").await;
    std::fs::remove_dir_all(&dir).ok();
    b.find("#setup-next").await.unwrap().click().await.unwrap();

    // The SIFEN channel, sending to the simulator: without the CSC first.
    b.wait_for("#setup-sifen", Duration::from_secs(10)).await.unwrap();
    accessible(&b, "setup: channel").await;
    type_into(&b, "#f-endpoint", &sim.base_url()).await;
    type_into(&b, "#f-timbrado", "12345678").await;
    // A date input's typing follows the browser's locale: the value is set as the form sends it.
    b.execute(
        "document.getElementById('f-timbrado_valid_from').value = '2024-01-01';",
        vec![],
    )
    .await
    .unwrap();
    b.find("#setup-sifen-save").await.unwrap().click().await.unwrap();
    error_beside(&b, "csc").await;
    assert_eq!(value_of(&b, "#f-timbrado").await, "12345678");
    type_into(&b, "#f-csc", "ABCD0000000000000000000000000000").await;
    b.find("#setup-sifen-save").await.unwrap().click().await.unwrap();
    b.wait_for("#flash", Duration::from_secs(15)).await.unwrap();
    b.find("#setup-next").await.unwrap().click().await.unwrap();

    // Printing: the footer, then the preview beside the form.
    b.wait_for("#setup-print", Duration::from_secs(10)).await.unwrap();
    type_into(&b, "#f-footer_note", "Gracias por su compra").await;
    b.find("#setup-print-save").await.unwrap().click().await.unwrap();
    b.wait_for("#kude-preview", Duration::from_secs(20))
        .await
        .unwrap();
    shot(&b, "setup-print").await;
    accessible(&b, "setup: print").await;
    b.find("#setup-next").await.unwrap().click().await.unwrap();

    // Ready: all green, and the first invoice.
    b.wait_for("#step-h", Duration::from_secs(10)).await.unwrap();
    assert!(b.find_all(".check-bad").await.unwrap().is_empty());
    shot(&b, "setup-ready").await;
    accessible(&b, "setup: ready").await;

    // The branch and its point, edited later from the links beside them.
    b.goto(&format!("{base}/console/setup/branch")).await.unwrap();
    b.wait_for("#edit-branch-001", Duration::from_secs(10))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for("#setup-branch-edit", Duration::from_secs(10))
        .await
        .unwrap();
    accessible(&b, "setup: branch edit").await;
    assert_eq!(value_of(&b, "#f-branch_code").await, "001");
    type_into(&b, "#f-branch_name", " ").await;
    type_into(&b, "#f-branch_address", "Ruta 2 km 20").await;
    b.find("#setup-branch-edit-save")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(
        error_beside(&b, "branch_name").await,
        "Escribí entre 1 y 255 caracteres."
    );
    assert_eq!(value_of(&b, "#f-branch_address").await, "Ruta 2 km 20");
    accessible(&b, "setup: branch edit refused").await;
    type_into(&b, "#f-branch_name", "Casa central").await;
    b.find("#setup-branch-edit-save")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for("#flash", Duration::from_secs(10)).await.unwrap();
    assert!(b.page_source().await.unwrap().contains("001 · Casa central"));
    b.find("#edit-point-001-001")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for("#setup-point-edit", Duration::from_secs(10))
        .await
        .unwrap();
    accessible(&b, "setup: point edit").await;
    type_into(&b, "#f-point_name", "Caja central").await;
    b.find("#setup-point-edit-save")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    b.wait_for("#flash", Duration::from_secs(10)).await.unwrap();
    assert!(b.page_source().await.unwrap().contains("Punto 001 Caja central"));

    // Every step again in English, axe on each (the stored records fill the forms).
    b.goto(&format!("{base}/console/lang?to=en&next=/console/setup/company"))
        .await
        .unwrap();
    for step in ["company", "branch", "certificate", "channel", "print", "ready"] {
        b.goto(&format!("{base}/console/setup/{step}")).await.unwrap();
        b.wait_for("#step-h", Duration::from_secs(10)).await.unwrap();
        assert!(
            b.page_source().await.unwrap().contains("Set up the company"),
            "{step} in English"
        );
        accessible(&b, &format!("setup, English: {step}")).await;
    }
    for (link, form) in [
        ("#edit-branch-001", "#setup-branch-edit"),
        ("#edit-point-001-001", "#setup-point-edit"),
    ] {
        b.goto(&format!("{base}/console/setup/branch")).await.unwrap();
        b.wait_for(link, Duration::from_secs(10))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        b.wait_for(form, Duration::from_secs(10)).await.unwrap();
        accessible(&b, &format!("setup, English: {form}")).await;
    }
    b.goto(&format!("{base}/console/lang?to=es&next=/console/setup/ready"))
        .await
        .unwrap();
    b.wait_for("#setup-next", Duration::from_secs(10)).await.unwrap();
    b.find("#setup-next").await.unwrap().click().await.unwrap();
    b.wait_for("#issue-form", Duration::from_secs(10)).await.unwrap();
    type_into(&b, "#buyer_ruc", "80013884-8").await;
    type_into(&b, "#buyer_name", "CLIENTE S.A.").await;
    let line = |field: &str| format!("#lines tbody tr:first-child [name={field}]");
    type_into(&b, &line("description"), "Licencia anual").await;
    type_into(&b, &line("quantity"), "1").await;
    type_into(&b, &line("unit_price"), "110.000").await;
    b.find("#issue-submit").await.unwrap().click().await.unwrap();
    b.wait_for("#doc-status", Duration::from_secs(15)).await.unwrap();
    let issued = b.current_url().await.unwrap();
    page_status(&b, &issued, "accepted").await;
    b.quit().await.ok();
    app.stop().await;
}

#[tokio::test]
async fn an_operator_rebuilds_a_projection_and_retries_a_job_while_an_owner_finds_no_room() {
    let f = crate::console_operators::with_an_operator().await;
    let dead = crate::console_operators::dead_job(&f, "noop:browser").await;
    let Some(b) = browser("es-PY").await else { return };
    let base = f.app.base.clone();

    // The tenant's owner: not found.
    log_in(&b, &base, "duena@example.com.py").await;
    assert!(!b.exists("a[href='/console/operators']").await.unwrap());
    b.goto(&format!("{base}/console/operators")).await.unwrap();
    assert!(
        b.page_source().await.unwrap().contains("No encontrado")
            || b.title().await.unwrap().contains("encontr")
    );
    assert!(!b.exists("#projections").await.unwrap());

    log_in(&b, &base, crate::console_operators::OPERATOR).await;
    b.goto(&format!("{base}/console/operators")).await.unwrap();
    b.wait_for("#projections", Duration::from_secs(10)).await.unwrap();
    accessible(&b, "operators").await;
    b.find("[data-projection='documents'] button.rebuild")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The page refreshes itself while the rebuild runs, until it says it ended.
    b.wait_for("#task-state[data-state='done']", Duration::from_secs(30))
        .await
        .unwrap();
    shot(&b, "operators").await;
    accessible(&b, "operators, rebuilt").await;
    b.find(&format!("[data-job-id='{dead}'] button.retry-job"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let said = b
        .wait_for("#flash", Duration::from_secs(10))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(said.contains("reintentado"), "{said}");
    b.goto(&format!("{base}/console/lang?to=en&next=/console/operators"))
        .await
        .unwrap();
    b.wait_for("#projections", Duration::from_secs(10)).await.unwrap();
    assert!(
        b.page_source().await.unwrap().contains("The job queue")
            || b.page_source().await.unwrap().contains("Job queue")
    );
    accessible(&b, "operators, English").await;
    assert_eq!(
        b.find(&format!("[data-job-id='{dead}']"))
            .await
            .unwrap()
            .attribute("data-status")
            .await
            .unwrap()
            .as_deref(),
        Some("failed")
    );
    b.quit().await.ok();
    f.app.stop().await;
}
