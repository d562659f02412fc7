//! Unit and property tests of the item model.

use super::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_parse_case_insensitively_and_print_upper() {
        let r: ItemRef = "task-5".parse().unwrap();
        assert_eq!(r.to_string(), "TASK-5");
        for bad in [
            "",
            "TASK",
            "TASK-",
            "-5",
            "TASK-0",
            "TASK-05",
            "TA SK-1",
            "TASK-1x",
            "1ASK-1",
            "TOOLONGPREFIX-1",
            "TASK-99999999999999999999",
        ] {
            assert!(bad.parse::<ItemRef>().is_err(), "{bad}");
        }
    }

    fn sample_item() -> Item {
        serde_json::from_value(serde_json::json!({
            "ref": "TASK-1", "kind": "task", "title": "t", "body": "b", "status": "in-progress",
            "priority": "high", "labels": ["x"], "parent": null, "blocked_by": [], "blocked_by_open": [],
            "assignee": "a@example.com", "created_by": "a@example.com", "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:00Z", "deleted_at": null, "comments_count": 2, "lease": null
        }))
        .unwrap()
    }

    /// A complete's version (L15) is written from the status alone: it must
    /// be what a diff of the whole item gives.
    #[test]
    fn status_changes_are_the_diff_of_a_status_move() {
        let old = sample_item();
        for to in [Status::Done, Status::Cancelled, Status::Open] {
            let new = Item { status: to, ..old.clone() };
            assert_eq!(Item::status_changes(old.status, to), new.changes_since(Some(&old)), "{to:?}");
        }
    }

    /// docs/api.md, "Limits": at most 100 blockers, counted on the merged
    /// list, so repeated `add_blocked_by` cannot grow an item past the cap;
    /// removals in the same update count first.
    #[test]
    fn merged_blockers_are_capped_at_100() {
        let refs = |range: std::ops::Range<i64>| {
            range.map(|number| ItemRef { prefix: "TASK".into(), number }).collect::<Vec<_>>()
        };
        let item = |blockers: Vec<ItemRef>| Item { blocked_by: blockers, ..sample_item() };
        let full = item(refs(2..102));
        let add = |r: std::ops::Range<i64>| ValidPatch { add_blocked_by: refs(r), ..Default::default() };
        let e = full.patched(&add(200..201)).unwrap_err();
        assert_eq!(e.field, "add_blocked_by");
        assert!(e.message.contains("100") && e.message.contains("101"), "{}", e.message);
        let swap = ValidPatch { remove_blocked_by: refs(2..3), ..add(200..201) };
        assert_eq!(full.patched(&swap).unwrap().blocked_by.len(), 100, "a removal makes room");
        let e = item(refs(2..52)).patched(&add(200..300)).unwrap_err();
        assert_eq!(e.field, "add_blocked_by");
        assert!(e.message.contains("150"), "{}", e.message);
        // An item left over the cap (before the merged list was checked) may
        // still be edited and lose blockers, never gain one.
        let over = item(refs(2..152));
        assert!(over.patched(&ValidPatch { title: Some("t2".into()), ..Default::default() }).is_ok());
        let fewer = ValidPatch { remove_blocked_by: refs(2..3), ..Default::default() };
        assert_eq!(over.patched(&fewer).unwrap().blocked_by.len(), 149);
        assert_eq!(over.patched(&add(200..201)).unwrap_err().field, "add_blocked_by");
        // Labels are counted the same way (LABELS_MAX).
        let labels = Item { labels: (0..50).map(|n| format!("l{n}")).collect(), ..sample_item() };
        let e = labels.patched(&ValidPatch { add_labels: vec!["more".into()], ..Default::default() }).unwrap_err();
        assert_eq!(e.field, "labels");
    }

    #[test]
    fn slugs() {
        assert!(validate_slug("slug", "default").is_ok());
        assert!(validate_slug("slug", "a-1").is_ok());
        assert!(validate_slug("slug", &"a".repeat(63)).is_ok());
        for bad in ["", "-a", "A", "a_b", "a b", &"a".repeat(64)] {
            assert!(validate_slug("slug", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn new_item_validation_names_the_field() {
        let ok = NewItem { title: "x".into(), ..Default::default() };
        assert_eq!(ok.validate().unwrap().kind, "task");
        let e = NewItem { title: "a\0".into(), ..Default::default() }.validate().unwrap_err();
        assert_eq!(e.field, "title");
        let e = NewItem { title: "x".into(), labels: vec!["ok".into(), "".into()], ..Default::default() }
            .validate()
            .unwrap_err();
        assert_eq!(e.field, "labels[1]");
        let e =
            NewItem { title: "x".into(), parent: Some("nope".into()), ..Default::default() }.validate().unwrap_err();
        assert_eq!(e.field, "parent");
        let e = NewItem { title: "x".repeat(501), ..Default::default() }.validate().unwrap_err();
        assert_eq!(e.field, "title");
    }

    #[test]
    fn patch_distinguishes_null_from_absent() {
        let p: ItemPatch = serde_json::from_str(r#"{"assignee": null}"#).unwrap();
        assert_eq!(p.assignee, Some(None));
        let p: ItemPatch = serde_json::from_str(r#"{}"#).unwrap();
        assert_eq!(p.assignee, None);
        assert!(serde_json::from_str::<ItemPatch>(r#"{"titel": "x"}"#).is_err());
    }

    /// The OpenAPI attributes take literals; these are the constants the
    /// validation enforces.
    #[test]
    fn the_schema_states_the_enforced_limits() {
        use utoipa::PartialSchema;
        let new = serde_json::to_value(NewItem::schema()).unwrap();
        let patch = serde_json::to_value(ItemPatch::schema()).unwrap();
        let filter = serde_json::to_value(FrontierFilter::schema()).unwrap();
        for p in [&new["properties"], &patch["properties"]] {
            assert_eq!(p["title"]["minLength"], 1);
            assert_eq!(p["title"]["maxLength"], TITLE_MAX);
            assert_eq!(p["body"]["maxLength"], BODY_MAX_BYTES);
            assert_eq!(p["labels"]["maxItems"], LABELS_MAX);
            assert_eq!(p["labels"]["items"]["maxLength"], LABEL_MAX);
            assert_eq!(p["blocked_by"]["maxItems"], BLOCKED_BY_MAX);
            assert_eq!(p["blocked_by"]["items"]["maxLength"], REF_MAX);
            assert_eq!(p["assignee"]["maxLength"], 254);
        }
        assert_eq!(filter["properties"]["kinds"]["maxItems"], KINDS_FILTER_MAX);
        assert_eq!(filter["properties"]["without_labels"]["items"]["maxLength"], LABEL_MAX);
        let longest = format!("ABCDEFGHIJ-{}", i64::MAX);
        assert_eq!(longest.len(), REF_MAX);
        assert!(longest.parse::<ItemRef>().is_ok());
    }

    #[test]
    fn priority_ranks_round_trip() {
        for p in Priority::ALL {
            assert_eq!(Priority::from_rank(p.rank()), Some(*p));
        }
        assert!(Priority::Critical > Priority::Low);
    }
}

#[cfg(test)]
mod fuzz {
    //! Parsers under arbitrary input: they never panic, accept exactly their
    //! grammar, and what they accept round-trips.
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ref_parser_accepts_its_grammar_only(s in "\\PC{0,24}") {
            if let Ok(r) = s.parse::<ItemRef>() {
                prop_assert_eq!(r.to_string(), s.to_ascii_uppercase());
                prop_assert!(r.number >= 1);
                prop_assert!(validate_prefix("p", &r.prefix).is_ok());
            }
        }

        #[test]
        fn well_formed_refs_round_trip(prefix in "[A-Za-z][A-Za-z0-9]{0,9}", n in 1i64..i64::MAX) {
            let r: ItemRef = format!("{prefix}-{n}").parse().unwrap();
            prop_assert_eq!(r.number, n);
            prop_assert_eq!(r.prefix, prefix.to_ascii_uppercase());
        }

        #[test]
        fn slugs_match_the_documented_pattern(s in "\\PC{0,70}") {
            let pattern = s.len() <= 63
                && s.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
            prop_assert_eq!(validate_slug("slug", &s).is_ok(), pattern);
        }

        #[test]
        fn labels_refuse_controls_and_bound_length(s in "\\PC{0,80}|[\\x00-\\x1f]{1,3}") {
            let ok = validate_label("label", &s).is_ok();
            let n = s.chars().count();
            let visible = !s.chars().any(|c| c.is_control() || validate::is_invisible(c));
            prop_assert_eq!(ok, (1..=LABEL_MAX).contains(&n) && visible && !s.contains(','));
        }

        #[test]
        fn item_bodies_never_panic(title in "\\PC{0,600}", labels in proptest::collection::vec("\\PC{0,70}", 0..60)) {
            let new = NewItem { title, labels, ..Default::default() };
            let _ = new.validate();
        }
    }
}
