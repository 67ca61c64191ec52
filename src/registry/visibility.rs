//! Registrations with an owner and a visibility
//! (docs/protocol.md#visibility): who registered an agent is the one
//! client besides the operator that may change or delete it, and a
//! registration may be kept from lists and searches (`unlisted`) or shown
//! only to named clients and scopes (`private`). The entitlement is set
//! before the record is issued, so a hidden agent is hidden from the
//! moment it is stored and the issuer never publishes it.

use serde_json::Value;

use super::{generated_id, Registry, RegistryError};
use crate::record::RecordBody;
use crate::store::{Entitlement, Expect, PutOutcome, Viewer};

impl Registry {
    /// Registers an AIDIP document for `who`, with the visibility it asks
    /// for (`None`: the one held, public for a new agent). A document
    /// whose id is registered here updates it, when `who` owns it.
    /// ([`Registry::take_over`] registers an agent handed over, which
    /// [`Registry::adopt`] then gives its owner.)
    ///
    /// # Errors
    /// As [`Registry::register`]; [`RegistryError::NotOwner`] for an agent
    /// another client registered, [`RegistryError::AlreadyPublished`] to
    /// hide an agent peers already hold.
    pub async fn register_as(
        &self,
        doc: Value,
        who: &Viewer,
        asked: Option<Entitlement>,
    ) -> Result<(PutOutcome, Value), RegistryError> {
        let id = match doc.get("id") {
            None | Some(Value::Null) => generated_id(rand::random()),
            Some(Value::String(id)) => id.clone(),
            Some(_) => return Err(RegistryError::invalid("/id", "id must be a string")),
        };
        self.write_as(&id, doc, who, asked, Expect::LocalOrAbsent)
            .await
    }

    /// Replaces the document of an agent registered here, for its owner
    /// or the operator; `asked` changes its visibility.
    ///
    /// # Errors
    /// As [`Registry::update`]; [`RegistryError::NotFound`] also for a
    /// private agent `who` may not see; [`RegistryError::NotOwner`],
    /// [`RegistryError::AlreadyPublished`].
    pub async fn update_as(
        &self,
        id: &str,
        doc: Value,
        who: &Viewer,
        asked: Option<Entitlement>,
    ) -> Result<Value, RegistryError> {
        self.visible_to(id, who)?;
        match doc.get("id") {
            None => {}
            Some(Value::String(body_id)) if body_id == id => {}
            Some(_) => {
                return Err(RegistryError::invalid(
                    "/id",
                    format!("the body's id differs from the path's id {id:?}"),
                ));
            }
        }
        self.write_as(id, doc, who, asked, Expect::LocalLive)
            .await
            .map(|(_, doc)| doc)
    }

    /// Changes who may see an agent registered here, for its owner or the
    /// operator: its document is issued again under the new visibility
    /// (so that an agent made public reaches the mesh).
    ///
    /// # Errors
    /// As [`Registry::update_as`].
    pub async fn set_visibility(
        &self,
        id: &str,
        who: &Viewer,
        asked: Entitlement,
    ) -> Result<Entitlement, RegistryError> {
        self.visible_to(id, who)?;
        let text = self.document(id).await?;
        let doc: Value = serde_json::from_str(&text).map_err(|e| {
            RegistryError::Store(crate::store::StoreError::Corrupt {
                key: id.to_owned(),
                reason: format!("stored document: {e}"),
            })
        })?;
        self.write_as(id, doc, who, Some(asked), Expect::LocalLive)
            .await?;
        Ok(self.store.entitlement(id).unwrap_or_default())
    }

    /// Deletes an agent registered here, for its owner or the operator. A
    /// hidden agent's tombstone stays on the node too.
    ///
    /// # Errors
    /// As [`Registry::delete`]; [`RegistryError::NotFound`] also for a
    /// private agent `who` may not see; [`RegistryError::NotOwner`].
    pub async fn delete_as(&self, id: &str, who: &Viewer) -> Result<(), RegistryError> {
        self.visible_to(id, who)?;
        self.owned_by(id, who).await?;
        self.delete(id).await?;
        // A later registration of the id starts afresh.
        self.store.remove_entitlement(id).await?;
        Ok(())
    }

