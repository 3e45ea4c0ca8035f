//! `/ai_gw/v2/policies/rate-limits`.
//!
//! DELETE archives (`status: archived`) rather than removing the record. The list and get routes
//! filter on `status` with default `active`, which is what FACTS §4 infers from the live API: a
//! deleted policy disappears from default reads (GET → 404) but `?status=archived` still finds it.
//! A second DELETE, or a PUT, of an archived policy is 404.
//!
//! `workspace_id` (body and list query) is a workspace UUID or slug; `organisation_id` in a body is
//! a UUID. `value` is a required number: `null` is a 400 on create and on update. A PUT changes
//! only `name`, `unit`, `value` and `conditions`; `type`, `group_by`, `target` and `workspace_id`
//! are immutable and a differing value is a 400. POST, PUT and DELETE are the generic policy
//! routes of `policy_fields`.

use std::collections::HashMap;

use axum::{
    extract::{Path, Query, State},
    response::Response,
};
use serde_json::{Number, Value, json};

use super::common::{
    errors::{ApiResult, EmulatorError},
    fields::{self, Object},
    policy_fields::{self, Policy, PolicyFilter, PolicyKind},
    records::{Kind, Records, Slug},
    state::{Common, KindState},
};

/// What the rate-limits policy routes reach.
pub type RateLimitsState = KindState<RateLimitStore>;

const UNITS: &[&str] = &["rpm", "rph", "rpd", "rpw"];
const TARGETS: &[&str] = &["llm", "mcp_tools"];

pub type RateLimitStore = Records<RateLimitRecord>;

pub type RateLimitRecord = Policy<RateLimit>;

/// What a rate-limits policy holds besides its [`PolicyHead`].
pub struct RateLimit {
    unit: String,
    value: Number,
    target: String,
}

impl PolicyKind for RateLimit {
    const KIND: Kind = Kind::new("a", "rate limits policy", Slug::Named("rate-limits"));
    const TYPES: &'static [&'static str] = &["requests", "tokens"];
    const OBJECT: &'static str = "policy_rate_limits";
    /// `unit` and `value` (a PUT changes only these, `name` and `conditions`).
    type Changes = (Option<String>, Option<Number>);

    fn seed(_: &Common, item: &Object) -> ApiResult<Self> {
        Ok(Self {
            unit: policy_fields::required_enum(item, "unit", UNITS)?,
            value: fields::opt_number(item, "value")?.unwrap_or_else(|| Number::from(0)),
            target: Self::target(item)?,
        })
    }

    /// `POST /ai_gw/v2/policies/rate-limits`: `value` is required.
    fn create(_: &Common, body: &Object) -> ApiResult<Self> {
        Ok(Self {
            unit: policy_fields::required_enum(body, "unit", UNITS)?,
            value: fields::opt_number_not_null(body, "value")?
                .ok_or_else(|| EmulatorError::validation("value is required"))?,
            target: Self::target(body)?,
        })
    }

    fn read(&self) -> Value {
        json!({ "unit": self.unit, "value": self.value, "target": self.target })
    }

    fn changes(body: &Object) -> ApiResult<Self::Changes> {
        let unit = fields::opt_enum(body, "unit", UNITS)?;
        Ok((unit, fields::opt_number_not_null(body, "value")?))
    }

    fn apply(&mut self, (unit, value): Self::Changes) -> ApiResult<()> {
        fields::set(&mut self.unit, unit);
        fields::set(&mut self.value, value);
        Ok(())
    }

    fn immutable(&self) -> Vec<(&'static str, Value)> {
        vec![("target", json!(self.target))]
    }
}

impl RateLimit {
    /// `target`, `llm` when not sent.
    fn target(body: &Object) -> ApiResult<String> {
        Ok(fields::opt_enum(body, "target", TARGETS)?.unwrap_or_else(|| "llm".to_owned()))
    }
}

/// `GET /ai_gw/v2/policies/rate-limits` → `{object: "list", data, total}`, 0-based paging.
pub async fn list(
    State(state): State<RateLimitsState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let filter = PolicyFilter::parse(&query, RateLimit::TYPES)?;
    let unit = policy_fields::enum_filter(&query, "unit", UNITS)?;
    let target = policy_fields::enum_filter(&query, "target", TARGETS)?;
    let search = query.get("search").map(|text| text.to_lowercase());
    let admits = |r: &RateLimitRecord| {
        unit.as_ref().is_none_or(|u| &r.own.unit == u)
            && target.as_ref().is_none_or(|t| &r.own.target == t)
            && search.as_ref().is_none_or(|needle| {
                r.head
                    .name
                    .as_ref()
                    .is_some_and(|name| name.to_lowercase().contains(needle.as_str()))
            })
    };
    Ok(filter.reply(&state, admits, RateLimitRecord::read_as))
}

/// `GET /ai_gw/v2/policies/rate-limits/{id}` (`?status`, default `active`).
pub async fn get(
    State(state): State<RateLimitsState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    policy_fields::reply_one(&state, &id, &query, RateLimitRecord::read_as)
}
