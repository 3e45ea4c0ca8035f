//! Envelopes. Reads and writes come back either flat or wrapped as `{"success": true, "data": …}`;
//! lists come back as a bare array, `{"data": [...]}` or `{"object": "list", "total", "data"}`.

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_with::skip_serializing_none;

/// Removes a `{success, data}` wrapper if there is one. Returns `Err(body)` when `success` is
/// `false`, so the caller can report it as an API error. A list's `total` beside the wrapper
/// (`{success, total, data: [...]}`) stays with its rows (`{total, data}`): without it the rows
/// could not say whether they are all.
pub fn unwrap_success(value: Value) -> Result<Value, Value> {
    let Value::Object(mut obj) = value else {
        return Ok(value);
    };
    match obj.get("success") {
        Some(Value::Bool(false)) => Err(Value::Object(obj)),
        Some(Value::Bool(true)) if obj.get("data").is_some_and(Value::is_array) => {
            obj.remove("success");
            match obj.contains_key("total") {
                true => Ok(Value::Object(obj)),
                false => Ok(obj.remove("data").unwrap_or(Value::Null)),
            }
        }
        Some(Value::Bool(true)) if obj.contains_key("data") => {
            Ok(obj.remove("data").unwrap_or(Value::Null))
        }
        _ => Ok(Value::Object(obj)),
    }
}

/// Every row a list call could get, and whether that is all of them. Configs and deployments
/// have no paging and may return fewer rows than their `total`; a page may also come back empty
/// before `total` is reached. Only a complete listing proves that something is absent.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing<T> {
    pub items: Vec<T>,
    pub complete: bool,
}

impl<T> Listing<T> {
    /// One unpaged answer: complete when its `total` counts exactly the rows that came back and
    /// it does not say more follow (`has_more`). Without a `total` nothing says so (these lists
    /// may be capped, and the spec's config list carries none): such an answer never proves
    /// absence; nor does one with more rows than its `total` (a count of something else, a
    /// page's say).
    pub fn from_page(page: ListPage<T>) -> Self {
        let complete = !page.has_more
            && page
                .total
                .is_some_and(|total| page.data.len() as u64 == total);
        Self {
            items: page.data,
            complete,
        }
    }

    /// The same listing, each row mapped by `row`.
    pub fn map<U>(self, row: impl FnMut(T) -> U) -> Listing<U> {
        Listing {
            items: self.items.into_iter().map(row).collect(),
            complete: self.complete,
        }
    }
}

/// Whether one answer of `rows` rows holds every row: not when its `total` counts more than came
/// back, nor when it says more follow (`has_more`). An answer without a `total` (a legacy shape)
/// counts as whole. For answers read to act on each row (access rows), not to prove a row absent
/// ([`Listing`]).
pub(super) fn answer_whole(rows: usize, total: Option<u64>, has_more: bool) -> bool {
    !has_more && total.is_none_or(|total| rows as u64 >= total)
}

/// A page of a list: its rows, when the API says, the total across all pages, and whether it
/// says more rows follow (`has_more`, which some lists carry).
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListPage<T> {
    pub data: Vec<T>,
    pub total: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub has_more: bool,
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for ListPage<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        // Decoded through `Value` rather than an untagged enum so a bad row keeps its own error.
        let (rows, total, has_more) = match Value::deserialize(d)? {
            rows @ Value::Array(_) => (rows, None, false),
            Value::Object(mut o) => {
                let total = o.get("total").and_then(Value::as_u64);
                let has_more = o.get("has_more").and_then(Value::as_bool) == Some(true);
                // An answer with neither rows nor a count (`{}`, an empty body) is no list: taken
                // for an empty one, it would end a listing and prove every object absent.
                if total.is_none() && !o.contains_key("data") {
                    return Err(D::Error::custom(
                        "a list answer with neither `data` nor `total`",
                    ));
                }
                (o.remove("data").unwrap_or(Value::Null), total, has_more)
            }
            _ => return Err(D::Error::custom("expected a list")),
        };
        let data = match rows {
            Value::Null => Vec::new(),
            rows @ Value::Array(_) => serde_json::from_value(rows).map_err(D::Error::custom)?,
            _ => return Err(D::Error::custom("list `data` is not an array")),
        };
        Ok(ListPage {
            data,
            total,
            has_more,
        })
    }
}

