//! The requests that do not block their caller, built from the API wing's types on the
//! engine: futures ([`pending`]), batches ([`batch`]) and stream-ordered requests
//! ([`ordered`]). The engine below knows only slots and jobs; the API wing below knows
//! nothing of these.

pub(crate) mod batch;
pub(crate) mod ordered;
pub(crate) mod pending;
