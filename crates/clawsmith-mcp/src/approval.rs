//! `ask` decisions put to the MCP client through elicitation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use clawsmith_core::{ApprovalAnswer, ApprovalFuture, ApprovalRequest, Approver};
use rmcp::Peer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, RoleServer};

/// Why a call was declined when the client cannot be asked.
pub const NO_ELICITATION: &str = "the MCP client did not declare elicitation, so no one can \
     approve it; restart `clawsmith mcp` with `--mode full` or add an allow rule";

/// Why the first round of a multi-round-trip call was declined: the question went back to the
/// client inside an `input_required` result, and the retried call is a new turn.
pub const APPROVAL_REQUESTED: &str = "approval was requested from the MCP client; the call runs \
     again as a new turn once the person answers";

/// An [`Approver`] that asks the person behind the MCP client with a form that has no fields
/// (accept = approve; decline or cancel = refuse). Put it in `CoreConfig::approver` *and* in
/// `ServerOptions::approver`; the server binds it to each request's client.
///
/// - A client on a revision with an `initialize` handshake (up to 2025-11-25) that declared
///   elicitation is asked with an `elicitation/create` request while the call waits.
/// - A client on a stateless revision (2026-07-28) that declares elicitation in its request
///   metadata is asked through a multi-round-trip `input_required` result: the first round's
///   call is refused with [`APPROVAL_REQUESTED`], and the retried request carries the answer.
/// - Any other client is never asked: every `ask` is declined with [`NO_ELICITATION`], which
///   the core reports as `permission_denied`, so the configured mode decides alone.
#[derive(Default)]
pub struct ElicitingApprover {
    binding: Mutex<Binding>,
}

#[derive(Default)]
enum Binding {
    #[default]
    Unbound,
    /// Ask with a server-to-client request (legacy revisions).
    Peer(Peer<RoleServer>),
    /// Multi-round trip: the answer the retried request carries, if any, and the question to
    /// send back when there was none.
    RoundTrip {
        answer: Option<bool>,
        question: Option<String>,
    },
}

impl std::fmt::Debug for ElicitingApprover {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let binding = match *self.lock() {
            Binding::Unbound => "unbound",
            Binding::Peer(_) => "peer",
            Binding::RoundTrip { .. } => "round-trip",
        };
        formatter
            .debug_struct("ElicitingApprover")
            .field("binding", &binding)
            .finish()
    }
}

impl ElicitingApprover {
    /// An approver not bound to any client yet (declines until bound).
    pub fn new() -> Arc<ElicitingApprover> {
        Arc::new(ElicitingApprover::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Binding> {
        self.binding.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks through `peer` (server-to-client requests), or not at all when it did not declare
    /// form elicitation.
    pub(crate) fn bind_peer(&self, peer: Peer<RoleServer>) {
        let can_ask = peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form);
        *self.lock() = if can_ask {
            Binding::Peer(peer)
        } else {
            Binding::Unbound
        };
    }

    /// Answers from a multi-round-trip retry (`None`: no answer yet, ask).
    pub(crate) fn bind_round_trip(&self, answer: Option<bool>) {
        *self.lock() = Binding::RoundTrip {
            answer,
            question: None,
        };
    }

    /// Nobody can be asked.
    pub(crate) fn unbind(&self) {
        *self.lock() = Binding::Unbound;
    }

    /// The question a round-trip call asked, to send back as an `input_required` result.
    pub(crate) fn take_question(&self) -> Option<String> {
        match &mut *self.lock() {
            Binding::RoundTrip { question, .. } => question.take(),
            _ => None,
        }
    }
}

/// The form shown to the person: the message only, no fields.
pub(crate) fn approval_form(message: String) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::new(BTreeMap::new()),
    }
}

fn question(request: &ApprovalRequest) -> String {
    format!(
        "Allow {} ({} risk)? {}\nWhy you are asked: {}",
        request.tool_name, request.risk, request.summary, request.reason
    )
}

fn declined() -> ApprovalAnswer {
    ApprovalAnswer::Decline("the person declined in the MCP client".to_owned())
}

impl Approver for ElicitingApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        Box::pin(async move {
            let peer = {
                let mut binding = self.lock();
                match &mut *binding {
                    Binding::Unbound => return ApprovalAnswer::Decline(NO_ELICITATION.to_owned()),
                    Binding::RoundTrip {
                        answer,
                        question: asked,
                    } => {
                        // One answer approves one ask: the retried call, nothing after it.
                        return match answer.take() {
                            Some(true) => ApprovalAnswer::Approve,
                            Some(false) => declined(),
                            None => {
                                *asked = Some(question(request));
                                ApprovalAnswer::Decline(APPROVAL_REQUESTED.to_owned())
                            }
                        };
                    }
                    Binding::Peer(peer) => peer.clone(),
                }
            };
            match peer
                .create_elicitation(approval_form(question(request)))
                .await
            {
                Ok(answer) if answer.action == ElicitationAction::Accept => ApprovalAnswer::Approve,
                Ok(_) => declined(),
                Err(error) => {
                    ApprovalAnswer::Decline(format!("the MCP client could not be asked: {error}"))
                }
            }
        })
    }
}
