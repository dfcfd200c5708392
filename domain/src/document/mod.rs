//! Sales documents: the canonical document of the contract ([`canonical`]), its issues and their
//! catalogue ([`issues`]), business validation ([`validation`]), routing to a channel, branch and point
//! ([`routing`]) and the Document aggregate
//! ([`aggregate`]).

pub mod aggregate;
pub mod canonical;
pub mod issues;
pub mod routing;
pub mod validation;
