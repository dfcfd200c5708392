//! The SOAP client behind the workflows' SIFEN ports (`kuatia_application::process::ports`):
//! [`SifenClient`] is a [`SifenGateway`], and [`SoapConnector`] opens one per endpoint and
//! certificate with the service's timeouts.

use async_trait::async_trait;
use kuatia_application::process::ports::{SifenConnector, SifenGateway};
use std::net::SocketAddr;
use std::sync::Arc;

use super::client::{Answered, ClientIdentity, SifenClient, SoapClientConfig};
use super::{DeQuery, DeReception, EventReception, LotQuery, LotReception, LotResult, SoapError};

#[async_trait]
impl SifenGateway for SifenClient {
    async fn send_de(&self, d_id: u64, signed_rde: &str) -> Result<Answered<DeReception>, SoapError> {
        SifenClient::send_de(self, d_id, signed_rde).await
    }

    async fn send_lot(&self, d_id: u64, signed_rdes: &[&str]) -> Result<Answered<LotReception>, SoapError> {
        SifenClient::send_lot(self, d_id, signed_rdes).await
    }

    async fn lot_result(&self, d_id: u64, query: &LotQuery) -> Result<Answered<LotResult>, SoapError> {
        SifenClient::lot_result(self, d_id, query).await
    }

    async fn query_de(&self, d_id: u64, cdc: &str) -> Result<Answered<DeQuery>, SoapError> {
        SifenClient::query_de(self, d_id, cdc).await
    }

    async fn send_events(
        &self,
        d_id: u64,
        signed_events: &[&str],
    ) -> Result<Answered<EventReception>, SoapError> {
        SifenClient::send_events(self, d_id, signed_events).await
    }
}

/// Opens SOAP clients with the service's timeouts and extra roots.
#[derive(Debug, Clone, Default)]
pub struct SoapConnector {
    config: SoapClientConfig,
}

impl SoapConnector {
    /// With these timeouts, headers and roots.
    pub fn new(config: SoapClientConfig) -> Self {
        Self { config }
    }
}

impl SifenConnector for SoapConnector {
    fn connect(
        &self,
        endpoint: &str,
        identity_pem: &[u8],
        pinned: Option<SocketAddr>,
    ) -> Result<Arc<dyn SifenGateway>, String> {
        let identity = ClientIdentity::from_pem(identity_pem.to_vec());
        SifenClient::pinned(endpoint, &self.config, Some(&identity), None, pinned)
            .map(|client| Arc::new(client) as Arc<dyn SifenGateway>)
            .map_err(|e| e.to_string())
    }
}
