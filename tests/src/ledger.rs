//! A small real aggregate for exercising the event store through cqrs-es: an account that is
//! opened, receives deposits and withdrawals, and is closed. Its rules are checked by
//! given/when/then tests; the store tests use it as a realistic stream.

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};

/// Commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerCommand {
    /// Opens the account (repeating it is harmless).
    Open {
        /// Owner name.
        owner: String,
    },
    /// Adds guaraníes.
    Deposit {
        /// Amount, positive.
        amount: i64,
    },
    /// Takes guaraníes out, never below zero.
    Withdraw {
        /// Amount, positive.
        amount: i64,
    },
    /// Closes the account (only when empty).
    Close,
}

/// Events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LedgerEvent {
    /// Opened.
    Opened {
        /// Owner.
        owner: String,
    },
    /// Money in.
    Deposited {
        /// Amount.
        amount: i64,
    },
    /// Money out.
    Withdrawn {
        /// Amount.
        amount: i64,
    },
    /// Closed.
    Closed,
}

impl DomainEvent for LedgerEvent {
    fn event_type(&self) -> String {
        match self {
            Self::Opened { .. } => "LedgerOpened",
            Self::Deposited { .. } => "LedgerDeposited",
            Self::Withdrawn { .. } => "LedgerWithdrawn",
            Self::Closed => "LedgerClosed",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        "1".to_owned()
    }
}

/// Refusals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// Not opened yet.
    #[error("the account is not open")]
    NotOpen,
    /// Closed already.
    #[error("the account is closed")]
    Closed,
    /// Amount must be positive.
    #[error("amounts must be positive")]
    NonPositive,
    /// Balance too low.
    #[error("insufficient funds: balance {0}")]
    Insufficient(i64),
    /// Balance not zero.
    #[error("only an empty account can be closed")]
    NotEmpty,
}

/// State.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// Opened.
    pub open: bool,
    /// Closed.
    pub closed: bool,
    /// Balance in guaraníes.
    pub balance: i64,
}

impl Aggregate for Ledger {
    const TYPE: &'static str = "ledger";
    type Command = LedgerCommand;
    type Event = LedgerEvent;
    type Error = LedgerError;
    type Services = ();

    async fn handle(
        &mut self,
        command: LedgerCommand,
        _: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), LedgerError> {
        if self.closed {
            return Err(LedgerError::Closed);
        }
        match command {
            LedgerCommand::Open { owner } => {
                if !self.open {
                    sink.write(LedgerEvent::Opened { owner }, self).await;
                }
            }
            LedgerCommand::Deposit { amount } => {
                self.require_open(amount)?;
                sink.write(LedgerEvent::Deposited { amount }, self).await;
            }
            LedgerCommand::Withdraw { amount } => {
                self.require_open(amount)?;
                if amount > self.balance {
                    return Err(LedgerError::Insufficient(self.balance));
                }
                sink.write(LedgerEvent::Withdrawn { amount }, self).await;
            }
            LedgerCommand::Close => {
                if !self.open {
                    return Err(LedgerError::NotOpen);
                }
                if self.balance != 0 {
                    return Err(LedgerError::NotEmpty);
                }
                sink.write(LedgerEvent::Closed, self).await;
            }
        }
        Ok(())
    }

    fn apply(&mut self, event: LedgerEvent) {
        match event {
            LedgerEvent::Opened { .. } => self.open = true,
            LedgerEvent::Deposited { amount } => self.balance += amount,
            LedgerEvent::Withdrawn { amount } => self.balance -= amount,
            LedgerEvent::Closed => self.closed = true,
        }
    }
}

impl Ledger {
    fn require_open(&self, amount: i64) -> Result<(), LedgerError> {
        if !self.open {
            return Err(LedgerError::NotOpen);
        }
        if amount <= 0 {
            return Err(LedgerError::NonPositive);
        }
        Ok(())
    }
}
