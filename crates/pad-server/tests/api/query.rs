//! A query parameter that cannot be read is `400 validation_failed` naming
//! the parameter, in the message and in `details.field` (docs/api.md, Errors).

use crate::common;

use common::TestServer;

#[tokio::test]
async fn unreadable_query_parameters_are_named() {
    let s = TestServer::start().await;
    let ws = "/api/v1/workspaces/default";
    for (path, field) in [
        (format!("{ws}/items?limit=abc"), "limit"),
        (format!("{ws}/items?limit=-1"), "limit"),
        (format!("{ws}/items?status=bogus"), "status"),
        (format!("{ws}/items?leased=maybe"), "leased"),
        (format!("{ws}/frontier?limit=x"), "limit"),
        (format!("{ws}/events?after=soon"), "after"),
    ] {
        let a = s.get(&s.owner, &path).await;
        assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{path}: {:?}", a.body);
        assert_eq!(a.body["error"]["details"]["field"], field, "{path}: {:?}", a.body);
        let message = a.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{path}: {message}");
    }
}
