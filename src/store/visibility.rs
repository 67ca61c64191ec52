//! Who may see an agent registered here (docs/protocol.md#visibility).
//! A registration is `public` (searched, listed, gossiped and announced
//! to the DHT), `unlisted` (served by id to anyone who may read, never in
//! a list, a search or a resolution) or `private` (shown only to the
//! clients and scopes it names, its owner and the operator). Unlisted and
//! private agents never leave the node: the issuer publishes nothing of
//! them and the mesh's answers leave them out.
//!
//! One sled tree, `entitlements` (agent id -> JSON [`Entitlement`]), for
//! every agent registered through the API (a public one keeps only its
//! owner), read at open into a map and a bitmap of the hidden agents'
//! ordinals, which [`BlockingStore::matching`] subtracts for all but the
//! entitled and the text ranking filters by.

use std::collections::HashMap;

use roaring::RoaringBitmap;
use serde::{Deserialize, Serialize};

use super::error::StoreError;
use super::postings;

mod held;

/// Most clients one private registration names.
pub const MAX_CLIENTS: usize = 64;
/// Most scopes one private registration names.
pub const MAX_SCOPES: usize = 16;
/// Longest client or scope name, characters.
pub const MAX_NAME_CHARS: usize = 200;

/// Who sees a registration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Everyone who may read, everywhere in the mesh.
    #[default]
    Public,
    /// Anyone who may read and knows its id; never listed or searched.
    Unlisted,
    /// Only the clients and scopes named, the owner and the operator.
    Private,
}

impl Visibility {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Unlisted => "unlisted",
            Self::Private => "private",
        }
    }
}

/// What this node keeps of who may see and change an agent registered
/// here. Never part of the signed record, never sent to a peer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entitlement {
    /// Who sees it.
    pub visibility: Visibility,
    /// The principals a private agent is shown to (`key:<id>`,
    /// `jwt:<subject>`, `cert:<name>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<String>,
    /// The scopes whose holders a private agent is shown to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The principal that registered it: the one client besides the
    /// operator that may change, hide or delete it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl Entitlement {
    /// Whether it keeps the agent out of lists, searches and the mesh.
    pub fn hides(&self) -> bool {
        self.visibility != Visibility::Public
    }

    /// Whether `viewer` may read the agent by its id.
    pub fn shows_to(&self, viewer: &Viewer) -> bool {
        match self.visibility {
            Visibility::Public | Visibility::Unlisted => true,
            Visibility::Private => self.entitles(viewer),
        }
    }

    /// Whether a list or a search for `audience` may answer the agent.
    pub fn lists_to(&self, audience: &Audience) -> bool {
        match (self.visibility, audience) {
            (Visibility::Public, _) | (_, Audience::Everything) => true,
            (Visibility::Unlisted, _) | (Visibility::Private, Audience::Public) => false,
            (Visibility::Private, Audience::Viewer(v)) => self.entitles(v),
        }
    }

    /// Whether `viewer` may change it: its owner or the operator.
    pub fn owned_by(&self, viewer: &Viewer) -> bool {
        viewer.operator || self.owner.as_deref() == Some(viewer.principal.as_str())
    }

    fn entitles(&self, viewer: &Viewer) -> bool {
        self.owned_by(viewer)
            || self.clients.contains(&viewer.principal)
            || self.scopes.iter().any(|s| viewer.scopes.contains(s))
    }

    /// The problems of an entitlement a client asked for, each with its
    /// JSON pointer under `/visibility`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.visibility != Visibility::Private
            && (!self.clients.is_empty() || !self.scopes.is_empty())
        {
            out.push((
                "/visibility".to_owned(),
                "clients and scopes are only for a private registration".to_owned(),
            ));
        }
        for (field, names, most) in [
            ("clients", &self.clients, MAX_CLIENTS),
            ("scopes", &self.scopes, MAX_SCOPES),
        ] {
            if names.len() > most {
                out.push((
                    format!("/visibility/{field}"),
                    format!("at most {most} {field}"),
                ));
            }
            for (i, name) in names.iter().enumerate() {
                if name.is_empty()
                    || name.chars().count() > MAX_NAME_CHARS
                    || name.chars().any(char::is_control)
                {
                    out.push((
                        format!("/visibility/{field}/{i}"),
                        format!(
                            "a name of 1 to {MAX_NAME_CHARS} characters, no control characters"
                        ),
                    ));
                }
            }
        }
        out
    }
}

