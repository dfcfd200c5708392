//! The sandbox preview's adapters (`kuatia_application::sandbox`): SIFEN's checks answering a
//! preview in process or at a test endpoint ([`PreviewEndpoints`]), and throw-away certificates
//! for anonymous previews ([`ThrowawayCertificates`]).

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, header};
use chrono::{DateTime, Utc};
use kuatia_application::sandbox::{Answerer, Exchange, PreviewCsc, PreviewSifen, TestCertificates};
use kuatia_domain::ruc::Ruc;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tower::ServiceExt;
use zeroize::Zeroizing;

use crate::selfsigned::SelfSigned;
use crate::sifen_sim::{self, CscEntry, SimConfig};
use crate::sifen_soap::client::{Answered, ClientIdentity, MAX_ANSWER_BYTES, SifenClient, SoapClientConfig};
use crate::sifen_soap::{Service, SoapError, messages};

/// Where `sifen_dev` previews go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SifenTarget {
    /// A SIFEN simulator started for each preview on a loopback port, with the preview's CSC,
    /// stopped when the answer is in: nothing is kept, not even by the simulator.
    OwnSimulator,
    /// A SIFEN test endpoint's base URL (`https://sifen-test.set.gov.py`, a simulator's
    /// `http://host:port`).
    Url(String),
}

/// SIFEN's checks for previews: the simulator's router in process, or the SOAP client to
/// [`SifenTarget`].
#[derive(Debug, Clone)]
pub struct PreviewEndpoints {
    /// Where `sifen_dev` sends.
    pub target: SifenTarget,
    /// Timeouts of the SOAP client.
    pub soap: SoapClientConfig,
}

impl Default for PreviewEndpoints {
    fn default() -> Self {
        Self {
            target: SifenTarget::OwnSimulator,
            // A person waits for the answer: shorter than the pipeline's 15 s / 45 s.
            soap: SoapClientConfig {
                connect_timeout_ms: 5_000,
                read_timeout_ms: 30_000,
                total_timeout_ms: 40_000,
                ..SoapClientConfig::default()
            },
        }
    }
}

/// The simulator's configuration for one preview: SIFEN's checks, the signature required, the
/// preview's CSC accepted (before the generic ones, which the simulator would try first), and no
/// state file.
fn simulator_config(csc: PreviewCsc<'_>) -> SimConfig {
    let mut cscs = vec![CscEntry {
        ruc: Some(csc.issuer.to_string()),
        id: csc.id.to_owned(),
        csc: csc.secret.to_owned(),
    }];
    cscs.extend(sifen_sim::generic_test_cscs());
    SimConfig {
        require_signature: true,
        cscs,
        state_file: None,
        ..SimConfig::default()
    }
}

/// Ours, not the endpoint's: the simulator or the request could not be set up.
fn setup(what: &str, cause: impl std::fmt::Display) -> SoapError {
    SoapError::Config(format!("sandbox: {what}: {cause}"))
}

/// The simulator's router answers the SOAP request in process, through the same checks and the
/// same answer as over HTTP; the simulator is dropped with its memory.
async fn simulate(xml: &str, config: SimConfig) -> Result<Exchange, SoapError> {
    let simulator = sifen_sim::Simulator::new(config).map_err(|e| setup("the simulator", e))?;
    let envelope = messages::recep_de(1, xml)?;
    let request = Request::post(Service::RecepDe.path())
        .header(header::CONTENT_TYPE, "application/soap+xml; charset=utf-8")
        .body(Body::from(envelope))
        .map_err(|e| setup("the SOAP request", e))?;
    let response = match simulator.router().oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
        .await
        .map_err(|e| setup("the simulator's answer", e))?;
    let result = messages::parse_recep_de(status, &body).map_err(|e| setup("the simulator's answer", e))?;
    Ok(Exchange {
        endpoint: "in-process simulator".to_owned(),
        service: Service::RecepDe.name(),
        answered: Answered {
            result,
            status,
            raw: String::from_utf8_lossy(&body).into_owned(),
        },
    })
}

impl PreviewEndpoints {
    async fn post(&self, url: &str, xml: &str, identity: &ClientIdentity) -> Result<Exchange, SoapError> {
        let client = SifenClient::new(url, &self.soap, Some(identity), None)?;
        let answered = client.send_de(1, xml).await?;
        Ok(Exchange {
            endpoint: client.url(Service::RecepDe),
            service: Service::RecepDe.name(),
            answered,
        })
    }
}

#[async_trait]
impl PreviewSifen for PreviewEndpoints {
    async fn send_de(
        &self,
        answerer: Answerer,
        signed_rde: &str,
        identity_pem: &[u8],
        csc: PreviewCsc<'_>,
    ) -> Result<Exchange, SoapError> {
        let config = simulator_config(csc);
        if answerer == Answerer::InProcess {
            return simulate(signed_rde, config).await;
        }
        // SIFEN's test environment asks for the signing certificate as the TLS client identity.
        let identity = ClientIdentity::from_pem(identity_pem.to_vec());
        match &self.target {
            SifenTarget::Url(url) => self.post(url, signed_rde, &identity).await,
            SifenTarget::OwnSimulator => {
                let simulator = sifen_sim::start("127.0.0.1:0", config)
                    .await
                    .map_err(|e| setup("starting the simulator", e))?;
                let exchange = self.post(&simulator.base_url(), signed_rde, &identity).await;
                drop(simulator);
                exchange
            }
        }
    }
}

/// How long a generated certificate is reused.
const THROWAWAY_REUSE: chrono::TimeDelta = chrono::TimeDelta::days(30);
/// Most RUCs whose certificates are kept.
const THROWAWAY_KEPT: usize = 256;

