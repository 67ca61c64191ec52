use super::*;

fn config(budget: u32, max_tracked: usize) -> LimitsConfig {
    LimitsConfig {
        reads: budget,
        window: Duration::from_secs(3600),
        max_tracked,
        ..LimitsConfig::default()
    }
}

fn addr(s: &str) -> Client {
    Client::Addr(s.parse().unwrap())
}

#[test]
fn a_client_gets_its_budget_then_waits_and_others_keep_theirs() {
    let now = Instant::now();
    let budget = Budget::new(Limit::Reads, &config(3, 100), now);
    let a = addr("127.0.0.2");
    for _ in 0..3 {
        budget.check(&a, now).expect("within the budget");
    }
    let wait = budget.check(&a, now).expect_err("over the budget");
    // Three an hour: one token every 20 minutes.
    assert!(
        wait > Duration::from_secs(1100) && wait <= Duration::from_secs(1200),
        "{wait:?}"
    );
    budget
        .check(&addr("127.0.0.3"), now)
        .expect("another address has its own bucket");
    budget
        .check(&Client::Principal("key:k1".into()), now)
        .expect("a principal has its own bucket");
}

#[test]
fn idle_buckets_are_forgotten_and_a_full_table_shares_the_overflow_bucket() {
    let start = Instant::now();
    let budget = Budget::new(Limit::Reads, &config(1, 2), start);
    budget.check(&addr("10.0.0.1"), start).unwrap();
    budget.check(&addr("10.0.0.2"), start).unwrap();
    assert_eq!(budget.tracked(), 2);
    // The table is full: two new addresses share one bucket of one token.
    budget
        .check(&addr("10.0.0.3"), start)
        .expect("the overflow bucket's token");
    budget
        .check(&addr("10.0.0.4"), start)
        .expect_err("the overflow bucket is spent");
    assert_eq!(budget.tracked(), 2, "the table does not grow past its cap");
    // A window later the idle buckets are full again, and forgotten.
    let later = start + Duration::from_secs(3600);
    budget.check(&addr("10.0.0.5"), later).unwrap();
    assert_eq!(budget.tracked(), 1);
}

#[test]
fn ipv6_clients_are_keyed_by_their_64() {
    let caller = |a: &str| Caller {
        principal: Principal::Anonymous,
        addr: Some(a.parse().unwrap()),
    };
    assert_eq!(
        Client::of(&caller("2001:db8:1:2::1")),
        Client::of(&caller("2001:db8:1:2:ffff::9"))
    );
    assert_ne!(
        Client::of(&caller("2001:db8:1:2::1")),
        Client::of(&caller("2001:db8:1:3::1"))
    );
    assert_eq!(
        Client::of(&caller("::ffff:127.0.0.1")),
        Some(addr("127.0.0.1"))
    );
    let keyed = Caller {
        principal: Principal::ApiKey { id: "k".into() },
        addr: Some("127.0.0.1".parse().unwrap()),
    };
    assert_eq!(Client::of(&keyed), Some(Client::Principal("key:k".into())));
    let unknown = Caller {
        principal: Principal::Anonymous,
        addr: None,
    };
    assert_eq!(Client::of(&unknown), None);
}

#[test]
fn searches_are_charged_to_the_costliest_budget_they_use() {
    let cost = |body: &str, semantic| search_cost(body.as_bytes(), semantic);
    assert_eq!(cost(r#"{"query":"x"}"#, false), Limit::MeshSearch);
    assert_eq!(cost(r#"{"scope":"mesh"}"#, false), Limit::MeshSearch);
    assert_eq!(
        cost(r#"{"query":"x","cursor":"c"}"#, false),
        Limit::TextSearch,
        "a later page does not ask peers"
    );
    assert_eq!(
        cost(r#"{"query":"x","scope":"local"}"#, false),
        Limit::TextSearch
    );
    assert_eq!(
        cost(r#"{"query":"x","scope":"local"}"#, true),
        Limit::SemanticSearch
    );
    assert_eq!(cost(r#"{"query":" ","scope":"local"}"#, true), Limit::Reads);
    assert_eq!(
        cost(r#"{"scope":"local","filters":{"tags":["a"]}}"#, false),
        Limit::Reads
    );
    assert_eq!(cost("not json", false), Limit::Reads);
}

#[test]
fn the_daily_quota_counts_per_principal_and_renews_at_midnight_utc() {
    let quota = DailyQuota::new(2, 10);
    let noon = 20_000 * DAY + DAY / 2;
    quota.charge("key:a", noon).unwrap();
    quota.charge("key:a", noon).unwrap();
    let wait = quota
        .charge("key:a", noon)
        .expect_err("the day's quota is spent");
    assert_eq!(wait, Duration::from_secs(DAY / 2));
    quota
        .charge("key:b", noon)
        .expect("another key has its own count");
    quota.charge("key:a", noon + DAY / 2).expect("a new day");
}

#[test]
fn retry_after_rounds_up_to_whole_seconds() {
    assert_eq!(retry_after_secs(Duration::ZERO), 1);
    assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
    assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
    assert_eq!(retry_after_secs(Duration::from_secs(7)), 7);
}

#[test]
fn every_budget_is_where_its_limit_indexes() {
    let limits = Limits::new(&ApiConfig::default(), false, Metrics::new());
    for limit in Limit::ALL {
        assert_eq!(limits.budget(limit).limit, limit);
    }
}
