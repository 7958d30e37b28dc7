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

/// An [`Approver`] that asks the person behind the MCP client (`elicitation/create`, a form
/// with no fields: accept = approve). Put it in `CoreConfig::approver` *and* in
/// `ServerOptions::approver`; the server binds it to the connected client.
///
/// When the client did not declare the elicitation capability (or speaks a protocol revision
/// that forbids server-to-client requests), every `ask` is declined, which the core reports as
/// `permission_denied`: the configured mode decides alone.
#[derive(Default)]
pub struct ElicitingApprover {
    peer: Mutex<Option<Peer<RoleServer>>>,
}

impl std::fmt::Debug for ElicitingApprover {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ElicitingApprover")
            .field("bound", &self.peer().is_some())
            .finish()
    }
}

impl ElicitingApprover {
    /// An approver not bound to any client yet (declines until bound).
    pub fn new() -> Arc<ElicitingApprover> {
        Arc::new(ElicitingApprover::default())
    }

    /// Binds the approver to the client of the current connection.
    pub(crate) fn bind(&self, peer: Peer<RoleServer>) {
        *self.peer.lock().unwrap_or_else(PoisonError::into_inner) = Some(peer);
    }

    fn peer(&self) -> Option<Peer<RoleServer>> {
        self.peer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Approver for ElicitingApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        Box::pin(async move {
            let Some(peer) = self.peer().filter(|peer| {
                peer.supported_elicitation_modes()
                    .contains(&ElicitationMode::Form)
            }) else {
                return ApprovalAnswer::Decline(NO_ELICITATION.to_owned());
            };
            let message = format!(
                "Allow {} ({} risk)? {}\nWhy you are asked: {}",
                request.tool_name, request.risk, request.summary, request.reason
            );
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: ElicitationSchema::new(BTreeMap::new()),
            };
            match peer.create_elicitation(params).await {
                Ok(answer) if answer.action == ElicitationAction::Accept => ApprovalAnswer::Approve,
                Ok(_) => {
                    ApprovalAnswer::Decline("the person declined in the MCP client".to_owned())
                }
                Err(error) => {
                    ApprovalAnswer::Decline(format!("the MCP client could not be asked: {error}"))
                }
            }
        })
    }
}
