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

/// A label selector (at `field`, e.g. `spec.apiKeySelector`) the operator can build: each
/// `matchExpressions` operator is `In` or `NotIn` with values, or `Exists` or `DoesNotExist`
/// without. One it cannot build would fail at every use (a Connection's, for every namespace).
pub fn label_selector(field: &str) -> Rule {
    Rule::new(
        "!has(self.matchExpressions) || self.matchExpressions.all(e, \
         e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'] && \
         (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",
    )
    .message(Message::Message(format!(
        "{field}.matchExpressions: operator must be In, NotIn, Exists or DoesNotExist, with values for In and NotIn and none for Exists and DoesNotExist"
    )))
}

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