/// A page of a list the API pages by `page` (from 1) for as long as it `has_more`: its rows and,
/// when the API says, their total.
#[skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
pub struct MorePage<T> {
    #[serde(default, deserialize_with = "super::de::null_as_empty")]
    pub data: Vec<T>,
    pub total: Option<u64>,
    #[serde(default)]
    pub has_more: bool,
}

impl<T> MorePage<T> {
    /// The API says there are more rows, and this page was not empty.
    pub fn more(&self) -> bool {
        self.has_more && !self.data.is_empty()
    }
}

// By hand: the derive would ask `T` to be `Default` too.
impl<T> Default for MorePage<T> {
    fn default() -> Self {
        Self {
            data: Vec::new(),
            total: None,
            has_more: false,
        }
    }
}

/// A list answer decoded straight from the body, row by row, without the `Value` tree
/// [`ListPage`] goes through: for large lists read often (the drift check lists every config),
/// where that tree of maps was the largest allocation of the process. It takes the same shapes:
/// a bare array, `{"data": [...], "total"}`, and either one inside `{"success": true, "data"}`.
/// Any other shape (`success: false` included) fails to decode, and the caller reads the answer
/// again the usual way to report it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedPage<T> {
    pub data: Vec<T>,
    pub total: Option<u64>,
    /// The answer says more rows follow.
    pub has_more: bool,
}

impl<T> From<StreamedPage<T>> for Listing<T> {
    fn from(page: StreamedPage<T>) -> Self {
        Listing::from_page(ListPage {
            data: page.data,
            total: page.total,
            has_more: page.has_more,
        })
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for StreamedPage<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PageVisitor(std::marker::PhantomData))
    }
}

