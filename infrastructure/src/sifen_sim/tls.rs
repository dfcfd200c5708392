//! HTTPS for the simulator: it speaks HTTP or HTTPS, with optional client certificates.
//!
//! SIFEN speaks TLS 1.2 with mutual authentication, and so does the simulator when
//! given a server certificate: rustls with the aws-lc-rs provider (already built for reqwest and
//! sqlx), TLS 1.2 only. TLS 1.2 also keeps the failure where SIFEN has it: a client certificate
//! the server refuses ends the handshake before the client writes its request, so our client
//! sees a connection that never opened ([`Delivery::NotSent`]), not an unknown outcome.
//!
//! Client certificates ([`ClientAuth`]):
//! - [`ClientAuth::Optional`]: asked for, any accepted, none required.
//! - [`ClientAuth::Required`]: required, any accepted (test certificates are self-signed). The
//!   handshake signature is still verified, so the client does hold the certificate's key.
//! - [`ClientAuth::RequiredFromCa`]: required and verified against these CA certificates
//!   (webpki: chain, validity dates, clientAuth usage). A self-signed client certificate given
//!   as its own "CA" pins exactly that certificate.
//!
//! The client certificate of each connection reaches the handlers as [`TlsPeer`] (its RUC is
//! read like the signer's, MT §7.5; see `Simulator::soap`). Handshakes run on their own tasks,
//! so a slow or stuck client cannot hold up the others.
//!
//! [`Delivery::NotSent`]: crate::sifen_soap::Delivery::NotSent

use super::{SimError, Simulator, lock};
use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use rustls::DistinguishedName;
use rustls::RootCertStore;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use zeroize::Zeroizing;

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Which client certificates the simulator asks for and accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAuth {
    /// Asked for; any certificate is accepted, and none is needed.
    Optional,
    /// Required; any certificate is accepted (`--require-client-cert`).
    Required,
    /// Required and verified against these CA certificates, PEM (`--client-ca FILE`).
    RequiredFromCa(Vec<u8>),
}

impl ClientAuth {
    /// Whether a connection without a client certificate is refused.
    pub fn is_required(&self) -> bool {
        !matches!(self, Self::Optional)
    }
}

/// The simulator's TLS side: a rustls server configuration. Cheap to clone.
#[derive(Clone)]
pub struct SimTls {
    config: Arc<rustls::ServerConfig>,
    client_auth_required: bool,
}

impl std::fmt::Debug for SimTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimTls")
            .field("client_auth_required", &self.client_auth_required)
            .finish_non_exhaustive()
    }
}

fn tls_error(what: &str, e: impl std::fmt::Display) -> SimError {
    SimError::Tls(format!("{what}: {e}"))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

impl SimTls {
    /// From the server's certificate chain (PEM, leaf first) and private key (PEM: PKCS#8,
    /// PKCS#1 or SEC1), and which client certificates to take.
    pub fn from_pem(
        cert_chain_pem: &[u8],
        key_pem: &[u8],
        client_auth: ClientAuth,
    ) -> Result<Self, SimError> {
        let chain = CertificateDer::pem_slice_iter(cert_chain_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_error("the server certificate", e))?;
        if chain.is_empty() {
            return Err(SimError::Tls(
                "the server certificate: no CERTIFICATE in the PEM".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| tls_error("the server key", e))?;
        let provider = provider();
        let verifier: Arc<dyn ClientCertVerifier> = match &client_auth {
            ClientAuth::Optional => Arc::new(AnyClientCertificate {
                provider: provider.clone(),
                mandatory: false,
            }),
            ClientAuth::Required => Arc::new(AnyClientCertificate {
                provider: provider.clone(),
                mandatory: true,
            }),
            ClientAuth::RequiredFromCa(pem) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| tls_error("the client CA", e))?;
                    roots.add(cert).map_err(|e| tls_error("the client CA", e))?;
                }
                if roots.is_empty() {
                    return Err(SimError::Tls("the client CA: no CERTIFICATE in the PEM".into()));
                }
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| tls_error("the client CA", e))?
            }
        };
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS12])
            .map_err(|e| tls_error("TLS", e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| tls_error("the server certificate and key", e))?;
        // SIFEN is HTTP/1.1 (WS-I Basic Profile).
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
            client_auth_required: client_auth.is_required(),
        })
    }

    /// From PEM files: `--tls-cert`, `--tls-key`, and `--client-ca` or `--require-client-cert`.
    pub fn from_files(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
        require_client_cert: bool,
    ) -> Result<Self, SimError> {
        let read = |what: &str, path: &Path| {
            std::fs::read(path).map_err(|e| SimError::Tls(format!("{what} {}: {e}", path.display())))
        };
        let chain = read("the server certificate", cert)?;
        let key = Zeroizing::new(read("the server key", key)?);
        let client_auth = match client_ca {
            Some(ca) => ClientAuth::RequiredFromCa(read("the client CA", ca)?),
            None if require_client_cert => ClientAuth::Required,
            None => ClientAuth::Optional,
        };
        Self::from_pem(&chain, &key, client_auth)
    }

    /// Whether connections without a client certificate are refused.
    pub fn client_auth_required(&self) -> bool {
        self.client_auth_required
    }
}

