//! The usage and rate limits an Integration's workspace access and a Provider take, as the API's
//! `UsageLimits` and `RateLimits` objects (FACTS-more §1).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use serde_with::skip_serializing_none;

use super::common::json_equivalent;

/// A budget: how much may be spent (or how many tokens used), with an alert and a reset.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!(has(self.periodicReset) && has(self.periodicResetDays))").message("set either periodicReset or periodicResetDays, not both"))]
pub struct UsageLimits {
    /// The limit (cost in the account's currency, or tokens), at least 1.
    #[schemars(range(min = 1))]
    pub credit_limit: u64,
    /// `cost` or `tokens`.
    #[serde(rename = "type")]
    pub kind: UsageLimitType,
    /// Alert when usage reaches this much (at least 1).
    #[schemars(range(min = 1))]
    pub alert_threshold: Option<u64>,
    /// `monthly` or `weekly`: usage resets on that schedule.
    pub periodic_reset: Option<PeriodicReset>,
    /// Or: usage resets every this many days (1–365).
    #[schemars(range(min = 1, max = 365))]
    pub periodic_reset_days: Option<u32>,
}

/// What a budget counts (of a usage-limits policy too).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UsageLimitType {
    /// Spend.
    Cost,
    /// Tokens.
    Tokens,
}

impl UsageLimitType {
    /// The API's spelling.
    pub fn to_api(self) -> crate::api::UsageLimitType {
        match self {
            Self::Cost => crate::api::UsageLimitType::Cost,
            Self::Tokens => crate::api::UsageLimitType::Tokens,
        }
    }
}

/// A budget's reset schedule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PeriodicReset {
    /// Every month.
    Monthly,
    /// Every week.
    Weekly,
}

/// A rate limit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    /// `requests` or `tokens`.
    #[serde(rename = "type")]
    pub kind: RateLimitType,
    /// `rpm`, `rph` or `rpd`.
    pub unit: RateLimitUnit,
    /// How many per unit.
    pub value: u64,
}

/// What a rate limit counts (of a rate-limits policy and an API key too).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitType {
    /// Requests.
    Requests,
    /// Tokens.
    Tokens,
}

impl RateLimitType {
    /// The API's spelling.
    pub fn to_api(self) -> crate::api::RateLimitType {
        match self {
            Self::Requests => crate::api::RateLimitType::Requests,
            Self::Tokens => crate::api::RateLimitType::Tokens,
        }
    }
}

/// The window of a rate limit.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RateLimitUnit {
    /// Per minute.
    Rpm,
    /// Per hour.
    Rph,
    /// Per day.
    Rpd,
}

impl UsageLimits {
    /// The budget an API read shows (an object, or an array of one, `null` fields absent), as
    /// a spec states it; `None` when the read holds none, or one a spec could not state (no
    /// limit, a type or schedule this release does not know).
    pub fn from_api(read: &[Value]) -> Option<Self> {
        let [read] = read else { return None };
        let field = |name: &str| read.get(name).filter(|v| !v.is_null());
        let limits = Self {
            credit_limit: field("credit_limit")?
                .as_u64()
                .filter(|limit| *limit >= 1)?,
            kind: parsed(read, "type")?,
            alert_threshold: match field("alert_threshold") {
                Some(v) => Some(v.as_u64().filter(|t| *t >= 1)?),
                None => None,
            },
            periodic_reset: match field("periodic_reset") {
                Some(_) => Some(parsed(read, "periodic_reset")?),
                None => None,
            },
            periodic_reset_days: match field("periodic_reset_days") {
                Some(v) => Some(v.as_u64().and_then(|d| u32::try_from(d).ok())?),
                None => None,
            },
        };
        Some(limits)
    }

    /// The API's `UsageLimits` object.
    pub fn to_api(&self) -> Value {
        let mut value = json!({"credit_limit": self.credit_limit, "type": self.kind});
        if let Some(threshold) = self.alert_threshold {
            value["alert_threshold"] = json!(threshold);
        }
        if let Some(reset) = self.periodic_reset {
            value["periodic_reset"] = json!(reset);
        }
        if let Some(days) = self.periodic_reset_days {
            value["periodic_reset_days"] = json!(days);
        }
        value
    }
}

impl RateLimit {
    /// The rate limit an API read shows (an array of one), as a spec states it; `None` when
    /// the read holds none or one a spec could not state.
    pub fn from_api(read: &[Value]) -> Option<Self> {
        let [read] = read else { return None };
        Some(Self {
            kind: parsed(read, "type")?,
            unit: parsed(read, "unit")?,
            value: read.get("value")?.as_u64()?,
        })
    }

    /// The API's `RateLimits` object.
    pub fn to_api(&self) -> Value {
        json!({"type": self.kind, "unit": self.unit, "value": self.value})
    }
}

/// The field `name` of `read` as `T`, if it holds one.
fn parsed<T: serde::de::DeserializeOwned>(read: &Value, name: &str) -> Option<T> {
    serde_json::from_value(read.get(name)?.clone()).ok()
}

/// True when `remote` holds every field `desired` sets, with the same meaning. A read adds
/// fields of its own (`next_usage_reset_at`, …), which do not count; it may also be an array of
/// one object (live reads carry either).
pub fn covers(remote: Option<&Value>, desired: &Value) -> bool {
    let remote = match remote {
        Some(Value::Array(items)) if items.len() == 1 => &items[0],
        Some(other) => other,
        None => return false,
    };
    desired.as_object().is_some_and(|wanted| {
        wanted.iter().all(|(key, value)| {
            remote
                .get(key)
                .is_some_and(|have| json_equivalent(have, value))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_with_extra_fields_covers_what_the_spec_sets() {
        let limits = UsageLimits {
            credit_limit: 100,
            kind: UsageLimitType::Cost,
            alert_threshold: Some(80),
            periodic_reset: Some(PeriodicReset::Monthly),
            periodic_reset_days: None,
        };
        let desired = limits.to_api();
        let read = json!([{"credit_limit": 100.0, "type": "cost", "alert_threshold": 80,
                           "periodic_reset": "monthly", "next_usage_reset_at": "2026-12-01T00:00:00Z"}]);
        assert!(covers(Some(&read), &desired));
        assert!(!covers(
            Some(&json!({"credit_limit": 50, "type": "cost"})),
            &desired
        ));
        assert!(!covers(None, &desired));
        assert!(!covers(Some(&Value::Null), &desired));
    }
}

#[cfg(test)]
mod from_api_tests {
    use super::*;

    #[test]
    fn a_read_a_spec_could_not_state_is_left_out() {
        let read = |v: Value| UsageLimits::from_api(&[v]);
        assert!(read(json!({"credit_limit": 0, "type": "cost"})).is_none());
        assert!(read(json!({"credit_limit": 5, "type": "credits"})).is_none());
        assert!(
            read(json!({"credit_limit": 5, "type": "cost", "periodic_reset": "daily"})).is_none()
        );
        assert!(read(json!({"type": "cost"})).is_none());
        assert!(UsageLimits::from_api(&[]).is_none());
        let kept = read(
            json!({"credit_limit": 5, "type": "tokens", "periodic_reset_days": 7,
                               "alert_threshold": 4}),
        )
        .unwrap();
        assert_eq!(
            (kept.periodic_reset_days, kept.alert_threshold),
            (Some(7), Some(4))
        );
        assert!(
            RateLimit::from_api(&[json!({"type": "requests", "unit": "rpw", "value": 1})])
                .is_none()
        );
    }
}