struct PageVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: DeserializeOwned> serde::de::Visitor<'de> for PageVisitor<T> {
    type Value = StreamedPage<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list: an array, or an object with `data`")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut data = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(row) = seq.next_element()? {
            data.push(row);
        }
        Ok(StreamedPage {
            data,
            total: None,
            has_more: false,
        })
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut page: Option<StreamedPage<T>> = None;
        let mut total = None;
        let mut has_more = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                // `data` is the rows, or a list envelope inside a success envelope.
                "data" => page = Some(map.next_value::<StreamedPage<T>>()?),
                "total" => total = map.next_value::<Option<u64>>()?,
                "has_more" => has_more = map.next_value::<Option<bool>>()? == Some(true),
                "success" => {
                    if !map.next_value::<bool>()? {
                        return Err(A::Error::custom("the answer says success: false"));
                    }
                }
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        let mut page = page.unwrap_or(StreamedPage {
            data: Vec::new(),
            total: None,
            has_more: false,
        });
        page.total = page.total.or(total);
        page.has_more |= has_more;
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unwraps_success_envelopes_only() {
        assert_eq!(
            unwrap_success(json!({"success": true, "data": {"version_id": "v1"}})),
            Ok(json!({"version_id": "v1"}))
        );
        assert_eq!(
            unwrap_success(json!({"id": "a", "version_id": "v1"})),
            Ok(json!({"id": "a", "version_id": "v1"}))
        );
        // a list envelope is not a success envelope
        let list = json!({"object": "list", "total": 1, "data": [1]});
        assert_eq!(unwrap_success(list.clone()), Ok(list));
        assert!(unwrap_success(json!({"success": false, "data": {"errorCode": "AB03"}})).is_err());
    }

    #[test]
    fn streamed_pages_take_every_list_shape() {
        let parse = |text: &str| serde_json::from_str::<StreamedPage<u32>>(text).unwrap();
        let page = |data: Vec<u32>, total| StreamedPage {
            data,
            total,
            has_more: false,
        };
        assert_eq!(parse("[1, 2]"), page(vec![1, 2], None));
        assert_eq!(
            parse(r#"{"object": "list", "total": 7, "data": [1]}"#),
            page(vec![1], Some(7))
        );
        assert_eq!(
            parse(r#"{"success": true, "data": {"total": 3, "data": [4]}}"#),
            page(vec![4], Some(3))
        );
        assert_eq!(
            parse(r#"{"success": true, "data": [5]}"#),
            page(vec![5], None)
        );
        assert!(serde_json::from_str::<StreamedPage<u32>>(r#"{"success": false}"#).is_err());
        assert!(serde_json::from_str::<StreamedPage<u32>>(r#""text""#).is_err());
        let more = parse(r#"{"total": 1, "data": [1], "has_more": true}"#);
        assert!(more.has_more);
        assert!(
            !Listing::from(more).complete,
            "an answer saying more rows follow is not whole"
        );
    }

    #[test]
    fn a_list_proves_absence_only_with_its_total() {
        let page = |data: Vec<u32>, total| {
            Listing::from_page(ListPage {
                data,
                total,
                has_more: false,
            })
        };
        assert!(page(vec![1, 2], Some(2)).complete);
        assert!(!page(vec![1], Some(2)).complete, "capped below its total");
        assert!(
            !page(vec![1, 2], None).complete,
            "nothing says these are all"
        );
        assert!(page(vec![], Some(0)).complete);
        assert!(
            !page(vec![1, 2], Some(1)).complete,
            "a count of something else"
        );
        assert!(!page(vec![1, 2], Some(0)).complete);
    }

    #[test]
    fn a_total_beside_the_success_envelope_stays_with_its_rows() {
        let unwrapped = unwrap_success(json!({"success": true, "total": 150, "data": [1, 2]}));
        let p: ListPage<u32> = serde_json::from_value(unwrapped.unwrap()).unwrap();
        assert_eq!(p.total, Some(150));
        assert!(!Listing::from_page(p).complete);
        let bare = unwrap_success(json!({"success": true, "data": [1]})).unwrap();
        assert_eq!(bare, json!([1]));
    }

    #[test]
    fn an_answer_with_neither_rows_nor_count_is_no_list() {
        for body in [
            json!({}),
            json!({"success": true}),
            json!({"object": "list"}),
        ] {
            let body = unwrap_success(body).unwrap();
            assert!(
                serde_json::from_value::<ListPage<u32>>(body.clone()).is_err(),
                "{body}"
            );
        }
        let p: ListPage<u32> = serde_json::from_value(json!({"total": 0})).unwrap();
        assert!(Listing::from_page(p).complete);
    }

    #[test]
    fn list_shapes() {
        let p: ListPage<u32> = serde_json::from_value(json!([1, 2])).unwrap();
        assert_eq!(
            p,
            ListPage {
                data: vec![1, 2],
                total: None,
                has_more: false,
            }
        );
        let p: ListPage<u32> =
            serde_json::from_value(json!({"object":"list","total":7,"data":[1]})).unwrap();
        assert_eq!(
            p,
            ListPage {
                data: vec![1],
                total: Some(7),
                has_more: false,
            }
        );
        let p: ListPage<u32> =
            serde_json::from_value(json!({"total": 2, "data": [1, 2], "has_more": true})).unwrap();
        assert!(p.has_more);
        assert!(
            !Listing::from_page(p).complete,
            "an answer that says more rows follow is not whole, whatever its total"
        );
        let p: ListPage<u32> = serde_json::from_value(json!({"data": null})).unwrap();
        assert!(p.data.is_empty());
        assert!(serde_json::from_value::<ListPage<u32>>(json!({"data": ["x"]})).is_err());
    }
}
