//! The admission rules (CEL `x-kubernetes-validations`) that many kinds' specs state alike, each
//! with its message naming the kind, e.g. `#[x_kube(validation = rules::set_at_creation("slug",
//! "Config"))]`. One rule here is one rule in each CRD that names it.

use kube::core::{Message, Reason, Rule};

/// `spec.<field>` can be neither added nor removed once the object exists. A field's own rule
/// `self == oldSelf` only runs when the field is on both sides, so adding or removing an
/// identity, which would switch the object to another remote one, is caught here.
pub fn set_at_creation(field: &str, kind: &str) -> Rule {
    Rule::new(format!("has(self.{field}) == has(oldSelf.{field})"))
        .field_path(format!(".{field}"))
        .reason(Reason::FieldValueForbidden)
        .message(Message::Message(format!(
            "spec.{field} cannot be added or removed after creation: create a new {kind} instead"
        )))
}

/// `spec.<field>` keeps its value for the object's life, absent reading as `default` (what the
/// API takes it for): writing the default out later, or leaving it out again, changes nothing
/// and is allowed; any other change, or adding or removing another value, is refused.
pub fn fixed_defaulting(field: &str, default: &str, kind: &str) -> Rule {
    Rule::new(format!(
        "(has(self.{field}) ? self.{field} : '{default}') == \
         (has(oldSelf.{field}) ? oldSelf.{field} : '{default}')"
    ))
    .field_path(format!(".{field}"))
    .reason(Reason::FieldValueInvalid)
    .message(Message::Message(format!(
        "spec.{field} is immutable (absent means {default}): create a new {kind} to change it"
    )))
}

/// `spec.connectionRef` names the same Connection (`default` when absent) for the object's life.
pub fn same_connection(kind: &str) -> Rule {
    Rule::new(
        "(has(self.connectionRef) ? self.connectionRef.name : 'default') == \
         (has(oldSelf.connectionRef) ? oldSelf.connectionRef.name : 'default')",
    )
    .field_path(".connectionRef")
    .reason(Reason::FieldValueInvalid)
    .message(Message::Message(format!(
        "spec.connectionRef is immutable: the remote object lives behind its Connection; \
         create a new {kind} to use another Connection"
    )))
}

/// At most one of `spec.workspaceId` and `spec.workspaceRef` (neither: the API's default).
pub fn workspace_id_or_ref() -> Rule {
    Rule::new("!(has(self.workspaceId) && has(self.workspaceRef))")
        .field_path(".workspaceRef")
        .reason(Reason::FieldValueForbidden)
        .message("set spec.workspaceId or spec.workspaceRef, not both")
}

/// Exactly one of `spec.workspaceId` and `spec.workspaceRef`.
pub fn one_workspace() -> Rule {
    Rule::new("has(self.workspaceId) != has(self.workspaceRef)")
        .field_path(".workspaceRef")
        .reason(Reason::FieldValueRequired)
        .message(
            "set exactly one of spec.workspaceId (a workspace's UUID) or spec.workspaceRef (a \
             Workspace resource)",
        )
}

/// The workspace, named by `spec.workspaceId` or by `spec.workspaceRef`, is named the same way
/// for the object's life ([`one_workspace`] holds one of them set).
pub fn workspace_named_alike(kind: &str) -> Rule {
    Rule::new("has(self.workspaceRef) == has(oldSelf.workspaceRef)")
        .field_path(".workspaceRef")
        .reason(Reason::FieldValueForbidden)
        .message(Message::Message(format!(
            "spec.workspaceId and spec.workspaceRef cannot be swapped after creation: create a \
             new {kind} instead"
        )))
}

/// The URL at `field` (a dotted path from the object holding the rule, e.g.
/// `authSettings.gatewayBaseUrl`; `displayed` in its message), when set, carries no
/// credentials (`user:password@`): a URL is shown in `kubectl get`, events and errors, where a
/// password in it would be read by all. `instead` says where they go. A rule on the object
/// rather than the string, so that its refusal does not quote the URL.
pub fn no_credentials_in_url(field: &str, displayed: &str, instead: &str) -> Rule {
    let (unset, value) = unset_or(field);
    Rule::new(format!(
        "{unset}(!{value}.matches(r'{USERINFO}') && !{value}.matches(r'{USERINFO_INSIDE}') && \
         !{value}.matches(r'{QUERY_SECRET}'))"
    ))
    .field_path(format!(".{field}"))
    .reason(Reason::FieldValueForbidden)
    .message(Message::Message(format!(
        "{displayed} must not carry credentials (user:password@, or a token or key in its query): {instead}"
    )))
}

/// The URL at `field` (a dotted path, as [`no_credentials_in_url`]), when set, is one aigw
/// can call and append the API's paths to: [`super::connection::http_url`]. On the object, so
/// that its refusal does not quote the URL (it may hold a token).
pub fn http_url_at(field: &str, displayed: &str) -> Rule {
    let (unset, value) = unset_or(field);
    let url = super::connection::http_url(&value);
    Rule::new(format!("{unset}({url})"))
        .field_path(format!(".{field}"))
        .reason(Reason::FieldValueInvalid)
        .message(Message::Message(format!(
            "{displayed} must be an http:// or https:// URL with a host, and without a query or fragment (aigw appends the API's paths to it)"
        )))
}

/// For the dotted `field`: the CEL that holds when it (or an object on its way) is absent,
/// ending in `||`, and the CEL of its value.
fn unset_or(field: &str) -> (String, String) {
    let mut unset = String::new();
    let mut value = String::from("self");
    for part in field.split('.') {
        value = format!("{value}.{part}");
        unset.push_str(&format!("!has({value}) || "));
    }
    (unset, value)
}

