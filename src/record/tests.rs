use super::*;
use crate::descriptor::DocumentFormat;

pub(crate) fn sample_descriptor(id: &str) -> Descriptor {
    Descriptor {
        id: id.into(),
        name: "Translator".into(),
        description: "Translates".into(),
        version: None,
        publisher: None,
        endpoint: Some("https://api.example.com/t".into()),
        capabilities: vec!["translation".into()],
        tags: vec![],
        languages: vec!["en".into()],
        status: None,
        auth: None,
        format: DocumentFormat::Aidip,
    }
}

#[test]
fn signed_descriptor_round_trips() {
    let key = SigningKey::from_bytes(&[1; 32]);
    let body = DescriptorRecord::new(
        sample_descriptor("a"),
        "{}".into(),
        5,
        100,
        60,
        Evidence::default(),
    );
    let rec = SignedRecord::sign_descriptor(&body, &key).unwrap();
    let back = SignedRecord::decode(&rec.encode()).unwrap();
    assert_eq!(back, rec);
    assert_eq!(back.descriptor().unwrap(), body);
}