/// A client reading through the API, as entitlements see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Viewer {
    /// Its principal as the audit log names it (`key:<id>`, ...).
    pub principal: String,
    /// The scopes it was granted, by name.
    pub scopes: Vec<String>,
    /// Whether it is the operator (the `admin` scope): it sees and may
    /// change every registration.
    pub operator: bool,
}

/// Whom a list or a search answers, for the agents registrations hide.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Audience {
    /// Public agents only: a peer, or anyone the node does not know.
    #[default]
    Public,
    /// Public agents and the private ones this client is entitled to.
    Viewer(Viewer),
    /// Every agent, unlisted and private ones included: the node's own
    /// bookkeeping (metrics, the republisher's walk is not one).
    Everything,
}

/// The entitlements in memory.
#[derive(Debug, Default)]
pub(super) struct Entitlements {
    by_id: HashMap<String, Entitlement>,
    /// The ordinals of the hidden agents held.
    hidden: RoaringBitmap,
    /// The ordinal of each hidden agent held.
    hidden_ords: HashMap<String, u32>,
}

impl Entitlements {
    /// Reads `tree`, with each hidden agent's ordinal from `ordinals`.
    pub(super) fn load(tree: &sled::Tree, ordinals: &sled::Tree) -> Result<Self, StoreError> {
        let mut out = Self::default();
        for entry in tree.iter() {
            let (key, value) = entry?;
            let id = String::from_utf8_lossy(&key).into_owned();
            let ent: Entitlement =
                serde_json::from_slice(&value).map_err(|e| StoreError::Corrupt {
                    key: id.clone(),
                    reason: format!("entitlement: {e}"),
                })?;
            let ord = match ordinals.get(id.as_bytes())? {
                Some(v) => Some(postings::decode_ord(&id, &v)?),
                None => None,
            };
            out.set(&id, ent, ord);
        }
        Ok(out)
    }

    fn set(&mut self, id: &str, ent: Entitlement, ord: Option<u32>) {
        if let Some(old) = self.hidden_ords.remove(id) {
            self.hidden.remove(old);
        }
        if let (true, Some(ord)) = (ent.hides(), ord) {
            self.hidden.insert(ord);
            self.hidden_ords.insert(id.to_owned(), ord);
        }
        self.by_id.insert(id.to_owned(), ent);
    }

    fn remove(&mut self, id: &str) -> bool {
        if let Some(old) = self.hidden_ords.remove(id) {
            self.hidden.remove(old);
        }
        self.by_id.remove(id).is_some()
    }

    /// A write of `id` committed at `ord`: a hidden agent's ordinal joins
    /// the bitmap before the posting lists can answer it.
    pub(super) fn written(&mut self, id: &str, ord: u32) {
        if self.by_id.get(id).is_some_and(Entitlement::hides) && !self.hidden.contains(ord) {
            self.hidden.insert(ord);
            self.hidden_ords.insert(id.to_owned(), ord);
        }
    }

    pub(super) fn get(&self, id: &str) -> Option<&Entitlement> {
        self.by_id.get(id)
    }

    /// Whether `audience` may see `id` in a list or a search.
    pub(super) fn lists(&self, id: &str, audience: &Audience) -> bool {
        self.by_id.get(id).is_none_or(|e| e.lists_to(audience))
    }

    /// The ordinals a list or a search for `audience` leaves out.
    pub(super) fn unseen(&self, audience: &Audience) -> RoaringBitmap {
        match audience {
            Audience::Everything => RoaringBitmap::new(),
            Audience::Public => self.hidden.clone(),
            Audience::Viewer(_) => {
                let mut out = self.hidden.clone();
                for (id, ord) in &self.hidden_ords {
                    if self.by_id.get(id).is_some_and(|e| e.lists_to(audience)) {
                        out.remove(*ord);
                    }
                }
                out
            }
        }
    }

    /// How many agents held are hidden from someone.
    pub(super) fn hidden_count(&self) -> u64 {
        self.hidden.len()
    }

