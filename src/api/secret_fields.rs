//! Which parts of a routing document (and of any text about one) are credentials: the one list
//! the admission policies (`crds/free-form-limits.yaml`), `aigw validate`, `plan` and `export`,
//! the emulator's masked reads and the operator's message sanitiser all read, so a key added
//! here is hidden everywhere.

use serde_json::Value;

/// Keys whose values are credentials wherever they appear in a routing document (top level,
/// `targets[]`, nested strategies). They may only be set through `spec.secretRefs`, and every
/// output masks them. `aws_access_key_id`, `aws_region`, `vertex_project_id` and
/// `azure_entra_client_id` identify an account and stay readable; `virtual_key` names a key
/// stored in the gateway and is not one itself. Each is listed in snake_case and camelCase
/// (guardrail plugins spell theirs `accessKeySecret`, `awsSessionToken`).
pub const CREDENTIAL_KEYS: &[&str] = &[
    "api_key",
    "aws_secret_access_key",
    "aws_session_token",
    "vertex_service_account_json",
    "azure_entra_client_secret",
    "azure_ad_token",
    "access_key_secret",
    "client_secret",
    "private_key",
    "auth_token",
    "apiKey",
    "awsSecretAccessKey",
    "awsSessionToken",
    "vertexServiceAccountJson",
    "azureEntraClientSecret",
    "azureAdToken",
    "accessKeySecret",
    "clientSecret",
    "privateKey",
    "authToken",
];

/// Objects whose every value is an HTTP header value: `custom_headers` carry provider keys
/// (`x-api-key`, `Authorization`), `forward_headers` as a map does the same. As an array (header
/// names only, the usual `forward_headers`) there is nothing to hide.
pub const HEADER_MAP_KEYS: &[&str] = &["custom_headers", "forward_headers"];

/// Words that make any other key (or header name) read as a credential in what aigw prints:
/// matched against whole words of the key (split at `_`, `-` and camelCase humps, lowercased),
/// so `x-api-key`, `client_secret` and `clientSecret` match while `max_tokens` does not.
const SECRET_WORDS: &[&str] = &[
    "api_key",
    "apikey",
    "password",
    "passwd",
    "secret",
    "token",
    "client_auth",
    "authorization",
    "credential",
    "credentials",
    "private_key",
    "cookie",
    "service_account_json",
];

/// What a masked value reads as in aigw's own output (plans, exports, messages).
pub const MASK: &str = "<masked>";

/// True for a key in [`CREDENTIAL_KEYS`] (exact: what admission refuses in plain text).
pub fn is_credential_key(key: &str) -> bool {
    CREDENTIAL_KEYS.contains(&key)
}

/// True for a key in [`HEADER_MAP_KEYS`].
pub fn is_header_map(key: &str) -> bool {
    HEADER_MAP_KEYS.contains(&key)
}

/// True for a key whose value aigw never prints: a credential key, or a key made of a
/// secret-sounding word (`password`, `x-api-key`, `Authorization`, …).
pub fn is_secret_key(key: &str) -> bool {
    if is_credential_key(key) {
        return true;
    }
    let normalised = snake_case(key);
    let words: Vec<&str> = normalised.split('_').collect();
    SECRET_WORDS.iter().any(|secret| {
        let wanted: Vec<&str> = secret.split('_').collect();
        words.windows(wanted.len()).any(|w| w == wanted.as_slice())
    })
}

/// `key` lowercased with `-` read as `_` and a `_` before each camelCase hump:
/// `awsSessionToken` → `aws_session_token`, `X-Api-Key` → `x_api_key`.
fn snake_case(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    let mut previous: Option<char> = None;
    for c in key.chars() {
        if c.is_ascii_uppercase()
            && previous.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit())
        {
            out.push('_');
        }
        out.push(if c == '-' {
            '_'
        } else {
            c.to_ascii_lowercase()
        });
        previous = Some(c);
    }
    out
}