/// A generated server certificate and its key (PEM).
pub struct ServerCertificate {
    /// The certificate, PEM: what clients trust (`SifenClient`'s extra roots).
    pub cert_pem: Vec<u8>,
    /// The private key, PKCS#8 PEM.
    pub key_pem: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for ServerCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerCertificate")
            .field("cert_pem", &String::from_utf8_lossy(&self.cert_pem))
            .finish_non_exhaustive()
    }
}

impl ServerCertificate {
    /// A self-signed server certificate (ECDSA P-256, valid from yesterday for a year, serverAuth,
    /// not a CA) for `hosts`: names and IP addresses, e.g. `["localhost", "127.0.0.1"]`. For
    /// tests and local runs; clients trust it by taking `cert_pem` as an extra root.
    pub fn self_signed(hosts: &[&str]) -> Result<Self, SimError> {
        use openssl::ec::{EcGroup, EcKey};
        use openssl::hash::MessageDigest;
        use openssl::nid::Nid;
        use openssl::pkey::PKey;
        use openssl::x509::X509NameBuilder;
        use openssl::x509::extension::{
            BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
        };
        let build = || -> Result<Self, openssl::error::ErrorStack> {
            let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
            let key = PKey::from_ec_key(EcKey::generate(&group)?)?;
            let mut name = X509NameBuilder::new()?;
            name.append_entry_by_nid(Nid::COMMONNAME, hosts.first().copied().unwrap_or("localhost"))?;
            name.append_entry_by_nid(Nid::ORGANIZATIONNAME, "kuatia SIFEN simulator")?;
            let now = chrono::Utc::now();
            let mut builder = crate::selfsigned::self_signed_builder(
                &name.build(),
                &key,
                now - chrono::Duration::days(1),
                now + chrono::Duration::days(365),
            )?;
            builder.append_extension(BasicConstraints::new().critical().build()?)?;
            builder.append_extension(KeyUsage::new().critical().digital_signature().build()?)?;
            builder.append_extension(ExtendedKeyUsage::new().server_auth().build()?)?;
            let mut san = SubjectAlternativeName::new();
            for host in hosts {
                if host.parse::<std::net::IpAddr>().is_ok() {
                    san.ip(host);
                } else {
                    san.dns(host);
                }
            }
            let san = san.build(&builder.x509v3_context(None, None))?;
            builder.append_extension(san)?;
            builder.sign(&key, MessageDigest::sha256())?;
            Ok(Self {
                cert_pem: builder.build().to_pem()?,
                key_pem: Zeroizing::new(key.private_key_to_pem_pkcs8()?),
            })
        };
        build().map_err(|e| tls_error("generating a server certificate", e))
    }

    /// The TLS side for this certificate.
    pub fn tls(&self, client_auth: ClientAuth) -> Result<SimTls, SimError> {
        SimTls::from_pem(&self.cert_pem, &self.key_pem, client_auth)
    }
}

/// Accepts any client certificate that parses as X.509, and checks that the client holds its
/// key (the handshake signature).
#[derive(Debug)]
struct AnyClientCertificate {
    provider: Arc<CryptoProvider>,
    mandatory: bool,
}

