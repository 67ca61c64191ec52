//! The CBOR helpers records and transfers share: encoding into a buffer,
//! and decoding exactly one value with nothing after it.

use serde::Serialize;

use super::error::RecordError;

/// `value` as CBOR.
pub(super) fn to_cbor<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(value, &mut out).expect("CBOR encoding into a Vec cannot fail");
    out
}

/// Decodes one `T` from `bytes`, refusing anything left after it.
pub(super) fn from_cbor_exact<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<T, RecordError> {
    let mut rest = bytes;
    let value = ciborium::from_reader(&mut rest).map_err(|e| RecordError::Malformed {
        reason: e.to_string(),
    })?;
    if !rest.is_empty() {
        return Err(RecordError::TrailingBytes { extra: rest.len() });
    }
    Ok(value)
}