/// `key` as a JSON Pointer token (RFC 6901).
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Where a secret sits in a document, as a JSON Pointer, and whether it is one by its key or
/// because it is a header value.
fn walk(value: &Value, path: &str, visit: &mut dyn FnMut(&str)) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                let here = format!("{path}/{}", escape(key));
                let empty = item.is_null() || item.as_str() == Some("");
                match item {
                    _ if empty => {}
                    _ if is_secret_key(key) => visit(&here),
                    Value::Object(headers) if is_header_map(key) => {
                        for (name, header) in headers {
                            if !(header.is_null() || header.as_str() == Some("")) {
                                visit(&format!("{here}/{}", escape(name)));
                            }
                        }
                    }
                    _ => walk(item, &here, visit),
                }
            }
        }
        Value::Array(items) => {
            for (n, item) in items.iter().enumerate() {
                walk(item, &format!("{path}/{n}"), visit);
            }
        }
        _ => {}
    }
}

/// JSON Pointers of every secret in `document`: values of secret keys and of header maps, e.g.
/// `/targets/0/api_key`, `/custom_headers/x-team`. Null and empty values hold nothing.
pub fn secret_pointers(document: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(document, "", &mut |p| found.push(p.to_string()));
    found
}

/// JSON Pointers of the values of [`CREDENTIAL_KEYS`] at any depth (what must not be written in
/// plain text in `spec.config`); null values are not credentials.
pub fn credential_pointers(document: &Value) -> Vec<String> {
    pointers_where(document, &|key, value| {
        key.is_some_and(is_credential_key) && !value.is_null()
    })
}

