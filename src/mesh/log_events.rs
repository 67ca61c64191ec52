//! The checkpoints topic and the log protocol as the event loop runs them:
//! publishing a checkpoint message, asking a peer's log, and handing what
//! peers send to the handler ([`MeshHandler::on_checkpoint`],
//! [`MeshHandler::on_log_request`]) under the same fair shares as records
//! and searches. The loop does not look inside: the node's witness does.
//!
//! [`MeshHandler::on_checkpoint`]: super::MeshHandler::on_checkpoint
//! [`MeshHandler::on_log_request`]: super::MeshHandler::on_log_request

use libp2p::gossipsub::{self, PublishError};
use libp2p::request_response::{self, Message, ResponseChannel};
use libp2p::PeerId;
use tracing::{debug, warn};

use super::behaviour::checkpoints_topic;
use super::event_loop::{EventLoop, Internal};
use super::log::{LogRequest, LogResponse, MAX_CHECKPOINT_MESSAGE_BYTES};
use super::pending::LogReply;
use super::quota::Work;
use super::Verdict;

impl EventLoop {
    /// Publishes on the checkpoints topic; `false` when no subscribed peer
    /// was there (a checkpoint is published again later anyway).
    pub(super) fn publish_checkpoint(&mut self, message: Vec<u8>) -> bool {
        let bytes = message.len() as u64;
        let g = &mut self.swarm.behaviour_mut().gossipsub;
        match g.publish(checkpoints_topic(), message) {
            Ok(_) => {
                self.stats.checkpoint_wire(true, bytes);
                true
            }
            Err(PublishError::NoPeersSubscribedToTopic | PublishError::Duplicate) => false,
            Err(e) => {
                warn!(error = %e, "checkpoint publish failed");
                false
            }
        }
    }

    /// Sends `request` to `peer`; the answer reaches `reply` from
    /// [`Self::on_log`].
    pub(super) fn send_log_request(&mut self, peer: PeerId, request: LogRequest, reply: LogReply) {
        let id = self.swarm.behaviour_mut().log.send_request(&peer, request);
        self.log_pending.insert(id, reply);
    }

    /// A message of the checkpoints topic, to the handler.
    pub(super) fn on_checkpoint_message(
        &mut self,
        message_id: gossipsub::MessageId,
        source: PeerId,
        message: gossipsub::Message,
    ) {
        self.stats.checkpoint_wire(false, message.data.len() as u64);
        let early = match message.source {
            _ if message.data.len() > MAX_CHECKPOINT_MESSAGE_BYTES => {
                Err(Verdict::Reject("too_large"))
            }
            None => Err(Verdict::Reject("unsigned")),
            Some(author) => self
                .permit(Work::Gossip, source)
                .map(|permit| (permit, author))
                .map_err(Verdict::Ignore),
        };
        let (permit, author) = match early {
            Ok(ok) => ok,
            Err(verdict) => {
                return self.on_internal(Internal::Checkpoint {
                    message_id,
                    source,
                    verdict,
                })
            }
        };
        let work = self.handler.on_checkpoint(message.data, author, source);
        let span = tracing::debug_span!("mesh_checkpoint", peer = %source);
        self.spawn_task(permit, span, work, move |v| Internal::Checkpoint {
            message_id,
            source,
            verdict: v.unwrap_or(Verdict::Ignore("handler_timeout")),
        });
    }

    /// Sends the handler's answer to a log request.
    pub(super) fn on_log_answer(
        &mut self,
        channel: ResponseChannel<LogResponse>,
        response: Option<LogResponse>,
    ) {
        let response = response.unwrap_or_else(|| LogResponse::refused("busy"));
        if self
            .swarm
            .behaviour_mut()
            .log
            .send_response(channel, response)
            .is_err()
        {
            debug!("log requester gone");
        }
    }

    /// An event of the log protocol.
    pub(super) fn on_log(&mut self, event: request_response::Event<LogRequest, LogResponse>) {
        match event {
            request_response::Event::Message {
                peer,
                message:
                    Message::Request {
                        request, channel, ..
                    },
                ..
            } => {
                let permit = match self.permit(Work::Search, peer) {
                    Ok(permit) => permit,
                    Err(reason) => {
                        let busy = LogResponse::refused(reason);
                        let _ = self.swarm.behaviour_mut().log.send_response(channel, busy);
                        return;
                    }
                };
                let work = self.handler.on_log_request(request, peer);
                let span = tracing::debug_span!("mesh_log", %peer);
                self.spawn_task(permit, span, work, move |response| Internal::Log {
                    channel,
                    response,
                });
            }
            request_response::Event::Message {
                peer,
                message:
                    Message::Response {
                        request_id,
                        response,
                    },
                ..
            } => {
                let answer = match response.check() {
                    Ok(()) => Ok(response),
                    Err(bound) => {
                        debug!(%peer, bound, "log response out of bounds");
                        Err(format!("the answer breaks a bound: {bound}"))
                    }
                };
                if let Some(reply) = self.log_pending.remove(&request_id) {
                    let _ = reply.send(Ok(answer));
                }
            }
            request_response::Event::OutboundFailure {
                request_id, error, ..
            } => {
                if let Some(reply) = self.log_pending.remove(&request_id) {
                    let _ = reply.send(Ok(Err(error.to_string())));
                }
            }
            request_response::Event::InboundFailure { peer, error, .. } => {
                debug!(%peer, %error, "inbound log request failed");
            }
            request_response::Event::ResponseSent { .. } => {}
        }
    }
}
