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

/// A parameter the query does not declare is `bad_request` naming it; a
/// declared one that cannot be read is `validation_failed`, even when its
/// name is renamed on the wire (`ref`, `type`).
#[tokio::test]
async fn unknown_query_parameters_are_named() {
    let s = TestServer::start().await;
    let ws = "/api/v1/workspaces/default";
    for (path, field) in [
        (format!("{ws}/items?colour=red"), "colour"),
        (format!("{ws}/items?limit=5&item_ref=TASK-1"), "item_ref"),
        (format!("{ws}/events?after=1&types=x"), "types"),
        (format!("{ws}/frontier?limit=1&lim=2"), "lim"),
    ] {
        let a = s.get(&s.owner, &path).await;
        assert_eq!((a.status.as_u16(), a.code()), (400, "bad_request"), "{path}: {:?}", a.body);
        assert_eq!(a.body["error"]["details"]["field"], field, "{path}: {:?}", a.body);
    }
    let a = s.get(&s.owner, &format!("{ws}/events?type=nope")).await;
    assert_eq!((a.status.as_u16(), a.code()), (400, "validation_failed"), "{:?}", a.body);
    assert_eq!(a.body["error"]["details"]["field"], "type");
    // A parameter given twice names no one field.
    let a = s.get(&s.owner, &format!("{ws}/items?limit=1&limit=2")).await;
    assert_eq!((a.status.as_u16(), a.code()), (400, "bad_request"), "{:?}", a.body);
}