/// JSON Pointers of the values in `document` that `picked` chooses, given the value and the key
/// it stands under (`None` in an array); a chosen value is not looked into.
fn pointers_where(document: &Value, picked: &dyn Fn(Option<&str>, &Value) -> bool) -> Vec<String> {
    fn visit(
        value: &Value,
        key: Option<&str>,
        path: &str,
        picked: &dyn Fn(Option<&str>, &Value) -> bool,
        found: &mut Vec<String>,
    ) {
        if picked(key, value) {
            found.push(path.to_string());
            return;
        }
        match value {
            Value::Object(map) => {
                for (key, item) in map {
                    let here = format!("{path}/{}", escape(key));
                    visit(item, Some(key), &here, picked, found);
                }
            }
            Value::Array(items) => {
                for (n, item) in items.iter().enumerate() {
                    visit(item, None, &format!("{path}/{n}"), picked, found);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    visit(document, None, "", picked, &mut found);
    found
}

/// `document` with every value [`secret_pointers`] finds replaced by `mask`, except values
/// `keep` accepts (e.g. a plan's `(secret name/key)`, which names a source, not a value).
pub fn masked_with(document: &Value, mask: &str, keep: &dyn Fn(&Value) -> bool) -> Value {
    let mut copy = document.clone();
    for pointer in secret_pointers(document) {
        if let Some(slot) = copy.pointer_mut(&pointer)
            && !keep(slot)
        {
            *slot = Value::String(mask.to_string());
        }
    }
    copy
}

/// `document` with every value `picked` chooses (given the value and the key it stands under,
/// `None` in an array) replaced by `mask`; a chosen value is not looked into.
pub fn masked_where(
    document: &Value,
    mask: &str,
    picked: &dyn Fn(Option<&str>, &Value) -> bool,
) -> Value {
    let mut copy = document.clone();
    for pointer in pointers_where(document, picked) {
        if let Some(slot) = copy.pointer_mut(&pointer) {
            *slot = Value::String(mask.to_string());
        }
    }
    copy
}

/// What stands for the userinfo of a URL (`https://user:pass@host`) in what aigw prints.
pub const HIDDEN_USERINFO: &str = "(hidden)";

/// `text` with the userinfo of every URL in it hidden: `https://user:pass@host/x` reads
/// `https://(hidden)@host/x`. A host a Config target or an Integration names (`custom_host`)
/// may carry credentials there, in a field that is otherwise a public setting. Only URLs with
/// a scheme (`…://`) are recognised: an address such as `a@b.example` is left as it is.
pub fn without_userinfo(text: &str) -> std::borrow::Cow<'_, str> {
    let mut out = String::new();
    let mut rest = text;
    let mut changed = false;
    while let Some(at) = rest.find("://") {
        let authority_start = at + 3;
        let tail = &rest[authority_start..];
        let authority_len = tail
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\\' | '\'' | '<' | '>') || c.is_whitespace()
            })
            .unwrap_or(tail.len());
        let authority = &tail[..authority_len];
        out.push_str(&rest[..authority_start]);
        match authority.rsplit_once('@') {
            Some((userinfo, host)) if userinfo != HIDDEN_USERINFO => {
                out.push_str(HIDDEN_USERINFO);
                out.push('@');
                out.push_str(host);
                changed = true;
            }
            _ => out.push_str(authority),
        }
        rest = &tail[authority_len..];
    }
    if !changed {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// True when `text` holds a URL with userinfo ([`without_userinfo`] would change it).
pub fn has_userinfo(text: &str) -> bool {
    matches!(without_userinfo(text), std::borrow::Cow::Owned(_))
}

/// `value` with [`without_userinfo`] applied to every string in it.
pub fn userinfo_hidden(value: &Value) -> Value {
    strings_mapped(value, &|text| without_userinfo(text).into_owned())
}

/// `value` with every string it holds, at any depth, mapped by `map`.
fn strings_mapped(value: &Value, map: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::String(text) => Value::String(map(text)),
        Value::Array(items) => Value::Array(items.iter().map(|v| strings_mapped(v, map)).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), strings_mapped(v, map)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// JSON Pointers of the strings in `document` that hold a URL with userinfo.
pub fn userinfo_pointers(document: &Value) -> Vec<String> {
    pointers_where(document, &|_, value| {
        value.as_str().is_some_and(has_userinfo)
    })
}

/// JSON Pointers of the strings in `document` that hold a value after a secret-looking key
/// ([`redact_text`] would hide part of them: `?api_key=…`, `Authorization: Bearer …`).
pub fn secret_text_pointers(document: &Value) -> Vec<String> {
    pointers_where(document, &|_, value| {
        value.as_str().is_some_and(|text| redact_text(text) != text)
    })
}

/// `value` with, in every string it holds, a URL's userinfo and the value after a
/// secret-looking key hidden ([`userinfo_hidden`], [`redact_text`]).
pub fn text_credentials_hidden(value: &Value) -> Value {
    strings_mapped(value, &|text| redact_text(&without_userinfo(text)))
}

/// `text` (an error or log message) with the value after each secret-looking key hidden:
/// `"api_key":"sk-1"`, `api_key=sk-1`, `x-api-key: sk-1`, `Authorization: Bearer sk-1`. API
/// errors may echo request fields, and a message is written to status, events and logs.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(value_start) = next_secret_value(rest) {
        out.push_str(&rest[..value_start]);
        out.push_str(MASK);
        rest = &rest[value_start + value_length(&rest[value_start..])..];
    }
    out.push_str(rest);
    without_userinfo(&out).into_owned()
}

/// A decoding error as serde words it, without the values it quotes: `invalid type: string
/// "sk-…", expected …` becomes `invalid type: string, expected …`; likewise integers, floats,
/// booleans, characters and unknown variants. A manifest may hold header values and tokens
/// where a type is wrong. Field names and positions stay.
pub fn without_decoded_values(message: &str) -> String {
    const QUOTED: [(&str, char); 6] = [
        ("string \"", '"'),
        ("integer `", '`'),
        ("floating point `", '`'),
        ("boolean `", '`'),
        ("character `", '`'),
        ("unknown variant `", '`'),
    ];
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some((at, opening, close)) = QUOTED
        .iter()
        .filter_map(|(opening, close)| rest.find(opening).map(|at| (at, *opening, *close)))
        .min_by_key(|(at, _, _)| *at)
    {
        out.push_str(&rest[..at]);
        out.push_str(opening.trim_end_matches(['"', '`']).trim_end());
        let value = &rest[at + opening.len()..];
        rest = closing(value, close).map_or("", |end| &value[end + 1..]);
    }
    out.push_str(rest);
    out
}

/// Where the value `text` starts with ends: the `"` that closes a string (serde escapes one
/// inside with a backslash), or the `` ` `` followed by a comma, a space or the end (serde
/// quotes a variant raw, so one inside it is not the end).
fn closing(text: &str, close: char) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && close == '"' {
            escaped = true;
        } else if c == close
            && (close == '"' || matches!(text[i + 1..].chars().next(), None | Some(',' | ' ')))
        {
            return Some(i);
        }
    }
    None
}

