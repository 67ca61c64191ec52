//! Scopes: what a credential allows. `admin` allows everything; the
//! others one kind of route each (docs/protocol.md#api-access).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One thing a credential may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Discovery reads: get, list, search, resolve, summaries, crawl
    /// reports (the summary form), health and peers.
    Read,
    /// This node's registrations: `POST`, `PUT`, `DELETE /agents`.
    Register,
    /// Signed records handed in over HTTP: `POST /records`.
    Records,
    /// Bulk imports: `POST /admin/import`.
    Import,
    /// Crawl requests and full crawl reports: `POST /crawl`.
    Crawl,
    /// Calls to agents through the gateway: `POST /agents/{id}/invoke`,
    /// `POST /agents/{id}/operations/{op}`.
    Invoke,
    /// Everything, the routes under `/admin/` included.
    Admin,
}

impl Scope {
    /// Every scope, in order.
    pub const ALL: [Scope; 7] = [
        Scope::Read,
        Scope::Register,
        Scope::Records,
        Scope::Import,
        Scope::Crawl,
        Scope::Invoke,
        Scope::Admin,
    ];

    /// The scope's name in configuration, key files and tokens.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Register => "register",
            Scope::Records => "records",
            Scope::Import => "import",
            Scope::Crawl => "crawl",
            Scope::Invoke => "invoke",
            Scope::Admin => "admin",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a scope (read, register, records, import, crawl, invoke, admin)")]
pub struct ScopeError(pub String);

impl FromStr for Scope {
    type Err = ScopeError;

    fn from_str(s: &str) -> Result<Self, ScopeError> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| ScopeError(s.to_owned()))
    }
}

impl Serialize for Scope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Scopes(u8);

impl Scopes {
    /// No scope at all.
    pub const NONE: Scopes = Scopes(0);

    /// Every scope.
    pub fn all() -> Scopes {
        Scopes::from_iter(Scope::ALL)
    }

    /// Whether these scopes allow what `scope` guards: `admin` allows
    /// everything.
    pub fn allows(self, scope: Scope) -> bool {
        self.0 & (scope.bit() | Scope::Admin.bit()) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The scopes in the set, in order.
    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL
            .into_iter()
            .filter(move |s| self.0 & s.bit() != 0)
    }

    /// The scopes named in a space- or comma-separated list (OAuth's
    /// `scope` claim, the CLI's `--scopes`); names that are not scopes
    /// are skipped, so a token from an issuer that grants other
    /// services' scopes too still works here.
    pub fn from_list_lenient(list: &str) -> Scopes {
        list.split([' ', ','])
            .filter_map(|name| name.trim().parse::<Scope>().ok())
            .collect()
    }
}

impl FromIterator<Scope> for Scopes {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        Scopes(iter.into_iter().fold(0, |bits, s| bits | s.bit()))
    }
}

impl fmt::Display for Scopes {
    /// The names, space-separated (`read register`), or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.iter().map(Scope::as_str).collect();
        f.write_str(&names.join(" "))
    }
}

impl Serialize for Scopes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Scopes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Vec::<Scope>::deserialize(d)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_allows_every_scope_and_the_others_only_their_own() {
        let admin = Scopes::from_iter([Scope::Admin]);
        assert!(Scope::ALL.into_iter().all(|s| admin.allows(s)));
        let read = Scopes::from_iter([Scope::Read]);
        for s in Scope::ALL {
            assert_eq!(read.allows(s), s == Scope::Read, "{s}");
        }
        assert!(!Scopes::NONE.allows(Scope::Read));
    }

    #[test]
    fn scopes_read_from_lists_and_round_trip_through_json() {
        let s = Scopes::from_list_lenient("read openid,crawl  profile");
        assert_eq!(s, Scopes::from_iter([Scope::Read, Scope::Crawl]));
        assert_eq!(s.to_string(), "read crawl");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, r#"["read","crawl"]"#);
        assert_eq!(serde_json::from_str::<Scopes>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Scopes>(r#"["reed"]"#).is_err());
        assert_eq!("admin".parse::<Scope>().unwrap(), Scope::Admin);
        assert!("Admin".parse::<Scope>().is_err());
    }
}
