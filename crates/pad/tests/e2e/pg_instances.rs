//! Many `pad serve` processes on one PostgreSQL database (docs/operations.md; docs/leases.md L1): 64
//! claimers spread over three instances race on one item, round after
//! round, and exactly one wins each time.

use crate::common;

use std::collections::HashSet;

use common::pg::ScratchDb;
use common::server::TestServer;
use pad_client::{Client, ClientError, Url};
use pad_core::NewItem;
use pad_core::api::{ClaimBody, ErrorCode};

#[test]
fn three_processes_sixty_four_claimers_one_winner_per_round() {
    let Some(db) = ScratchDb::create_blocking() else {
        eprintln!("SKIPPED three_processes_…: set PAD_TEST_DATABASE_URL to run it");
        return;
    };
    let first = TestServer::start_with_db(&db.url);
    let servers = [first.start_sibling(), first.start_sibling()];
    let urls: Vec<String> = std::iter::once(first.url.clone()).chain(servers.iter().map(|s| s.url.clone())).collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let clients: Vec<Client> =
            urls.iter().map(|u| Client::new(Url::parse(u).unwrap(), first.token.clone()).unwrap()).collect();
        for round in 0..50 {
            let item = clients[round % 3]
                .create_item("default", &NewItem { title: format!("race {round}"), ..Default::default() })
                .await
                .unwrap();
            let r = item.item_ref.to_string();
            let tasks: Vec<_> = (0..64)
                .map(|i| {
                    let c = clients[i % 3].clone();
                    let r = r.clone();
                    tokio::spawn(async move {
                        let body = ClaimBody {
                            holder: Some(format!("w{i}")),
                            ttl_seconds: Some(60.into()),
                            ..Default::default()
                        };
                        // An overloaded instance may answer 503 (pool exhausted while
                        // everyone queues on the row lock); a client retries that.
                        for _ in 0..20 {
                            match c.claim("default", &r, &body).await {
                                Err(ClientError::Api { code: ErrorCode::Unavailable, .. }) => {
                                    tokio::time::sleep(std::time::Duration::from_millis(100)).await
                                }
                                other => return other,
                            }
                        }
                        c.claim("default", &r, &body).await
                    })
                })
                .collect();
            let mut winners = Vec::new();
            let mut named = HashSet::new();
            for t in tasks {
                match t.await.unwrap() {
                    Ok(won) => winners.push(won.lease.holder),
                    Err(ClientError::Api { code: ErrorCode::LeaseHeld, details, .. }) => {
                        named.insert(details["holder"].as_str().unwrap_or_default().to_string());
                    }
                    Err(e) => panic!("round {round}: unexpected answer {e}"),
                }
            }
            assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
            assert!(named.iter().all(|h| *h == winners[0]), "round {round}: losers named {named:?}");
        }
        println!("3 instances, 64 claimers, 50 rounds: exactly one winner each round");
    });
}
