//! The console's sandbox playground over plain HTTP: the examples issued now and sold by the
//! tenant's company, a run through the sandbox with the tenant's configuration (the reserved
//! test number, SIFEN's answer, the signed XML coloured), the KuDE as a PDF, a broken or
//! invalid document said by field with what was typed kept, nothing stored; a viewer refused.

use crate::console::{Visitor, hidden, service_with_an_accepted_invoice};
use reqwest::Method;

const PASSWORD: &str = "a long enough secret";

/// The text of the textarea `id`, unescaped as a browser would.
fn textarea(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {html}"));
    let rest = &html[at..];
    let start = rest.find('>').expect("the tag ends") + 1;
    let end = rest.find("</textarea>").expect("the textarea ends");
    rest[start..end]
        .replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

async fn documents_stored(f: &kuatia_tests::Simulated) -> usize {
    let (_, listed) = kuatia_tests::send(f.req(Method::GET, "/v1/documents?limit=100")).await;
    listed["documents"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn the_playground_runs_an_example_with_the_tenant_s_configuration_and_stores_nothing() {
    let (f, _doc) = service_with_an_accepted_invoice().await;
    let stored = documents_stored(&f).await;
    let (_, companies) = kuatia_tests::send(f.req(Method::GET, "/v1/companies")).await;
    let ruc = companies[0]["ruc"]
        .as_str()
        .expect("the company's RUC")
        .to_owned();
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let page = v.get("/console/sandbox").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("aria-current=\"page\">Pruebas"));
    let csrf = hidden(&page.body, "csrf");
    let example: serde_json::Value =
        serde_json::from_str(&textarea(&page.body, "sandbox-document")).expect("the example is JSON");
    assert_eq!(example["type"], "invoice");
    assert_eq!(
        example["seller"]["ruc"],
        ruc.as_str(),
        "routed to and sold by the tenant's company"
    );
    assert_eq!(example["company_id"], companies[0]["id"], "routed to it");
    let issued = chrono::DateTime::parse_from_rfc3339(example["issue_datetime"].as_str().expect("a date"))
        .expect("RFC 3339");
    assert!(
        (chrono::Utc::now() - issued.with_timezone(&chrono::Utc))
            .num_minutes()
            .abs()
            < 5,
        "issued now: {issued}"
    );
    let document = example.to_string();

    // Run: the reserved test number, SIFEN's answer, the signed XML coloured.
    let run = v
        .post(
            "/console/sandbox",
            &[
                ("csrf", &csrf),
                ("document", &document),
                ("mode", ""),
                ("action", "run"),
            ],
        )
        .await;
    assert_eq!(run.status, 200, "{}", run.body);
    assert!(run.body.contains("id=\"sandbox-outcome\""), "{}", run.body);
    let number = run
        .body
        .split("id=\"sandbox-number\">")
        .nth(1)
        .and_then(|r| r.split('<').next())
        .expect("a number");
    assert!(number.starts_with("999-999-"), "the reserved range: {number}");
    assert!(run.body.contains("0260"), "SIFEN's approval: {}", run.body);
    assert!(
        run.body.contains("la de tu empresa"),
        "the tenant's configuration"
    );
    assert!(
        run.body.contains("<span class=\"x-tag\">rDE</span>"),
        "the XML coloured"
    );
    assert!(
        run.body.contains("<span class=\"x-tag\">ds:Signature</span>")
            || run.body.contains("<span class=\"x-tag\">Signature</span>")
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&textarea(&run.body, "sandbox-document")).expect("json"),
        example,
        "the document stays in the form"
    );

    // The KuDE itself.
    let kude = v
        .post(
            "/console/sandbox",
            &[
                ("csrf", &csrf),
                ("document", &document),
                ("mode", ""),
                ("action", "kude"),
            ],
        )
        .await;
    assert_eq!(kude.status, 200);
    assert_eq!(kude.headers["content-type"], "application/pdf");
    assert!(kude.body.starts_with("%PDF"), "a PDF");

    // Broken JSON, then a wrong total: said by field, the text kept as typed.
    let broken = "{\"type\": \"invoice\",";
    let refused = v
        .post(
            "/console/sandbox",
            &[
                ("csrf", &csrf),
                ("document", broken),
                ("mode", ""),
                ("action", "run"),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body.contains("id=\"sandbox-problems\""));
    assert!(refused.body.contains("malformed JSON"), "{}", refused.body);
    assert_eq!(textarea(&refused.body, "sandbox-document"), broken);
    let mut wrong = example.clone();
    wrong["totals"]["grand_total"] = serde_json::json!(1);
    let refused = v
        .post(
            "/console/sandbox",
            &[
                ("csrf", &csrf),
                ("document", &wrong.to_string()),
                ("mode", ""),
                ("action", "run"),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body.contains("<li>totals.grand_total: "),
        "{}",
        refused.body
    );

    // An autoimpresor example, on a tenant with no autoimpresor channel: said, by field.
    let receipt = v.get("/console/sandbox?example=autoimpresor-receipt").await;
    let receipt = textarea(&receipt.body, "sandbox-document");
    assert!(receipt.contains("autoimpresor"), "{receipt}");
    let printed = v
        .post(
            "/console/sandbox",
            &[
                ("csrf", &csrf),
                ("document", &receipt),
                ("mode", "autoimpresor_test"),
                ("action", "run"),
            ],
        )
        .await;
    assert_eq!(printed.status, 422, "{}", printed.body);
    assert!(printed.body.contains("<li>channel: "), "{}", printed.body);

    // Without the form's token: refused. Nothing of it was stored.
    let forged = v
        .post("/console/sandbox", &[("document", &document), ("action", "run")])
        .await;
    assert_eq!(forged.status, 403);
    assert_eq!(documents_stored(&f).await, stored, "the sandbox stores nothing");

    // A viewer has no playground.
    let mut viewer = Visitor::new(&f.app.base);
    viewer.log_in("consulta@example.com.py", PASSWORD).await;
    assert_eq!(viewer.get("/console/sandbox").await.status, 403);
    assert!(!viewer.get("/console").await.body.contains("/console/sandbox"));
    f.app.stop().await;
}