impl ClientCertVerifier for AnyClientCertificate {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        use x509_parser::prelude::{FromDer, X509Certificate};
        X509Certificate::from_der(end_entity)
            .map(|_| ClientCertVerified::assertion())
            .map_err(|_| rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Who is at the other end of a TLS connection: what the handlers see (as
/// `ConnectInfo<TlsPeer>`).
#[derive(Debug, Clone)]
pub struct TlsPeer {
    /// The client's address.
    pub addr: SocketAddr,
    /// The client certificate (DER), when one was presented.
    pub certificate: Option<Arc<[u8]>>,
    /// Whether the server requires client certificates.
    pub client_auth_required: bool,
}

impl Connected<IncomingStream<'_, TlsListener>> for TlsPeer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// A TCP listener whose connections come out TLS-terminated: an `axum::serve` listener.
/// Dropping it stops accepting.
pub struct TlsListener {
    incoming: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, TlsPeer)>,
    local: SocketAddr,
    client_auth_required: bool,
    acceptor: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl TlsListener {
    /// Takes over `listener`; each accepted connection is handshaken on its own task. Refused
    /// handshakes are counted in the simulator's `handshakes_refused`.
    pub fn new(listener: TcpListener, tls: &SimTls, simulator: &Simulator) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (sender, incoming) = tokio::sync::mpsc::channel(64);
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
        let client_auth_required = tls.client_auth_required;
        let simulator = simulator.clone();
        let acceptor = tokio::spawn(async move {
            loop {
                let (tcp, addr) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(error = %e, "the SIFEN simulator could not accept a connection");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                let simulator = simulator.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let certificate = stream
                                .get_ref()
                                .1
                                .peer_certificates()
                                .and_then(<[CertificateDer<'_>]>::first)
                                .map(|c| Arc::from(c.as_ref()));
                            let peer = TlsPeer {
                                addr,
                                certificate,
                                client_auth_required,
                            };
                            let _ = sender.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => {
                            lock(&simulator.inner.state).counters.handshakes_refused += 1;
                            tracing::info!(%addr, error = %e, "the SIFEN simulator refused a TLS handshake");
                        }
                        Err(_) => {
                            lock(&simulator.inner.state).counters.handshakes_refused += 1;
                            tracing::info!(%addr, "a TLS handshake with the SIFEN simulator timed out");
                        }
                    }
                });
            }
        });
        Ok(Self {
            incoming,
            local,
            client_auth_required,
            acceptor,
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = TlsPeer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(accepted) => accepted,
            // The acceptor task is gone (aborted): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(TlsPeer {
            addr: self.local,
            certificate: None,
            client_auth_required: self.client_auth_required,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sifen_sim::{SimConfig, start_tls};
    use crate::sifen_soap::client::{ClientIdentity, SifenClient, SoapClientConfig};
    use crate::sifen_soap::{Delivery, SoapError};
    use openssl::asn1::{Asn1Integer, Asn1Time};
    use openssl::bn::BigNum;
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::{PKey, Private};
    use openssl::x509::extension::{BasicConstraints, ExtendedKeyUsage, KeyUsage};
    use openssl::x509::{X509, X509NameBuilder};

    /// A certificate for `cn` (with `RUC{ruc}` as serialNumber when given), signed by `issuer`
    /// (self-signed when `None`); a CA when `ca`.
    fn certificate(
        cn: &str,
        ruc: Option<&str>,
        ca: bool,
        issuer: Option<(&X509, &PKey<Private>)>,
    ) -> (PKey<Private>, X509) {
        let key = PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_nid(Nid::COMMONNAME, cn).unwrap();
        if let Some(ruc) = ruc {
            name.append_entry_by_nid(Nid::SERIALNUMBER, &format!("RUC{ruc}"))
                .unwrap();
        }
        let name = name.build();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        let serial = Asn1Integer::from_bn(&BigNum::from_u32(rand::random::<u32>() | 1).unwrap()).unwrap();
        b.set_serial_number(&serial).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(issuer.map_or(&name, |(c, _)| c.subject_name()))
            .unwrap();
        b.set_pubkey(&key).unwrap();
        let now = chrono::Utc::now().timestamp();
        b.set_not_before(&Asn1Time::from_unix(now - 86_400).unwrap())
            .unwrap();
        b.set_not_after(&Asn1Time::from_unix(now + 86_400 * 30).unwrap())
            .unwrap();
        if ca {
            b.append_extension(BasicConstraints::new().critical().ca().build().unwrap())
                .unwrap();
            b.append_extension(
                KeyUsage::new()
                    .critical()
                    .key_cert_sign()
                    .crl_sign()
                    .build()
                    .unwrap(),
            )
            .unwrap();
        } else {
            b.append_extension(BasicConstraints::new().critical().build().unwrap())
                .unwrap();
            b.append_extension(KeyUsage::new().critical().digital_signature().build().unwrap())
                .unwrap();
            b.append_extension(ExtendedKeyUsage::new().client_auth().build().unwrap())
                .unwrap();
        }
        b.sign(issuer.map_or(&key, |(_, k)| k), MessageDigest::sha256())
            .unwrap();
        (key, b.build())
    }

    fn identity(key: &PKey<Private>, cert: &X509) -> ClientIdentity {
        ClientIdentity::from_key_and_chain(&key.private_key_to_pem_pkcs8().unwrap(), &cert.to_pem().unwrap())
    }

    fn quick() -> SoapClientConfig {
        SoapClientConfig {
            connect_timeout_ms: 5_000,
            read_timeout_ms: 5_000,
            total_timeout_ms: 10_000,
            ..SoapClientConfig::default()
        }
    }

    #[tokio::test]
    async fn a_client_certificate_issued_by_the_client_ca_is_accepted_and_others_are_not() {
        let (ca_key, ca) = certificate("Test CA", None, true, None);
        let (leaf_key, leaf) = certificate("DEMO S.A.", Some("80069563-1"), false, Some((&ca, &ca_key)));
        let (stranger_key, stranger) = certificate("DEMO S.A.", Some("80069563-1"), false, None);
        let server = ServerCertificate::self_signed(&["127.0.0.1"]).unwrap();
        let tls = server
            .tls(ClientAuth::RequiredFromCa(ca.to_pem().unwrap()))
            .unwrap();
        assert!(tls.client_auth_required());
        let sim = start_tls("127.0.0.1:0", SimConfig::default(), tls).await.unwrap();

        let client = |id: &ClientIdentity| {
            SifenClient::new(&sim.base_url(), &quick(), Some(id), Some(&server.cert_pem)).unwrap()
        };
        let answer = client(&identity(&leaf_key, &leaf))
            .query_ruc(1, "80069563")
            .await
            .unwrap();
        // A siConsRUC answer: the request went through (the RUC is unknown to a fresh simulator).
        assert_eq!(answer.result.code, "0500", "{answer:?}");

        let err = client(&identity(&stranger_key, &stranger))
            .query_ruc(2, "80069563")
            .await
            .unwrap_err();
        assert!(matches!(err, SoapError::NotSent { .. }), "{err:?}");
        assert_eq!(err.delivery(), Delivery::NotSent);
        let counted = sim.simulator.stats().totals.requests.values().sum::<u64>();
        assert_eq!(counted, 1);
    }

    #[tokio::test]
    async fn optional_client_certificates_let_anyone_in_and_plain_http_gets_no_answer() {
        let server = ServerCertificate::self_signed(&["127.0.0.1", "localhost"]).unwrap();
        let sim = start_tls(
            "127.0.0.1:0",
            SimConfig::default(),
            server.tls(ClientAuth::Optional).unwrap(),
        )
        .await
        .unwrap();
        let anonymous = SifenClient::new(&sim.base_url(), &quick(), None, Some(&server.cert_pem)).unwrap();
        assert_eq!(
            anonymous.query_ruc(1, "80069563").await.unwrap().result.code,
            "0500"
        );
        let plain = SifenClient::new(
            &sim.base_url().replace("https://", "http://"),
            &quick(),
            None,
            None,
        )
        .unwrap();
        assert!(plain.query_ruc(2, "80069563").await.is_err());
    }

    #[test]
    fn unusable_certificates_keys_and_cas_are_configuration_errors() {
        let server = ServerCertificate::self_signed(&["localhost"]).unwrap();
        assert!(format!("{server:?}").contains("BEGIN CERTIFICATE"));
        assert!(!format!("{server:?}").contains("PRIVATE KEY"));
        let tls = |cert: &[u8], key: &[u8], auth| SimTls::from_pem(cert, key, auth).map(|_| ());
        assert!(tls(&server.cert_pem, &server.key_pem, ClientAuth::Required).is_ok());
        assert!(matches!(
            tls(b"junk", &server.key_pem, ClientAuth::Optional),
            Err(SimError::Tls(_))
        ));
        assert!(matches!(
            tls(&server.cert_pem, b"junk", ClientAuth::Optional),
            Err(SimError::Tls(_))
        ));
        let other = ServerCertificate::self_signed(&["localhost"]).unwrap();
        assert!(matches!(
            tls(&server.cert_pem, &other.key_pem, ClientAuth::Optional),
            Err(SimError::Tls(_))
        ));
        assert!(matches!(
            tls(
                &server.cert_pem,
                &server.key_pem,
                ClientAuth::RequiredFromCa(b"none".to_vec())
            ),
            Err(SimError::Tls(_))
        ));
        assert!(matches!(
            SimTls::from_files(
                Path::new("/nonexistent/cert.pem"),
                Path::new("/nonexistent/key.pem"),
                None,
                false
            ),
            Err(SimError::Tls(m)) if m.contains("/nonexistent/cert.pem")
        ));
    }
}