    /// Who may see and change `id`, for its owner or the operator.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`] for an agent not held here or one
    /// `who` may not see, [`RegistryError::NotOwner`].
    pub async fn entitlement_for(
        &self,
        id: &str,
        who: &Viewer,
    ) -> Result<Entitlement, RegistryError> {
        self.visible_to(id, who)?;
        if !self.store.is_local(id).await? {
            return Err(RegistryError::NotFound { id: id.to_owned() });
        }
        self.owned_by(id, who).await?;
        Ok(self.store.entitlement(id).unwrap_or_default())
    }

    /// Makes `who` the owner of an agent registered here without one (an
    /// agent another registry handed over).
    ///
    /// # Errors
    /// [`RegistryError::Store`].
    pub async fn adopt(&self, id: &str, who: &Viewer) -> Result<(), RegistryError> {
        if self.store.entitlement(id).is_none() {
            let ent = Entitlement {
                owner: Some(who.principal.clone()),
                ..Entitlement::default()
            };
            self.store.set_entitlement(id, ent).await?;
        }
        Ok(())
    }

    /// `NotFound` for a private agent `who` is not entitled to: its
    /// existence is not told.
    ///
    /// # Errors
    /// [`RegistryError::NotFound`].
    pub fn visible_to(&self, id: &str, who: &Viewer) -> Result<(), RegistryError> {
        match self.store.entitlement(id) {
            Some(e) if !e.shows_to(who) => Err(RegistryError::NotFound { id: id.to_owned() }),
            _ => Ok(()),
        }
    }

    /// Whether `who` may change the agent `id` held here: its owner, or
    /// the operator. An agent registered without an owner (imported, or
    /// before owners were kept) is the operator's.
    async fn owned_by(&self, id: &str, who: &Viewer) -> Result<(), RegistryError> {
        let owned = match self.store.entitlement(id) {
            Some(e) => e.owned_by(who),
            None => who.operator || !self.store.is_local(id).await?,
        };
        if owned {
            Ok(())
        } else {
            Err(RegistryError::NotOwner { id: id.to_owned() })
        }
    }

    async fn write_as(
        &self,
        id: &str,
        doc: Value,
        who: &Viewer,
        asked: Option<Entitlement>,
        expect: Expect,
    ) -> Result<(PutOutcome, Value), RegistryError> {
        let held = self.store.get(id).await?;
        let live = held
            .as_ref()
            .is_some_and(|a| matches!(a.body, RecordBody::Descriptor(_)));
        let before = self.store.entitlement(id);
        // A deleted agent's id may be registered again by anyone who may
        // register; a live one only by its owner. (An id is unique: a
        // refusal tells that it is taken, even to a client that may not
        // see the agent.)
        if live {
            self.owned_by(id, who).await?;
        }
        let mut next = asked.or_else(|| before.clone()).unwrap_or_default();
        next.owner = before
            .as_ref()
            .and_then(|e| e.owner.clone())
            .or_else(|| Some(who.principal.clone()));
        let problems = next.problems();
        if !problems.is_empty() {
            return Err(RegistryError::invalid_all(
                "the visibility is not valid",
                problems,
            ));
        }
        let was_public = before.as_ref().is_none_or(|e| !e.hides());
        if live && was_public && next.hides() {
            return Err(RegistryError::AlreadyPublished { id: id.to_owned() });
        }
        // The entitlement goes first: a hidden record is hidden from its
        // first write.
        let changed = before.as_ref() != Some(&next);
        if changed {
            self.store.set_entitlement(id, next.clone()).await?;
        }
        let written = self.write(id, doc, expect).await;
        if written.is_err() && changed {
            // Nothing was written: the entitlement goes back to what it was.
            let undone = match before {
                Some(b) => self.store.set_entitlement(id, b).await,
                None => self.store.remove_entitlement(id).await.map(|_| ()),
            };
            if let Err(e) = undone {
                tracing::warn!(agent = %id, error = %e, "restoring an agent's visibility after a failed write failed");
            }
        }
        written
    }
}