type PemCell = Arc<tokio::sync::OnceCell<(DateTime<Utc>, Arc<Zeroizing<Vec<u8>>>)>>;

/// Self-signed certificates for anonymous previews. RSA key generation takes a good part of a
/// second, so each RUC's is generated once, off the async runtime, and reused for 30 days (at
/// most 256 RUCs are kept).
#[derive(Debug, Default)]
pub struct ThrowawayCertificates {
    cache: Mutex<HashMap<String, PemCell>>,
}

#[async_trait]
impl TestCertificates for ThrowawayCertificates {
    async fn for_ruc(&self, ruc: &Ruc) -> Result<Arc<Zeroizing<Vec<u8>>>, String> {
        let key = ruc.to_string();
        let now = Utc::now();
        let cell = {
            let mut cache = self
                .cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let stale = cache
                .get(&key)
                .and_then(|cell| cell.get())
                .is_some_and(|(made, _)| now - *made > THROWAWAY_REUSE);
            if stale {
                cache.remove(&key);
            }
            if cache.len() >= THROWAWAY_KEPT && !cache.contains_key(&key) {
                cache.clear();
            }
            cache.entry(key.clone()).or_default().clone()
        };
        let (_, pem) = cell
            .get_or_try_init(|| async move {
                let pem = tokio::task::spawn_blocking(move || -> Result<Zeroizing<Vec<u8>>, String> {
                    let text = |e: &dyn std::fmt::Display| e.to_string();
                    let (private_key, certificate) = SelfSigned::for_ruc("kuatia sandbox", &key, 90)
                        .generate()
                        .map_err(|e| text(&e))?;
                    let mut pem =
                        Zeroizing::new(private_key.private_key_to_pem_pkcs8().map_err(|e| text(&e))?);
                    pem.extend_from_slice(&certificate.to_pem().map_err(|e| text(&e))?);
                    Ok(pem)
                })
                .await
                .map_err(|e| e.to_string())??;
                Ok::<_, String>((Utc::now(), Arc::new(pem)))
            })
            .await?;
        Ok(pem.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuatia_application::process::build::{self, SigningSetup};
    use kuatia_application::sandbox::{
        TEST_CSC, TEST_CSC_ID, draw_number, issuer_ruc, sample_document, sandbox_issuer,
    };
    use kuatia_domain::channel::SifenEnvironment;
    use kuatia_domain::document::canonical;

    use crate::sifen::sign::SigningKey;

    #[tokio::test]
    async fn sifen_dev_sends_to_a_configured_endpoint_and_an_unreachable_one_is_not_sent() {
        let sim = sifen_sim::start(
            "127.0.0.1:0",
            SimConfig {
                require_signature: true,
                ..SimConfig::default()
            },
        )
        .await
        .expect("simulator");
        let now = Utc::now();
        let document = canonical::from_value(sample_document(now)).expect("sample");
        let ruc = issuer_ruc(&document);
        let issuer = sandbox_issuer(&document, &ruc, kuatia_domain::local_time::paraguay_today(now));
        let certificates = ThrowawayCertificates::default();
        let pem = certificates.for_ruc(&ruc).await.expect("certificate");
        let again = certificates.for_ruc(&ruc).await.expect("certificate");
        assert!(Arc::ptr_eq(&pem, &again), "one certificate per RUC");
        let key = SigningKey::from_pem(&pem).expect("key");
        let signed = build::build_and_sign(
            &document,
            &SigningSetup {
                issuer: &issuer,
                key: &key,
                csc_id: TEST_CSC_ID,
                csc: TEST_CSC,
                environment: SifenEnvironment::Test,
            },
            "sandbox".to_owned(),
            draw_number(),
            now,
        )
        .expect("signed");
        let csc = PreviewCsc {
            issuer: &ruc,
            id: TEST_CSC_ID,
            secret: TEST_CSC,
        };

        let configured = PreviewEndpoints {
            target: SifenTarget::Url(sim.base_url()),
            ..PreviewEndpoints::default()
        };
        let exchange = configured
            .send_de(Answerer::TestEndpoint, &signed.xml, &pem, csc)
            .await
            .expect("sent");
        let answer = &exchange.answered.result;
        assert!(answer.status.is_approved(), "{answer:?}");
        assert!(
            exchange.endpoint.starts_with(&sim.base_url()),
            "{}",
            exchange.endpoint
        );
        assert_eq!(sim.simulator.stats().approvals.get(&signed.cdc), Some(&1));

        let nowhere = PreviewEndpoints {
            target: SifenTarget::Url("http://127.0.0.1:9".to_owned()),
            ..PreviewEndpoints::default()
        };
        let e = nowhere
            .send_de(Answerer::TestEndpoint, &signed.xml, &pem, csc)
            .await
            .expect_err("unreachable");
        assert!(matches!(e, SoapError::NotSent { .. }), "{e:?}");

        // The in-process simulation applies the same checks (and sends nothing to the
        // configured endpoint): a tampered DE is refused.
        let tampered = signed.xml.replacen("<dTotGralOpe>", "<dTotGralOpe>1", 1);
        let refused = nowhere
            .send_de(Answerer::InProcess, &tampered, &pem, csc)
            .await
            .expect("answered");
        assert!(
            !refused.answered.result.status.is_approved(),
            "{:?}",
            refused.answered.result
        );
        let approved = nowhere
            .send_de(Answerer::InProcess, &signed.xml, &pem, csc)
            .await
            .expect("answered");
        assert_eq!(approved.answered.result.code(), Some("0260"));
        assert_eq!(approved.endpoint, "in-process simulator");
    }
}
