//! Collections' connections are stored sealed (see [`crate::secrets`]): here
//! they are sealed on the way in, unsealed on the way out, and resealed when
//! the key rotates.

use serde::Serialize;

use super::db::{Row, Sql, args};
use super::{Catalog, CatalogError};
use crate::publisher::source::KafkaConnection;
use crate::secrets::Keyring;

/// What a key rotation did.
#[derive(Debug, Clone, Serialize)]
pub struct Rotation {
    pub key_id: String,
    pub retired_key_id: Option<String>,
    pub connections_resealed: usize,
}

/// The place a connection is sealed for: a sealed value copied into another
/// collection's row does not unseal there.
fn place(tenant: &str, collection: &str) -> String {
    format!("collections/{tenant}/{collection}/connection")
}

fn what(tenant: &str, collection: &str) -> String {
    format!("the connection of collection `{tenant}/{collection}`")
}

/// A connection as it is stored: its JSON, sealed.
pub(super) fn seal(keyring: &Keyring, tenant: &str, collection: &str, c: Option<&KafkaConnection>) -> Option<String> {
    c.map(|c| {
        let json = zeroize::Zeroizing::new(serde_json::to_vec(c).expect("json"));
        keyring.seal(&place(tenant, collection), &json)
    })
}

/// Reads the stored connection of a collection row (columns: tenant name at
/// `tenant`, collection name at `tenant + 1`, the stored value at `stored`).
pub(super) fn unseal(
    keyring: &Keyring,
    r: &Row,
    tenant: usize,
    stored: usize,
) -> Result<Option<KafkaConnection>, CatalogError> {
    let Some(value) = r.get::<Option<String>>(stored)? else { return Ok(None) };
    let (t, c): (String, String) = (r.get(tenant)?, r.get(tenant + 1)?);
    let json = keyring.unseal(&what(&t, &c), &place(&t, &c), &value)?;
    serde_json::from_slice(&json)
        .map(Some)
        .map_err(|e| CatalogError::Sql { message: format!("{}: {e}", what(&t, &c)), unique_violation: false })
}

/// Seals again every connection not sealed under the key new values go
/// under (stored in clear by an earlier weir, or under the key being
/// retired). Inside the caller's transaction: all or none.
fn reseal_all(tx: &mut dyn Sql, keyring: &Keyring) -> Result<usize, CatalogError> {
    let rows = tx.query(
        "SELECT c.id, t.name, c.name, c.connection FROM collections c JOIN tenants t ON t.id = c.tenant_id
         WHERE c.connection IS NOT NULL",
        &[],
    )?;
    let mut resealed = 0;
    for r in rows {
        let (id, tenant, collection, stored): (i64, String, String, String) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        if keyring.sealed_under_target(&stored) {
            continue;
        }
        let json = keyring.unseal(&what(&tenant, &collection), &place(&tenant, &collection), &stored)?;
        let sealed = keyring.seal(&place(&tenant, &collection), &json);
        tx.execute("UPDATE collections SET connection = ?1 WHERE id = ?2", args![sealed, id])?;
        resealed += 1;
    }
    Ok(resealed)
}

impl Catalog {
    pub(super) fn keyring(&self) -> std::sync::RwLockReadGuard<'_, Keyring> {
        self.secrets.read().unwrap_or_else(|e| e.into_inner())
    }

    /// At open: seals what is in clear, and finishes a rotation cut short.
    pub(super) fn reseal(&self) -> Result<(), CatalogError> {
        let (mut keyring, resealed) = self.db.transaction(|tx| {
            let keyring = self.secrets.write().unwrap_or_else(|e| e.into_inner());
            let resealed = reseal_all(tx, &keyring)?;
            Ok((keyring, resealed))
        })?;
        if resealed > 0 {
            // The pages that held the old values leave SQLite's write-ahead log too.
            self.db.truncate_log()?;
        }
        if keyring.rotating() {
            keyring.finish_rotation()?;
            eprintln!("weir: finished a secret key rotation cut short ({resealed} connections resealed)");
        } else if resealed > 0 {
            eprintln!("weir: sealed {resealed} connections stored in clear by an earlier weir");
        }
        Ok(())
    }

    /// The id of the key connections are sealed under.
    pub fn secret_key_id(&self) -> String {
        self.keyring().key_id().to_string()
    }

    /// Replaces the secret key: a new key, every connection resealed under
    /// it in one transaction, then the key file replaced. Cut short anywhere,
    /// the next start finishes it; nothing is ever sealed under a key that is
    /// not on disk.
    pub fn rotate_secret_key(&self) -> Result<Rotation, CatalogError> {
        // The key is taken inside the transaction (the catalog's lock, then the
        // key, as everywhere) and held until the key file is replaced.
        let (mut keyring, connections_resealed) = self.db.transaction(|tx| {
            let mut keyring = self.secrets.write().unwrap_or_else(|e| e.into_inner());
            keyring.begin_rotation()?;
            let resealed = reseal_all(tx, &keyring)?;
            Ok((keyring, resealed))
        })?;
        if connections_resealed > 0 {
            self.db.truncate_log()?;
        }
        let retired_key_id = keyring.finish_rotation()?;
        Ok(Rotation { key_id: keyring.key_id().to_string(), retired_key_id, connections_resealed })
    }
}