    fn all(&self) -> Vec<(String, Entitlement)> {
        let mut out: Vec<_> = self
            .by_id
            .iter()
            .map(|(id, e)| (id.clone(), e.clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn viewer(principal: &str, scopes: &[&str]) -> Viewer {
        Viewer {
            principal: principal.to_owned(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            operator: false,
        }
    }

    fn private(clients: &[&str], scopes: &[&str]) -> Entitlement {
        Entitlement {
            visibility: Visibility::Private,
            clients: clients.iter().map(|s| (*s).to_owned()).collect(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            owner: Some("key:owner".to_owned()),
        }
    }

    #[test]
    fn a_private_agent_shows_to_its_clients_scopes_owner_and_operator_only() {
        let ent = private(&["key:partner"], &["crawl"]);
        assert!(ent.shows_to(&viewer("key:partner", &["read"])));
        assert!(ent.shows_to(&viewer("jwt:someone", &["read", "crawl"])));
        assert!(ent.shows_to(&viewer("key:owner", &["register"])));
        let operator = Viewer {
            operator: true,
            ..viewer("admin-token", &[])
        };
        assert!(ent.shows_to(&operator));
        assert!(!ent.shows_to(&viewer("key:stranger", &["read"])));
        assert!(!ent.shows_to(&viewer("anonymous", &["read"])));
        assert!(!ent.lists_to(&Audience::Public));
        assert!(ent.lists_to(&Audience::Viewer(viewer("key:partner", &[]))));
        assert!(!ent.lists_to(&Audience::Viewer(viewer("key:stranger", &["read"]))));
    }

    #[test]
    fn an_unlisted_agent_is_read_by_id_but_listed_to_nobody() {
        let ent = Entitlement {
            visibility: Visibility::Unlisted,
            owner: Some("key:owner".to_owned()),
            ..Entitlement::default()
        };
        assert!(ent.shows_to(&viewer("anonymous", &["read"])));
        let owner = viewer("key:owner", &["register"]);
        assert!(!ent.lists_to(&Audience::Viewer(owner.clone())));
        assert!(!ent.lists_to(&Audience::Public));
        assert!(ent.lists_to(&Audience::Everything));
        assert!(ent.owned_by(&owner));
        assert!(!ent.owned_by(&viewer("key:partner", &["register"])));
    }

    #[test]
    fn a_bad_entitlement_names_each_problem() {
        let mut ent = private(&["", "key:ok"], &[]);
        ent.scopes = (0..=MAX_SCOPES).map(|i| format!("s{i}")).collect();
        let problems: Vec<String> = ent.problems().into_iter().map(|(p, _)| p).collect();
        assert_eq!(problems, ["/visibility/clients/0", "/visibility/scopes"]);
        let public_with_clients = Entitlement {
            clients: vec!["key:a".to_owned()],
            ..Entitlement::default()
        };
        assert_eq!(public_with_clients.problems()[0].0, "/visibility");
        assert!(private(&["key:a"], &["read"]).problems().is_empty());
    }

    #[test]
    fn the_unseen_ordinals_follow_the_audience() {
        let mut ents = Entitlements::default();
        ents.set("p", private(&["key:partner"], &[]), Some(3));
        ents.set(
            "u",
            Entitlement {
                visibility: Visibility::Unlisted,
                ..Entitlement::default()
            },
            None,
        );
        ents.written("u", 7);
        ents.set("open", Entitlement::default(), Some(9));
        let all: Vec<u32> = ents.unseen(&Audience::Public).iter().collect();
        assert_eq!(all, [3, 7]);
        let partner = Audience::Viewer(viewer("key:partner", &[]));
        assert_eq!(ents.unseen(&partner).iter().collect::<Vec<_>>(), [7]);
        assert!(ents.unseen(&Audience::Everything).is_empty());
        // Made public: nothing of it is hidden any more.
        ents.set("p", Entitlement::default(), Some(3));
        assert_eq!(
            ents.unseen(&Audience::Public).iter().collect::<Vec<_>>(),
            [7]
        );
        assert!(ents.remove("u"));
        assert!(ents.unseen(&Audience::Public).is_empty());
    }
}
