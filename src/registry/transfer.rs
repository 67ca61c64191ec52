//! Moving a registration between registries: the owner's node signs a
//! [`Transfer`] of an id it registered to another node's key
//! ([`Registry::hand_over`]); that node registers the id with it
//! ([`Registry::take_over`]), keeps it, and every record it issues for
//! the id carries it, so the nodes that hold the old owner's record take
//! the new one (`federation`'s ownership rule).

use ed25519_dalek::VerifyingKey;
use serde_json::Value;

use super::{Registry, RegistryError};
use crate::record::{RecordBody, Transfer};
use crate::store::{Expect, PutOutcome};

impl Registry {
    /// Signs the hand-over of `id`, registered here and live, to the
    /// registry whose node key is `to`. It covers the registration as it
    /// is now: an update here after it ends it.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`], [`RegistryError::NotLocal`],
    /// [`RegistryError::Store`].
    pub async fn hand_over(&self, id: &str, to: &VerifyingKey) -> Result<Transfer, RegistryError> {
        let not_found = || RegistryError::NotFound { id: id.to_owned() };
        let held = self.store.get(id).await?.ok_or_else(not_found)?;
        if !matches!(held.body, RecordBody::Descriptor(_)) {
            return Err(not_found());
        }
        let key = self.issuer.key();
        if !self.store.is_local(id).await? || held.record.signer() != &key.verifying_key() {
            return Err(RegistryError::NotLocal { id: id.to_owned() });
        }
        Ok(Transfer::sign(id, to, held.body.seq(), key))
    }

    /// Registers `doc` under the id `transfer` hands to this node: the
    /// previous owner's consent, checked against the record held for the
    /// id (if any), kept, and carried by every record issued for it.
    ///
    /// # Errors
    /// [`RegistryError::Invalid`] (the document, or an id other than the
    /// transfer's), [`RegistryError::TransferRefused`] (not for this node,
    /// not signed by the id's owner, or the owner wrote after it), and as
    /// [`Registry::register`].
    pub async fn take_over(
        &self,
        doc: Value,
        transfer: Transfer,
    ) -> Result<(PutOutcome, Value), RegistryError> {
        let id = transfer.agent_id.clone();
        match doc.get("id") {
            None | Some(Value::Null) => {}
            Some(Value::String(body_id)) if *body_id == id => {}
            Some(_) => {
                return Err(RegistryError::invalid(
                    "/id",
                    format!("the transfer is for {id:?}, not the document's id"),
                ))
            }
        }
        let refused = |reason: String| RegistryError::TransferRefused {
            id: id.clone(),
            reason,
        };
        let own = self.issuer.key().verifying_key();
        transfer
            .verify_for(&id, &own)
            .map_err(|e| refused(format!("{e} (this node's key is the one it must name)")))?;
        let expect = match self.store.get(&id).await? {
            Some(held) if held.record.signer() == &own => Expect::LocalOrAbsent,
            Some(held) if transfer.covers(held.record.signer(), held.body.seq()) => {
                Expect::Held(held.body.seq())
            }
            Some(_) => {
                return Err(refused(
                    "it is not signed by the key that holds the id here, or that key wrote \
                     the id again after signing it"
                        .into(),
                ))
            }
            None => Expect::LocalOrAbsent,
        };
        self.store.keep_transfer(transfer).await?;
        let (outcome, doc) = self.write(&id, doc, expect).await?;
        // Registered here for the first time, whatever this node held of
        // the previous owner's.
        let outcome = match expect {
            Expect::Held(_) => PutOutcome::Created,
            _ => outcome,
        };
        Ok((outcome, doc))
    }
}
