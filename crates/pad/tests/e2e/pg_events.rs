//! Live events across instances (docs/api.md, Events; docs/operations.md): with PostgreSQL, a stream on
//! instance A sees a claim made through instance B. How soon is printed per round, not bounded: a
//! loaded machine delivers late, and the figure is a measurement, not the behaviour.

use crate::common;

use std::time::{Duration, Instant};

use common::pg::ScratchDb;
use common::server::TestServer;
use pad_client::{Client, Url};
use pad_core::NewItem;
use pad_core::api::ClaimBody;

#[test]
fn a_stream_on_one_instance_sees_a_claim_made_through_another() {
    let Some(db) = ScratchDb::create_blocking() else {
        eprintln!("SKIPPED a_stream_on_one_instance_sees…: set PAD_TEST_DATABASE_URL to run it");
        return;
    };
    let a = TestServer::start_with_db(&db.url);
    let b = a.start_sibling();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = |s: &TestServer| Client::new(Url::parse(&s.url).unwrap(), a.token.clone()).unwrap();
        let (on_a, on_b) = (client(&a), client(&b));
        let mut stream = on_a.event_stream("default", 0).await.unwrap();
        let item = on_b.create_item("default", &NewItem { title: "cross".into(), ..Default::default() }).await.unwrap();
        let r = item.item_ref.to_string();
        for round in 0..5 {
            let body =
                ClaimBody { holder: Some(format!("b-{round}")), ttl_seconds: Some(60.into()), ..Default::default() };
            on_b.claim("default", &r, &body).await.unwrap();
            let claimed = Instant::now();
            let seen = tokio::time::timeout(Duration::from_secs(30), async {
                loop {
                    let e = stream.next_event().await.expect("stream open").expect("an event");
                    if e.kind == pad_core::EventKind::LeaseClaimed && e.data["holder"] == format!("b-{round}") {
                        return claimed.elapsed();
                    }
                }
            })
            .await
            .expect("the claim's event never reached instance A");
            println!("round {round}: instance A saw B's claim after {seen:?}");
            let rel = pad_core::api::ReleaseBody { holder: Some(format!("b-{round}")), ..Default::default() };
            on_b.release("default", &r, &rel).await.unwrap();
        }
    });
}
