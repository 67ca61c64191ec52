//! The store's face for entitlements: who may see and change each agent
//! registered here, set, read and forgotten under the agent's stripe.

use super::{Entitlement, Entitlements};
use crate::store::error::StoreError;
use crate::store::handles::BlockingStore;
use crate::store::postings;

impl BlockingStore {
    /// The entitlements, read.
    pub(in crate::store) fn entitlements_read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, Entitlements> {
        self.inner
            .entitlements
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets who may see and change `id`, on disk when this returns. Set
    /// before the agent's first record is written, it hides that record
    /// from the moment it is stored: the write takes the agent's stripe
    /// lock, as this does.
    ///
    /// # Errors
    /// [`StoreError::Sled`], [`StoreError::Corrupt`].
    pub fn set_entitlement(&self, id: &str, ent: &Entitlement) -> Result<(), StoreError> {
        let inner = &self.inner;
        let _stripe = inner.lock_stripe(crate::identity::stripe_of(id, inner.stripes.len()));
        let ord = match inner.ordinals.get(id.as_bytes())? {
            Some(v) => Some(postings::decode_ord(id, &v)?),
            None => None,
        };
        let value = serde_json::to_vec(ent).expect("an entitlement serialises");
        inner.entitlements_tree.insert(id.as_bytes(), value)?;
        inner.entitlements_tree.flush()?;
        inner
            .entitlements
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .set(id, ent.clone(), ord);
        Ok(())
    }

    /// Forgets who may see `id` (after its deletion); `false` when
    /// nothing was kept.
    ///
    /// # Errors
    /// [`StoreError::Sled`].
    pub fn remove_entitlement(&self, id: &str) -> Result<bool, StoreError> {
        let inner = &self.inner;
        let _stripe = inner.lock_stripe(crate::identity::stripe_of(id, inner.stripes.len()));
        let on_disk = inner.entitlements_tree.remove(id.as_bytes())?.is_some();
        inner.entitlements_tree.flush()?;
        let in_memory = inner
            .entitlements
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
        Ok(on_disk || in_memory)
    }

    /// Who may see and change `id`, when it was registered here through
    /// the API.
    pub fn entitlement(&self, id: &str) -> Option<Entitlement> {
        self.entitlements_read().get(id).cloned()
    }

    /// Whether `id` is unlisted or private: nothing of it leaves the node.
    pub fn is_hidden(&self, id: &str) -> bool {
        self.entitlements_read()
            .get(id)
            .is_some_and(Entitlement::hides)
    }

    /// Every entitlement kept, by agent id.
    pub fn entitlements(&self) -> Vec<(String, Entitlement)> {
        self.entitlements_read().all()
    }
}