/// A URL with userinfo, spelled as a URL parser (WHATWG's, which browsers and the `url` crate
/// follow) still reads it: leading control characters and spaces, any case of scheme (or none),
/// tabs and newlines in it, any number of slashes or backslashes before the authority.
const USERINFO: &str = r"^[\x00-\x20]*([a-zA-Z][a-zA-Z0-9+.\-\t\n\r]*:)?[\t\n\r/\\]*[^/?#\\]*@";

/// A URL with userinfo anywhere in the text (`x https://user:pass@host`, after a no-break
/// space, behind an odd scheme): where aigw hides userinfo in what it prints
/// ([`crate::api::secret_fields::without_userinfo`]), a field that takes any text must not
/// hold it. Whitespace is Go's ASCII class spelt out (`\s` is Unicode-aware in Rust's regex,
/// which `aigw validate` runs, and not in the apiserver's).
const USERINFO_INSIDE: &str = r"[a-zA-Z0-9+.\-]:[\t\n\r]*[/\\][\t\n\r/\\]*[^/?#\\\t\n\f\r ]*@";

/// A parameter (after `?`, `&`, `;`, `#`, `/` or `,`) whose name reads as a credential, as
/// aigw's printing hides one (`?access_token=…`, `&api-key=…`, `?clientSecret=…`,
/// `/p/token=…`, `?secretKey=…`): the words of
/// [`crate::api::secret_fields::is_secret_key`], whole, a camelCase hump ending one as `_`
/// does (`max_tokens` is no token; `tokenId` is).
const QUERY_SECRET: &str = r"[?&;#/,]((?i:([a-z0-9]*[_.\-])*(api[_\-]?key|password|passwd|secret|token|authorization|credentials?|client[_\-]auth|private[_\-]key|cookie|service[_\-]account[_\-]json))([_.\-][a-zA-Z0-9_.\-]*|[A-Z][a-zA-Z0-9_.\-]*)?|[a-zA-Z0-9_.\-]*[a-z0-9](Token|Secret|Password|Passwd|ApiKey|Apikey|Authorization|Credentials?|PrivateKey|Cookie)([A-Z_.\-][a-zA-Z0-9_.\-]*)?)=";

/// An instant as RFC 3339 writes one, e.g. `2027-01-01T00:00:00Z` (offset required), on a day
/// the calendar has (no February 30th; February 29th of leap years only) and without a leap
/// second, which the API's parser refuses.
const RFC3339: &str = r"^([0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)|([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29)[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";

/// A UUID, e.g. `6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b`.
const UUID: &str = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

/// `spec.<field>`, when set, is an RFC 3339 instant: the API refuses anything else, which would
/// only show as a Stalled object after it was stored.
pub fn instant(field: &str) -> Rule {
    matching(
        field,
        RFC3339,
        "an RFC 3339 instant with its offset, e.g. 2027-01-01T00:00:00Z",
    )
}

/// `spec.<field>`, when set, is a UUID (as the API requires of it).
pub fn uuid(field: &str) -> Rule {
    matching(
        field,
        UUID,
        "a UUID, e.g. 6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b",
    )
}

/// `spec.<field>`, when set, matches `pattern`; the refusal says it must be `what`.
fn matching(field: &str, pattern: &str, what: &str) -> Rule {
    Rule::new(format!(
        "!has(self.{field}) || self.{field}.matches(r'{pattern}')"
    ))
    .field_path(format!(".{field}"))
    .reason(Reason::FieldValueInvalid)
    .message(Message::Message(format!("spec.{field} must be {what}")))
}

/// A label selector (at `field`, e.g. `spec.apiKeySelector`) the operator can build: each
/// `matchExpressions` operator is `In` or `NotIn` with values, or `Exists` or `DoesNotExist`
/// without. One it cannot build would fail at every use (a Connection's, for every namespace).
pub fn label_selector(field: &str) -> Rule {
    Rule::new(format!(
        "(!has(self.matchLabels) || self.matchLabels.all(k, k.matches(r'{LABEL_KEY}') && \
         !k.matches(r'^[^/]{{254,}}/') && self.matchLabels[k].matches(r'{LABEL_VALUE}'))) && \
         (!has(self.matchExpressions) || self.matchExpressions.all(e, \
         e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && \
         (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0)))"
    ))
    .message(Message::Message(format!(
        "{field}: each key must be a label key (an optional DNS prefix and /, then at most 63 letters, digits, '-', '_' or '.'), each matchLabels value a label value, and each matchExpressions operator In, NotIn, Exists or DoesNotExist, with values for In and NotIn and none for Exists and DoesNotExist"
    )))
}

/// A label key as Kubernetes checks it: an optional DNS-subdomain prefix and `/`, then a name
/// of at most 63 characters that starts and ends alphanumeric.
pub(crate) const LABEL_KEY: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$";

/// A label value as Kubernetes checks it: empty, or at most 63 characters that start and end
/// alphanumeric.
pub(crate) const LABEL_VALUE: &str = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_names_its_field_and_kind() {
        let rule = serde_json::to_value(set_at_creation("policyId", "UsageLimitsPolicy")).unwrap();
        assert_eq!(
            rule,
            serde_json::json!({
                "rule": "has(self.policyId) == has(oldSelf.policyId)",
                "fieldPath": ".policyId",
                "reason": "FieldValueForbidden",
                "message": "spec.policyId cannot be added or removed after creation: create a new \
                            UsageLimitsPolicy instead",
            })
        );
    }
}