#[cfg(test)]
mod tests {
    use crate::catalog::{Catalog, Quotas};
    use crate::publisher::source::{KafkaConnection, SaslCredentials, SaslMechanism};
    use crate::secrets::{Keyring, default_key_file};

    fn connection() -> KafkaConnection {
        KafkaConnection {
            bootstrap_servers: "b:9092".into(),
            credentials: Some(SaslCredentials {
                mechanism: SaslMechanism::ScramSha256,
                username: "alice".into(),
                password: "pw-5a5a".into(),
            }),
            ..KafkaConnection::default()
        }
    }

    fn raw_connection(dir: &std::path::Path) -> String {
        let conn = rusqlite::Connection::open(dir.join("catalog.db")).unwrap();
        conn.query_row("SELECT connection FROM collections", [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn connections_stored_in_clear_by_an_earlier_weir_are_sealed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(dir.path()).unwrap();
        let tenant = catalog.create_tenant("acme", &Quotas::default()).unwrap();
        catalog.create_collection(&tenant, "events", "g", None, None).unwrap();
        drop(catalog);
        // As weir wrote it before sealing: the JSON itself.
        let json = serde_json::to_string(&connection()).unwrap();
        let conn = rusqlite::Connection::open(dir.path().join("catalog.db")).unwrap();
        conn.execute("UPDATE collections SET connection = ?1", [&json]).unwrap();
        drop(conn);

        let catalog = Catalog::open(dir.path()).unwrap();
        let stored = raw_connection(dir.path());
        assert!(stored.starts_with("sealed:v1:") && !stored.contains("pw-5a5a"), "{stored}");
        let tenant = catalog.tenant("acme").unwrap().unwrap();
        assert_eq!(catalog.collection(&tenant, "events").unwrap().unwrap().connection, Some(connection()));
    }

    #[test]
    fn a_rotation_cut_short_is_finished_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(dir.path()).unwrap();
        let tenant = catalog.create_tenant("acme", &Quotas::default()).unwrap();
        catalog.create_collection(&tenant, "events", "g", Some(&connection()), None).unwrap();
        let old = catalog.secret_key_id();
        drop(catalog);
        // Cut short after the next key was written, before anything was resealed.
        let (mut keyring, _) = Keyring::open(&default_key_file(dir.path()), false).unwrap();
        keyring.begin_rotation().unwrap();
        let next = keyring.key_id().to_string();
        drop(keyring);

        let catalog = Catalog::open(dir.path()).unwrap();
        assert_eq!(catalog.secret_key_id(), next);
        assert_ne!(next, old);
        assert!(raw_connection(dir.path()).starts_with(&format!("sealed:v1:{next}:")));
        let tenant = catalog.tenant("acme").unwrap().unwrap();
        assert_eq!(catalog.collection(&tenant, "events").unwrap().unwrap().connection, Some(connection()));

        // And a whole rotation, in place.
        let rotation = catalog.rotate_secret_key().unwrap();
        assert_eq!((rotation.retired_key_id.as_deref(), rotation.connections_resealed), (Some(next.as_str()), 1));
        assert!(raw_connection(dir.path()).starts_with(&format!("sealed:v1:{}:", rotation.key_id)));
        assert_eq!(catalog.collection(&tenant, "events").unwrap().unwrap().connection, Some(connection()));
    }
}
