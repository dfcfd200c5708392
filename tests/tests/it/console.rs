//! The console over plain HTTP (no browser): redirects, the security headers, login with its
//! form token, the form token on every form, tenants kept apart, roles, both languages. The
//! browser drives the same pages in `console_browser`.

use std::collections::BTreeMap;
use std::time::Duration;

use kuatia_infrastructure::sifen_sim::SimConfig;
use kuatia_tests::Simulated;
use serde_json::json;

/// A browser without a browser: keeps cookies, never follows redirects.
pub(crate) struct Visitor {
    client: reqwest::Client,
    base: String,
    cookies: BTreeMap<String, String>,
    language: &'static str,
}

/// An answer: status, `Location`, headers and body.
pub(crate) struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Visitor {
    pub(crate) fn new(base: &str) -> Self {
        Self {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
            base: base.to_owned(),
            cookies: BTreeMap::new(),
            language: "es-PY,es;q=0.9",
        }
    }

    /// The value of a cookie the service set.
    pub(crate) fn cookie(&self, name: &str) -> String {
        self.cookies.get(name).cloned().unwrap_or_default()
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn answer(&mut self, request: reqwest::RequestBuilder) -> Answer {
        let response = request
            .header("cookie", self.cookie_header())
            .header("accept-language", self.language)
            .send()
            .await
            .expect("send");
        for set in response.headers().get_all("set-cookie") {
            let text = set.to_str().unwrap_or_default();
            let pair = text.split(';').next().unwrap_or_default();
            if let Some((k, v)) = pair.split_once('=') {
                if v.is_empty() || text.contains("Max-Age=0") {
                    self.cookies.remove(k);
                } else {
                    self.cookies.insert(k.to_owned(), v.to_owned());
                }
            }
        }
        Answer {
            status: response.status().as_u16(),
            location: response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            headers: response.headers().clone(),
            body: response.text().await.unwrap_or_default(),
        }
    }

    pub(crate) async fn get(&mut self, path: &str) -> Answer {
        let request = self.client.get(format!("{}{path}", self.base));
        self.answer(request).await
    }

    pub(crate) async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Answer {
        let body = form
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.answer(request).await
    }

    /// Posts a `multipart/form-data` form: `(name, filename, bytes)` per part.
    pub(crate) async fn post_multipart(
        &mut self,
        path: &str,
        parts: &[(&str, Option<&str>, &[u8])],
    ) -> Answer {
        let (content_type, body) = kuatia_tests::multipart_form(parts);
        let request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", content_type)
            .body(body);
        self.answer(request).await
    }

    /// Logs in through the login form (its token first); asserts the redirect home.
    pub(crate) async fn log_in(&mut self, email: &str, password: &str) {
        let page = self.get("/console/login").await;
        assert_eq!(page.status, 200, "{}", page.body);
        let csrf = hidden(&page.body, "csrf");
        let done = self
            .post(
                "/console/login",
                &[
                    ("email", email),
                    ("password", password),
                    ("csrf", &csrf),
                    ("next", "/console"),
                ],
            )
            .await;
        assert_eq!(done.status, 303, "{}", done.body);
        assert_eq!(done.location.as_deref(), Some("/console"));
        assert!(self.cookies.contains_key("kuatia_session"));
    }
}

/// Posts the issue form with these fields.
pub(crate) async fn post_fields(v: &mut Visitor, fields: &[(&'static str, String)]) -> Answer {
    post_owned(v, "/console/issue", fields).await
}

/// Posts a form of owned values to `path`.
async fn post_owned(v: &mut Visitor, path: &str, fields: &[(&'static str, String)]) -> Answer {
    let refs: Vec<(&str, &str)> = fields.iter().map(|(k, value)| (*k, value.as_str())).collect();
    v.post(path, &refs).await
}

/// Percent-encodes a form value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The value of the first hidden input `name` of a page.
/// The value of the input `id` of a page.
pub(crate) fn input_value(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {html}"));
    let rest = &html[at..];
    let start = rest.find("value=\"").expect("a value") + "value=\"".len();
    rest[start..].split('"').next().unwrap_or_default().to_owned()
}

/// The `data-{attr}-id` of the first table row of a page that holds `text`.
pub(crate) fn row_id(html: &str, attr: &str, text: &str) -> String {
    let marker = format!("data-{attr}-id=\"");
    html.split(&marker)
        .skip(1)
        .find(|row| row.split("</tr>").next().unwrap_or_default().contains(text))
        .and_then(|row| row.split('"').next())
        .unwrap_or_else(|| panic!("no row with {text} in {html}"))
        .to_owned()
}

/// The message a page shows from the form before it.
pub(crate) fn flash(page: &Answer) -> String {
    page.body
        .split("id=\"flash\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap_or_default().to_owned()
}

const PASSWORD: &str = "a long enough secret";

/// The service with an accepted invoice, and an owner and a viewer of its tenant.
pub(crate) async fn service_with_an_accepted_invoice() -> (Simulated, String) {
    let f = Simulated::new(SimConfig::default(), |c| c.insecure_cookies = true).await;
    let doc = f.post(&f.invoice("CONSOLE-1")).await;
    f.wait_status(&doc, "accepted", Duration::from_secs(30)).await;
    crate::identity::join(&f.app, &f.tenant, &f.key, "duena@example.com.py", "owner").await;
    crate::identity::join(&f.app, &f.tenant, &f.key, "consulta@example.com.py", "viewer").await;
    (f, doc)
}

#[tokio::test]
async fn the_console_asks_for_a_login_and_answers_with_strict_security_headers() {
    let (f, doc) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    let root = v.get("/").await;
    assert_eq!((root.status, root.location.as_deref()), (303, Some("/console")));
    let home = v.get(&format!("/console/documents/{doc}")).await;
    assert_eq!(home.status, 303);
    assert_eq!(
        home.location.as_deref(),
        Some(format!("/console/login?next=/console/documents/{doc}").as_str())
    );
    let login = v.get("/console/login").await;
    assert_eq!(login.status, 200);
    let csp = login.headers["content-security-policy"].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(login.headers["x-frame-options"], "DENY");
    assert_eq!(login.headers["cache-control"], "no-store");
    assert!(
        !login.body.contains("<script>") && !login.body.contains("style="),
        "no inline script or style"
    );
    assert!(login.body.contains("lang=\"es-PY\"") && login.body.contains("Ingresar"));

    // A login without the form's token is refused, whatever the password.
    let refused = v
        .post(
            "/console/login",
            &[
                ("email", "duena@example.com.py"),
                ("password", PASSWORD),
                ("csrf", "wrong"),
            ],
        )
        .await;
    assert_eq!(refused.status, 403);
    assert!(!v.cookies.contains_key("kuatia_session"));
    // A wrong password says so, in Spanish.
    let csrf = hidden(&v.get("/console/login").await.body, "csrf");
    let wrong = v
        .post(
            "/console/login",
            &[
                ("email", "duena@example.com.py"),
                ("password", "not it at all"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.body.contains("no son correctos"), "{}", wrong.body);

    v.log_in("duena@example.com.py", PASSWORD).await;
    let page = v.get(&format!("/console/documents/{doc}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Factura electrónica") && page.body.contains("Aprobado"));
    assert!(page.body.contains("Gs. 165.000"), "money as Paraguay writes it");
    // The assets come from the binary.
    let css = v.get("/console/assets/console.css").await;
    assert_eq!(css.status, 200);
    assert!(
        css.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
    assert_eq!(v.get("/console/assets/nothing.js").await.status, 404);

    // Logging out needs the token too, and ends the session for good.
    let csrf = hidden(&page.body, "csrf");
    assert_eq!(v.post("/console/logout", &[("csrf", "nope")]).await.status, 403);
    let out = v.post("/console/logout", &[("csrf", &csrf)]).await;
    assert_eq!(
        (out.status, out.location.as_deref()),
        (303, Some("/console/login"))
    );
    assert_eq!(v.get("/console").await.status, 303);
    f.app.stop().await;
}

#[tokio::test]
async fn every_console_form_needs_the_sessions_token_and_nothing_happens_without_it() {
    let (f, doc) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    // The pipeline still records after the approval (the KuDE, deliveries): counted once it rests.
    let mut before = f.timeline(&doc).await.len();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let now = f.timeline(&doc).await.len();
        if now == before || std::time::Instant::now() > deadline {
            break;
        }
        before = now;
    }
    let forms: [(&str, Vec<(&str, &str)>); 6] = [
        ("deliveries", vec![("channel", "printed")]),
        ("public-link", vec![]),
        ("cancel", vec![("reason", "Error en el precio")]),
        ("inutilize", vec![("reason", "Error en el precio")]),
        ("regenerate", vec![]),
        ("retry", vec![]),
    ];
    for (action, fields) in &forms {
        for token in [None, Some("0000")] {
            let mut form = fields.clone();
            if let Some(t) = token {
                form.push(("csrf", t));
            }
            let answer = v.post(&format!("/console/documents/{doc}/{action}"), &form).await;
            assert_eq!(answer.status, 403, "{action} with {token:?}: {}", answer.body);
            assert!(answer.body.contains("El formulario venció"), "{}", answer.body);
        }
    }
    let issue = v
        .post("/console/issue", &[("action", "issue"), ("description", "x")])
        .await;
    assert_eq!(issue.status, 403);
    let tenant = v.post("/console/tenant", &[("tenant", f.tenant.as_str())]).await;
    assert_eq!(tenant.status, 403);
    assert_eq!(
        f.timeline(&doc).await.len(),
        before,
        "no form without its token changed anything"
    );
    assert_eq!(f.document_count().await, 1);

    // With the token, the same form works (the delivery by hand is recorded).
    let page = v.get(&format!("/console/documents/{doc}")).await;
    assert!(
        !page.body.contains("id=\"email-form\""),
        "no mail server, no \"send by email\""
    );
    let csrf = hidden(&page.body, "csrf");
    let done = v
        .post(
            &format!("/console/documents/{doc}/deliveries"),
            &[("csrf", &csrf), ("channel", "in_person"), ("recipient", "Juan")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let shown = v.get(&format!("/console/documents/{doc}")).await;
    assert!(
        shown.body.contains("Entrega registrada"),
        "the message after the form"
    );
    assert!(shown.body.contains("En persona") && shown.body.contains("Juan"));
    let again = v.get(&format!("/console/documents/{doc}")).await;
    assert!(
        !again.body.contains("Entrega registrada"),
        "the message shows once"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn a_viewer_sees_no_action_and_is_refused_one_anyway() {
    let (f, doc) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("consulta@example.com.py", PASSWORD).await;
    let page = v.get(&format!("/console/documents/{doc}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    for action in [
        "cancel-form",
        "inutilize-form",
        "hand-form",
        "make-link",
        "regenerate",
        "audit-link",
    ] {
        assert!(
            !page.body.contains(&format!("id=\"{action}\"")),
            "a viewer sees no {action}"
        );
    }
    assert!(page.body.contains("consulta"), "the role is shown");
    let csrf = hidden(&page.body, "csrf");
    let refused = v
        .post(
            &format!("/console/documents/{doc}/cancel"),
            &[("csrf", &csrf), ("reason", "Error en el precio")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(f.status(&doc).await["status"], "accepted");
    assert_eq!(v.get("/console/issue").await.status, 403);
    assert_eq!(
        v.get(&format!("/console/documents/{doc}/audit")).await.status,
        403
    );
    f.app.stop().await;
}

#[tokio::test]
async fn a_user_of_another_tenant_finds_nothing_of_this_one() {
    let (f, doc) = service_with_an_accepted_invoice().await;
    // Tenant B, with its own owner.
    let (tenant_b, key_b) = f.app.tenant("otra").await;
    crate::identity::join(&f.app, &tenant_b, &key_b, "otro@example.com.py", "owner").await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("otro@example.com.py", PASSWORD).await;
    for path in [
        format!("/console/documents/{doc}"),
        format!("/console/documents/{doc}/audit"),
        format!("/console/documents/{doc}/events"),
    ] {
        let answer = v.get(&path).await;
        assert_eq!(answer.status, 404, "{path}: {}", answer.body);
    }
    let list = v.get("/console/documents").await;
    assert!(
        !list.body.contains(&doc),
        "tenant A's document is not listed to B"
    );
    // Choosing tenant A by cookie does not help: B's user is not a member.
    v.cookies.insert("kuatia_tenant".into(), f.tenant.clone());
    assert_eq!(v.get(&format!("/console/documents/{doc}")).await.status, 404);
    let csrf = hidden(&v.get("/console").await.body, "csrf");
    let switch = v
        .post("/console/tenant", &[("csrf", &csrf), ("tenant", &f.tenant)])
        .await;
    assert_eq!(switch.status, 404);
    let delivered = v
        .post(
            &format!("/console/documents/{doc}/deliveries"),
            &[("csrf", &csrf), ("channel", "printed")],
        )
        .await;
    assert_eq!(delivered.status, 404);
    assert!(
        f.timeline(&doc)
            .await
            .iter()
            .all(|e| e["type"] != json!("DeliveredByHand")),
        "nothing was recorded on A's document"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn the_pages_speak_spanish_first_and_english_when_asked() {
    let (f, doc) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let spanish = v.get("/console").await;
    assert!(spanish.body.contains("lang=\"es-PY\"") && spanish.body.contains("Este mes"));
    // The browser's language, when the user chose none.
    v.language = "en-US,en;q=0.9";
    let english = v.get(&format!("/console/documents/{doc}")).await;
    assert!(english.body.contains("lang=\"en\"") && english.body.contains("Electronic invoice"));
    assert!(english.body.contains("Approved"));
    // SIFEN's answer explained in the page's language (the answers table, and its Spanish).
    assert!(english.body.contains("SIFEN approved the document."));
    v.language = "es-PY,es;q=0.9";
    let spanish = v.get(&format!("/console/documents/{doc}")).await;
    assert!(
        spanish.body.contains("Autorización del DE satisfactoria"),
        "SIFEN's own words"
    );
    let explained = kuatia_domain::sifen::codes::explain("0260")
        .expect("0260")
        .in_spanish();
    assert!(!explained.meaning.contains("SIFEN approved"), "{explained:?}");
    assert!(spanish.body.contains(explained.meaning), "{}", spanish.body);
    assert!(!spanish.body.contains("SIFEN approved the document."));
    v.language = "en-US,en;q=0.9";
    // The user's choice wins over the browser's.
    let chosen = v.get("/console/lang?to=es&next=/console/documents").await;
    assert_eq!(
        (chosen.status, chosen.location.as_deref()),
        (303, Some("/console/documents"))
    );
    assert!(v.get("/console/documents").await.body.contains("Documentos"));
    // The switch goes back to a console page only.
    let away = v.get("/console/lang?to=en&next=https://evil.example").await;
    assert_eq!(away.location.as_deref(), Some("/console"));
    f.app.stop().await;
}

#[tokio::test]
async fn the_list_and_the_document_page_read_the_database_a_handful_of_times() {
    let (f, doc) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let statements = |a: &Answer| -> u32 {
        a.headers["x-kuatia-statements"]
            .to_str()
            .expect("header")
            .parse()
            .expect("number")
    };
    // Each page once to warm what the service keeps between requests, then counted three times:
    // the fewest, since a request that opens a new rate-limit minute reads its buckets (two more).
    for (path, most) in [
        ("/console/documents".to_owned(), 5),
        (format!("/console/documents/{doc}"), 7),
        // Home adds the counts, the deliveries waiting, the certificates and each company's
        // channel readiness (five reads a company).
        ("/console".to_owned(), 16),
    ] {
        v.get(&path).await;
        let mut n = u32::MAX;
        for _ in 0..3 {
            let page = v.get(&path).await;
            assert_eq!(page.status, 200, "{path}");
            n = n.min(statements(&page));
        }
        assert!(n <= most, "{path} sent {n} statements (at most {most})");
        assert!(n >= 2, "{path}: the count counts ({n})");
    }
    f.app.stop().await;
}

#[tokio::test]
async fn the_document_stats_count_by_status_today_this_month_and_in_all() {
    let (f, _doc) = service_with_an_accepted_invoice().await;
    // Issued 25 hours ago: Paraguay's yesterday, whatever the hour.
    let yesterday = chrono::Utc::now() - chrono::Duration::hours(25);
    let mut bad = f.invoice("CONSOLE-BAD");
    bad["totals"]["grand_total"] = json!(1);
    bad["issue_datetime"] = json!(kuatia_tests::in_paraguay(yesterday));
    assert_eq!(f.r.post(&bad).await["status"], "validation_failed");
    let (status, stats) = kuatia_tests::send(f.req(reqwest::Method::GET, "/v1/documents/stats")).await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["all"]["accepted"], 1, "{stats}");
    assert_eq!(stats["all"]["validation_failed"], 1, "{stats}");
    // Issued an hour ago: this month (today too, unless Paraguay's day just turned).
    assert_eq!(stats["month"]["accepted"], 1, "{stats}");
    assert!(
        stats["today"].get("validation_failed").is_none(),
        "yesterday's: {stats}"
    );
    let same_month = chrono::Datelike::month(&kuatia_domain::local_time::paraguay_today(yesterday))
        == chrono::Datelike::month(&kuatia_domain::local_time::paraguay_today(chrono::Utc::now()));
    assert_eq!(
        stats["month"].get("validation_failed").is_some(),
        same_month,
        "yesterday's counts this month only if yesterday was in it: {stats}"
    );
    assert!(
        stats["all"].get("rejected").is_none(),
        "statuses with none are left out"
    );
    f.app.stop().await;
}

#[tokio::test]
async fn a_credit_note_is_issued_by_hand_on_an_invoice_chosen_from_the_accepted_ones() {
    let (f, invoice) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let form = v.get("/console/issue").await;
    assert_eq!(form.status, 200, "{}", form.body);
    assert!(
        form.body.contains(&format!("<option value=\"{invoice}\"")),
        "the accepted invoice is offered"
    );
    let (csrf, key, company) = (
        hidden(&form.body, "csrf"),
        hidden(&form.body, "key"),
        hidden(&form.body, "company"),
    );
    let fields = |action: &'static str| {
        vec![
            ("csrf", csrf.clone()),
            ("key", key.clone()),
            ("company", company.clone()),
            ("type", "credit_note".to_owned()),
            ("related", invoice.clone()),
            ("reason", "2".to_owned()),
            ("condition", "cash".to_owned()),
            ("buyer_ruc", "80013884-8".to_owned()),
            ("buyer_name", "CLIENTE S.A.".to_owned()),
            ("description", "Licencia anual (devolución)".to_owned()),
            ("quantity", "1".to_owned()),
            ("unit_price", "110.000".to_owned()),
            ("tax_rate", "10".to_owned()),
            ("action", action.to_owned()),
        ]
    };
    let checked = post_fields(&mut v, &fields("validate")).await;
    assert!(checked.body.contains("id=\"issue-valid\""), "{}", checked.body);
    let issued = post_fields(&mut v, &fields("issue")).await;
    assert_eq!(issued.status, 303, "{}", issued.body);
    let location = issued.location.expect("to the note");
    let note = location.rsplit('/').next().expect("id").to_owned();
    f.wait_status(&note, "accepted", Duration::from_secs(30)).await;
    let status = f.status(&note).await;
    assert_eq!(status["type"], "credit_note", "{status}");
    // The same form again, seconds later (back in the browser): the same note, not another,
    // though the issue time in its body is another second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = post_fields(&mut v, &fields("issue")).await;
    assert_eq!(again.location.as_deref(), Some(location.as_str()));
    assert_eq!(f.document_count().await, 2);
    f.app.stop().await;
}

/// "Enviar por correo": with a mail server configured, the console emails the KuDE through it
/// (the API's `send`), says so, and shows the delivery as sent by the server; an address the
/// server refuses is said in Spanish and nothing is recorded.
#[tokio::test]
async fn the_console_emails_a_document_through_the_mail_server_and_says_why_when_it_cannot() {
    let (port, mail) = crate::webhooks::start_smtp_refusing(Some("nadie@example.com")).await;
    // The owner joins first (with a mail server the invitation would be emailed), then the
    // service comes back with one.
    let f = Simulated::new(SimConfig::default(), |c| c.insecure_cookies = true).await;
    crate::identity::join(&f.app, &f.tenant, &f.key, "duena@example.com.py", "owner").await;
    let f = f
        .restart(|c| {
            c.insecure_cookies = true;
            c.smtp_url = Some(kuatia_infrastructure::config::Secret::new(format!(
                "smtp://127.0.0.1:{port}"
            )));
        })
        .await;
    let doc = f.post(&f.invoice("CONSOLE-MAIL")).await;
    f.wait_status(&doc, "accepted", Duration::from_secs(30)).await;
    f.wait_recorded(&doc, "kude", 1, Duration::from_secs(60)).await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let path = format!("/console/documents/{doc}");
    let page = v.get(&path).await;
    assert!(page.body.contains("id=\"email-form\""), "{}", page.body);
    let csrf = hidden(&page.body, "csrf");
    let send_to = |to: &'static str| {
        [
            ("csrf", csrf.clone()),
            ("channel", "email".to_owned()),
            ("send", "1".to_owned()),
            ("recipient", to.to_owned()),
        ]
    };
    let deliveries = format!("{path}/deliveries");
    let refused = post_owned(&mut v, &deliveries, &send_to("nadie@example.com")).await;
    assert_eq!(refused.status, 303, "{}", refused.body);
    let shown = v.get(&path).await;
    assert!(
        shown.body.contains("El servidor de correo rechazó esa dirección"),
        "{}",
        shown.body
    );
    assert!(mail.lock().expect("mail").is_empty());
    let by_hand =
        |timeline: &[serde_json::Value]| timeline.iter().filter(|e| e["type"] == "DeliveredByHand").count();
    assert_eq!(by_hand(&f.timeline(&doc).await), 0);

    let sent = post_owned(&mut v, &deliveries, &send_to("cliente@example.com")).await;
    assert_eq!(sent.status, 303, "{}", sent.body);
    let shown = v.get(&path).await;
    assert!(
        shown.body.contains("Documento enviado por correo"),
        "{}",
        shown.body
    );
    assert!(shown.body.contains("enviado por el servidor de correo"));
    assert!(shown.body.contains("cliente@example.com"));
    let mail = mail.lock().expect("mail").clone();
    assert_eq!(mail.len(), 1);
    assert_eq!(mail[0].0, ["cliente@example.com"]);
    assert_eq!(by_hand(&f.timeline(&doc).await), 1);
    f.app.stop().await;
}

/// The hand-issue form's buyer lookup: with the taxpayer registry loaded, a RUC (with or without
/// its check digit) fills the registered name and the RUC as written with its digit; a RUC the
/// registry does not hold says so in Spanish and leaves the name to the clerk.
#[tokio::test]
async fn the_buyer_lookup_fills_the_name_from_the_loaded_registry() {
    let (f, _) = service_with_an_accepted_invoice().await;
    let dir = kuatia_tests::ScratchDir::new();
    crate::lookup::fixture_files(&dir.0, &[("80013884", "CLIENTE SOCIEDAD ANONIMA", "ACTIVO")]);
    let database = f.app.db.open().await;
    let published = chrono::NaiveDate::from_ymd_opt(2026, 11, 1).expect("date");
    kuatia_infrastructure::lookup::import::import_registry(&database, &dir.0, published, &|_| {})
        .await
        .expect("import");
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let form = v.get("/console/issue").await;
    let (csrf, key) = (hidden(&form.body, "csrf"), hidden(&form.body, "key"));
    let lookup = |ruc: &'static str| {
        vec![
            ("csrf", csrf.clone()),
            ("key", key.clone()),
            ("type", "invoice".to_owned()),
            ("buyer_ruc", ruc.to_owned()),
            ("action", "lookup".to_owned()),
        ]
    };
    let found = post_fields(&mut v, &lookup("80013884")).await;
    assert_eq!(found.status, 200, "{}", found.body);
    assert!(
        found.body.contains("value=\"CLIENTE SOCIEDAD ANONIMA\""),
        "{}",
        found.body
    );
    assert!(
        found.body.contains("value=\"80013884-8\""),
        "the RUC with its digit"
    );
    let unknown = post_fields(&mut v, &lookup("80069563-1")).await;
    assert!(
        unknown.body.contains("no figura en el padrón"),
        "{}",
        unknown.body
    );
    assert!(!unknown.body.contains("CLIENTE SOCIEDAD ANONIMA"));
    f.app.stop().await;
}
