use super::*;
use serde_json::json;

fn answer(status: u16, body: &str, retry_after: Option<u64>) -> Answer {
    Answer {
        status,
        content_type: Some("application/json".into()),
        retry_after: retry_after.map(Duration::from_secs),
        headers: HeaderMap::new(),
        body: Bytes::from(body.to_owned()),
    }
}

#[test]
fn each_answer_maps_to_its_outcome_and_no_failure_is_a_result() {
    assert_eq!(
        outcome(answer(200, r#"{"echo":"hi"}"#, None)).unwrap(),
        json!({"echo": "hi"})
    );
    assert!(matches!(
        outcome(answer(200, "{not json", None)),
        Err(GatewayError::AgentFailed(_))
    ));
    match outcome(answer(
        404,
        r#"{"error":{"code":"NotFound","message":"no"}}"#,
        None,
    )) {
        Err(GatewayError::AgentRefused { status, body }) => {
            assert_eq!(status, 404);
            assert_eq!(body["error"]["code"], "NotFound");
        }
        other => panic!("{other:?}"),
    }
    match outcome(answer(503, "", Some(7))) {
        Err(GatewayError::AgentBusy { retry_after }) => {
            assert_eq!(retry_after, Duration::from_secs(7));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        outcome(answer(429, "", None)),
        Err(GatewayError::AgentBusy { .. })
    ));
    assert!(matches!(
        outcome(answer(500, "boom", None)),
        Err(GatewayError::AgentFailed(_))
    ));
    assert!(matches!(
        outcome(answer(302, "", None)),
        Err(GatewayError::AgentFailed(_))
    ));
}

#[test]
fn a_named_operation_is_a_sub_resource_of_the_endpoint() {
    assert_eq!(
        operation_url("https://a.example/agents/x", Some("echo")).unwrap(),
        "https://a.example/agents/x/echo"
    );
    assert_eq!(
        operation_url("https://a.example/agents/x/", Some("do it/now")).unwrap(),
        "https://a.example/agents/x/do%20it%2Fnow"
    );
    assert_eq!(
        operation_url("https://a.example/x?k=1", None).unwrap(),
        "https://a.example/x?k=1"
    );
}