/// Where the value of the next `key<sep>value` whose key is secret starts.
fn next_secret_value(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let is_key_char = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let mut i = 0;
    while i < bytes.len() {
        if !is_key_char(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_key_char(bytes[i]) {
            i += 1;
        }
        let key = &text[start..i];
        // After a `/`, `name:` is a URL's host and port (`http://token-service:8080`) or a path
        // segment (`/api/token:exchange`), not a key and its value.
        let in_url = start > 0 && bytes[start - 1] == b'/';
        let mut j = i;
        if j < bytes.len() && bytes[j] == b'"' {
            j += 1;
        }
        if j < bytes.len() && (bytes[j] == b'=' || (bytes[j] == b':' && !in_url)) {
            j += 1;
            while j < bytes.len() && bytes[j] == b' ' {
                j += 1;
            }
            if is_secret_key(key) && j < bytes.len() && value_length(&text[j..]) > 0 {
                return Some(j);
            }
        }
    }
    None
}

/// Length of the value at the start of `text`: a quoted string (with escapes), `Bearer …` /
/// `Basic …` and the credential after it, or a bare token up to a separator.
fn value_length(text: &str) -> usize {
    if let Some(quoted) = text.strip_prefix('"') {
        let mut escaped = false;
        for (n, c) in quoted.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => return n + 2,
                _ => {}
            }
        }
        return text.len();
    }
    let scheme = ["Bearer ", "Basic ", "bearer ", "basic "]
        .iter()
        .find(|s| text.starts_with(**s))
        .map_or(0, |s| s.len());
    let bare = text[scheme..]
        .find(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '&' | '}' | ')' | ']'))
        .unwrap_or(text.len() - scheme);
    if bare == 0 { 0 } else { scheme + bare }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_decoding_error_keeps_the_field_but_not_the_value() {
        for (message, shown) in [
            (
                r#"spec.headers[0]: invalid type: string "ab\"cd-secret", expected struct Header at line 4"#,
                "spec.headers[0]: invalid type: string, expected struct Header at line 4",
            ),
            (
                "invalid type: integer `4242`, expected a string",
                "invalid type: integer, expected a string",
            ),
            (
                "unknown variant `sk-a`b`, expected one of `Full`, `Observe`",
                "unknown variant, expected one of `Full`, `Observe`",
            ),
            ("missing field `spec`", "missing field `spec`"),
            (r#"invalid value: string "open"#, "invalid value: string"),
        ] {
            assert_eq!(without_decoded_values(message), shown, "{message}");
        }
        let decoded = serde_json::from_value::<Vec<u8>>(json!(["sk-live-1"])).unwrap_err();
        let shown = without_decoded_values(&decoded.to_string());
        assert!(!shown.contains("sk-live-1"), "{shown}");
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn every_provider_credential_and_header_value_is_a_secret() {
        let document = json!({
            "api_key": "sk", "provider": "@p", "virtual_key": "vk-ok",
            "override_params": {"max_tokens": 10},
            "targets": [{"vertex_service_account_json": "{}", "vertex_project_id": "p",
                         "aws_secret_access_key": "a", "aws_session_token": "t",
                         "aws_access_key_id": "AKIA", "azure_entra_client_secret": "z",
                         "forward_headers": ["x-user"]}],
            "custom_headers": {"x-team": "h1", "x/odd": "h2", "empty": ""},
            "forward_headers": {"x-forwarded-key": "h3"},
        });
        let mut found = secret_pointers(&document);
        found.sort();
        assert_eq!(
            found,
            vec![
                "/api_key",
                "/custom_headers/x-team",
                "/custom_headers/x~1odd",
                "/forward_headers/x-forwarded-key",
                "/targets/0/aws_secret_access_key",
                "/targets/0/aws_session_token",
                "/targets/0/azure_entra_client_secret",
                "/targets/0/vertex_service_account_json",
            ]
        );
    }

    #[test]
    fn secret_words_match_whole_words_only() {
        for key in [
            "x-api-key",
            "Authorization",
            "client_secret",
            "password",
            "x-portkey-api-key",
            "vault_token",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        // camelCase keys, as guardrail plugins spell them (review F14).
        for key in [
            "accessKeySecret",
            "awsSessionToken",
            "clientSecret",
            "privateKey",
            "authToken",
            "xApiKey",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        let parameters = json!({"accessKeySecret": "a", "awsSessionToken": "t", "region": "r",
                                "clientSecret": "c", "privateKey": "p", "authToken": "x"});
        let mut refused = credential_pointers(&parameters);
        refused.sort();
        assert_eq!(
            refused,
            vec![
                "/accessKeySecret",
                "/authToken",
                "/awsSessionToken",
                "/clientSecret",
                "/privateKey"
            ]
        );
        for key in [
            "max_tokens",
            "maxTokens",
            "provider",
            "secretive_mode_x",
            "virtual_key",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn masking_keeps_what_the_caller_keeps() {
        let document = json!({"api_key": "sk", "custom_headers": {"a": "(secret s/k)", "b": "v"}});
        let keep = |v: &Value| v.as_str().is_some_and(|s| s.starts_with("(secret "));
        let masked = masked_with(&document, MASK, &keep);
        assert_eq!(
            masked,
            json!({"api_key": MASK, "custom_headers": {"a": "(secret s/k)", "b": MASK}})
        );
    }

    /// A `custom_host` is a public setting that may carry credentials as userinfo: every
    /// printed URL hides it (attack on issue 27).
    #[test]
    fn the_userinfo_of_a_url_is_hidden_wherever_it_shows() {
        const URL: &str = "https://u:VictimHostPassw0rd@h.example:8443/v1?x=1";
        assert_eq!(
            without_userinfo(URL),
            "https://(hidden)@h.example:8443/v1?x=1"
        );
        let text = format!(
            "failed to reach \"{URL}\" and http://tok@a.example and https://plain.example/x@y"
        );
        let shown = redact_text(&text);
        assert!(
            !shown.contains("VictimHostPassw0rd") && !shown.contains("tok@"),
            "{shown}"
        );
        assert!(shown.contains("https://plain.example/x@y"), "{shown}");
        assert_eq!(without_userinfo("alice@example.com"), "alice@example.com");
        assert!(!has_userinfo("https://(hidden)@h.example"));
        let document = json!({"targets": [{"custom_host": URL}, {"custom_host": "https://h"}]});
        assert_eq!(userinfo_pointers(&document), vec!["/targets/0/custom_host"]);
        assert!(
            !userinfo_hidden(&document)
                .to_string()
                .contains("VictimHost")
        );
    }

    #[test]
    fn values_after_secret_keys_are_redacted_in_text() {
        let text = r#"HTTP 400: {"api_key":"sk-1\"x","name":"n"} api_key=sk-2, Authorization: Bearer sk-3 x-api-key: sk-4 max_tokens=5"#;
        let redacted = redact_text(text);
        for value in ["sk-1", "sk-2", "sk-3", "sk-4"] {
            assert!(!redacted.contains(value), "{value} in {redacted}");
        }
        assert!(redacted.contains("max_tokens=5"), "{redacted}");
        assert!(redacted.contains(r#""name":"n""#), "{redacted}");
        assert_eq!(redact_text("no secrets: a=b"), "no secrets: a=b");
        // A host and port, a path segment: no key and value (an attack of stop 82 found such
        // URLs made export skip a Deployment as holding credentials).
        for url in [
            "http://token-service:8080/mcp",
            "https://m.example/api/token:exchange",
        ] {
            assert_eq!(redact_text(url), url);
        }
        assert!(!redact_text("https://m.example/p/access_token=S3CR").contains("S3CR"));
    }
}
