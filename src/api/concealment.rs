//! Where a secret value shows in a text, however it was written: as is, in another letter case,
//! JSON-escaped (`\u00e4` and all, `/` as `\/` too), HTML-escaped (`&#x2F;`, `&amp;`, …), with its
//! whitespace collapsed, URL-encoded, base64- or hex-encoded, masked around stars
//! (`sk-ab****yz9`), or quoted in part. The one matcher behind
//! every output aigw writes about a value it knows: the operator's messages (status, events,
//! logs, dry-run events), the drift record, and the reading tools (`plan`, `export`,
//! `history --diff`).
//!
//! Short values need a rule of their own. A value of 4 characters or more is found anywhere. A
//! 3-character value (a PIN, a short id) is found where it stands alone, between characters
//! that are not letters or digits: `pin 123 rejected` hides it, `HTTP 1234` does not. A value of
//! 1 or 2 characters is found only where it is the whole text or quoted (`'7'`, `"ab"`):
//! hiding every `a` or `1` of a message would leave nothing readable, and such a value has so
//! few possibilities that hiding it elsewhere would protect nothing.
//!
//! Parts of a value need rules that leave ordinary messages readable, since a value shares
//! words with them (`https`, `api-key`, `config`). A message is withheld whole
//! ([`WITHHELD`]) when it holds, of a value of 4 characters or more:
//! - a run of 12 of its characters with a letter and a digit, anywhere;
//! - a fragment next to an ellipsis that starts or ends it (`'correc...staple'`);
//! - a quoted part of it of 4 characters or more (`'horse'`);
//! - an unquoted word that is part of it (a word: a run between whitespace, quotes and the
//!   punctuation around values; a trailing `.`, `;`, `!` or `?` left out) of 12 characters or
//!   more, or of 6 or more that are at least half the value (`horse-battery` of
//!   `correct-horse-battery-staple`, `Tr0ub4d` of `Tr0ub4dor&3`). Shorter words, and words of
//!   a message that only contain part of a value (`vertex_service_account_json`), do not count:
//!   `the horse field`, `https://` and `api-key` still read.
//!
//! These rules also apply to what the message decodes to (a truncated base64, URL, hex or HTML
//! encoding of a value quotes the part it decodes to) and, for a value of 12 characters or more,
//! to the message with its whitespace and escaped line breaks taken out (a value or its base64
//! wrapped over lines, or cut into short groups). A fragment between two ellipses
//! (`...8b7c6d5e4f3...`) of 6 characters or more that is part of a value counts as quoting it.
//!
//! A word masked around stars (`*`, `•`, `●`; three or more) whose characters before the stars
//! start the value or after them end it, 3 characters or more in all
//! (`sk-abc12X**************xyz9`), is replaced by [`SECRET`]: a masked echo still gives away
//! the value's ends. Stars with nothing of the value around them stay.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

/// What a concealed value reads as in a message.
pub const SECRET: &str = "<secret>";

/// What a message that still carries part or an encoding of a value is replaced by.
pub const WITHHELD: &str = "<the API's message was withheld: it quoted part of a secret value>";

/// What a message reads as when the values to look for in it are more than [`CONCEALED_BYTES`].
pub const TOO_MANY_TO_CHECK: &str = "<the API's message was withheld: the secret values it could quote are too large to look for in it>";

/// The most bytes of values [`conceal`] looks for in one message. Past it the message is
/// withheld whole: looking for a value costs in proportion to its length (its encodings, the
/// parts of it a message may quote), and a tenant may name a Secret of a mebibyte.
pub const CONCEALED_BYTES: usize = 64 * 1024;

/// Values this long or longer are found anywhere, in any encoding.
const ANYWHERE: usize = 4;

/// Values this long are found where they stand alone; shorter ones only quoted.
const ALONE: usize = 3;

/// How many characters of a value a message may not quote when the run has a letter and a
/// digit (field names and prose that a value shares with a message have none).
const QUOTED_RUN: usize = 12;

/// The shortest base64 run decoded to look for a value in it.
const BASE64_RUN: usize = 8;

/// The shortest unquoted word of a message that counts as part of a value (when it is half the
/// value, too).
const PARTIAL_WORD: usize = 6;

/// How many masking characters in a row make a masked echo.
const MASK_RUN: usize = 3;

/// The characters an API masks a value's middle with.
fn masks(c: char) -> bool {
    matches!(c, '*' | '•' | '●')
}

/// The forms `value` may take in a text: as written, JSON-escaped (and with every non-ASCII
/// character as `\uXXXX`, as ASCII-only encoders write it), with whitespace collapsed,
/// URL-encoded (as a path or query component, and as a form with `+` for space), base64
/// (standard and URL-safe, padded or not) and hex. Longest first. Forms are found whatever
/// their letter case (an API may echo a value upper- or lower-cased).
pub fn forms(value: &str) -> Vec<String> {
    if value.is_empty() {
        return Vec::new();
    }
    let escaped = serde_json::to_string(value).unwrap_or_default();
    let escaped = escaped.trim_matches('"').to_string();
    let ascii = ascii_escaped(&escaped);
    // Some encoders escape `/` too.
    let slashed = escaped.replace('/', "\\/");
    let ascii_slashed = ascii.replace('/', "\\/");
    let collapsed = value.split_whitespace().collect::<Vec<_>>().join(" ");
    let url = utf8_percent_encode(value, NON_ALPHANUMERIC).to_string();
    let mut all = vec![
        value.to_string(),
        escaped,
        ascii,
        slashed,
        ascii_slashed,
        collapsed,
        url.clone(),
    ];
    all.push(url.replace("%20", "+"));
    // Unreserved characters (`-._~`) are left as they are by most encoders.
    all.push(
        url.replace("%2D", "-")
            .replace("%2E", ".")
            .replace("%5F", "_")
            .replace("%7E", "~"),
    );
    if value.len() >= ANYWHERE {
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            all.push(engine.encode(value));
        }
        all.push(value.bytes().map(|b| format!("{b:02x}")).collect());
    }
    all.retain(|form| !form.is_empty());
    all.sort_by_key(|form| std::cmp::Reverse(form.len()));
    all.dedup();
    all
}

/// `escaped` (a JSON-escaped text) with every non-ASCII character written `\uXXXX` (a
/// surrogate pair beyond the basic plane).
fn ascii_escaped(escaped: &str) -> String {
    let mut out = String::with_capacity(escaped.len());
    for c in escaped.chars() {
        match c.is_ascii() {
            true => out.push(c),
            false => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out
}

/// `text` with every JSON `\uXXXX` escape (surrogate pairs too) read as its character.
fn json_unescaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut units = Vec::new();
    let mut rest = text;
    let flush = |units: &mut Vec<u16>, out: &mut String| {
        out.extend(char::decode_utf16(units.drain(..)).map(|c| c.unwrap_or('\u{fffd}')));
    };
    while let Some(at) = rest.find("\\u") {
        let digits = rest.get(at + 2..at + 6);
        match digits.and_then(|d| u16::from_str_radix(d, 16).ok()) {
            Some(unit) => {
                if at > 0 {
                    flush(&mut units, &mut out);
                    out.push_str(&rest[..at]);
                }
                units.push(unit);
                rest = &rest[at + 6..];
            }
            None => {
                flush(&mut units, &mut out);
                out.push_str(&rest[..at + 2]);
                rest = &rest[at + 2..];
            }
        }
    }
    flush(&mut units, &mut out);
    out.push_str(rest);
    out
}

/// `text` with its HTML character references read: numeric ones (`&#47;`, `&#x2F;`) and the
/// named ones an encoder writes for the characters a value holds (`&amp;`, `&lt;`, `&gt;`,
/// `&quot;`, `&apos;`, `&sol;`, `&colon;`, `&equals;`, `&plus;`, `&commat;`, `&percnt;`,
/// `&num;`, `&quest;`, `&nbsp;`). A reference it does not know stays as it is.
fn html_unescaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let body = rest[1..]
            .find(';')
            .filter(|end| *end <= 10)
            .map(|end| &rest[1..1 + end]);
        let read = body.and_then(|body| {
            let c = match body.strip_prefix('#') {
                Some(number) => match number.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok().and_then(char::from_u32)?,
                    None => number.parse::<u32>().ok().and_then(char::from_u32)?,
                },
                None => match body {
                    "amp" => '&',
                    "lt" => '<',
                    "gt" => '>',
                    "quot" => '"',
                    "apos" => '\'',
                    "sol" => '/',
                    "colon" => ':',
                    "equals" => '=',
                    "plus" => '+',
                    "commat" => '@',
                    "percnt" => '%',
                    "num" => '#',
                    "quest" => '?',
                    "nbsp" => ' ',
                    _ => return None,
                },
            };
            Some((c, body.len() + 2))
        });
        match read {
            Some((c, length)) => {
                out.push(c);
                rest = &rest[length..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// True when `text` is `value`, holds it in one of its [`forms`], or decodes (URL, base64,
/// HTML references, JSON `\/`) to text holding it; for short values only where the value stands alone or is quoted (see the
/// module documentation).
pub fn holds(text: &str, value: &str) -> bool {
    Haystack::of(text).holds(value, &folded_forms(value))
}

/// The [`forms`] of `value`, ASCII-lowercased as [`occurrence`] compares them.
fn folded_forms(value: &str) -> Vec<String> {
    forms(value)
        .iter()
        .map(|form| form.to_ascii_lowercase())
        .collect()
}

/// A text and what it decodes to ([`decoded`]), each lowercased once: [`holds`] of many values
/// in it without decoding or folding it again for each.
struct Haystack {
    texts: Vec<String>,
    folded: Vec<String>,
}

impl Haystack {
    fn of(text: &str) -> Self {
        let mut texts = vec![text.to_string()];
        texts.extend(decoded(text));
        let folded = texts.iter().map(|t| t.to_ascii_lowercase()).collect();
        Self { texts, folded }
    }

    /// [`holds`] of `value` in the text, `forms` being its [`folded_forms`].
    fn holds(&self, value: &str, forms: &[String]) -> bool {
        if value.is_empty() {
            return false;
        }
        if self.texts[0] == value {
            return true;
        }
        if value.len() >= ANYWHERE {
            let found = |text: &String| forms.iter().any(|form| text.contains(form.as_str()));
            return self.folded.iter().any(found);
        }
        self.texts.iter().any(|text| {
            forms
                .iter()
                .any(|form| occurrence(text, form, value.len()).is_some())
        })
    }
}

/// `message` with every one of `values` replaced by [`SECRET`] in each of its [`forms`] (the
/// longest first, so a longer value is never left half-replaced by a shorter one), and with
/// whitespace collapsed where a value came back so. A message that still carries a value (in
/// an encoding of a longer text) or quotes part of one is withheld whole, and so is any message
/// when `values` hold more than [`CONCEALED_BYTES`] ([`TOO_MANY_TO_CHECK`]).
pub fn conceal<S: AsRef<str>>(message: &str, values: &[S]) -> String {
    let values: Vec<&str> = values.iter().map(AsRef::as_ref).collect();
    conceal_each(message, &values)
}

fn conceal_each(message: &str, values: &[&str]) -> String {
    if values.iter().map(|v| v.len()).sum::<usize>() > CONCEALED_BYTES {
        return TOO_MANY_TO_CHECK.into();
    }
    let mut forms_of: Vec<(String, usize)> = values
        .iter()
        .flat_map(|value| {
            folded_forms(value)
                .into_iter()
                .map(|form| (form, value.len()))
        })
        .collect();
    forms_of.sort_by_key(|(form, _)| std::cmp::Reverse(form.len()));
    forms_of.dedup();
    // Each form is looked for in the text folded once, and the text folded again only after a
    // replacement: most values are in no message.
    let replace_all = |text: &str| {
        let mut text = text.to_string();
        let mut folded = text.to_ascii_lowercase();
        for (form, length) in &forms_of {
            if folded.contains(form.as_str()) {
                text = replaced(&text, form, *length);
                folded = text.to_ascii_lowercase();
            }
        }
        text
    };
    let mut message = replace_all(message);
    // A value written with HTML references: read them, then replace (only then: a message
    // without a value keeps its references as they are).
    if message.contains('&') {
        let unescaped = html_unescaped(&message);
        let haystack = Haystack::of(&unescaped);
        if values
            .iter()
            .any(|value| haystack.holds(value, &folded_forms(value)))
        {
            message = replace_all(&unescaped);
        }
    }
    let mut message = star_masked(&message, values);
    // A value spread over lines may also come back with its whitespace collapsed.
    let collapsed = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let folded = collapsed.to_ascii_lowercase();
    if forms_of.iter().any(|(form, length)| {
        folded.contains(form.as_str()) && occurrence(&collapsed, form, *length).is_some()
    }) {
        message = replace_all(&collapsed);
    }
    let shown = Shown::of(&message);
    if values.iter().any(|value| shown.shows(value)) {
        return WITHHELD.into();
    }
    message
}

/// A message prepared once for [`Shown::shows`] of every value: whether it still carries a
/// value or part of it, as it reads, in what it decodes to (URL, base64, hex, HTML references,
/// JSON escapes; so a truncated encoding of a value counts as the part it decodes to), and, for
/// a value of [`QUOTED_RUN`] characters or more, once the message's whitespace and escaped line
/// breaks are taken out (a value, or its base64, wrapped over lines or cut into groups).
struct Shown {
    /// The message and what it decodes to, each as [`holds`] and [`quotes_part_of`] read it.
    plain: Vec<(Haystack, Quoting)>,
    /// The same of the message joined ([`joined`]), when that differs from it.
    joined: Vec<(Haystack, Quoting)>,
}

impl Shown {
    fn of(message: &str) -> Self {
        let prepared = |text: &str| {
            let mut texts = vec![text.to_string()];
            texts.extend(decoded(text));
            texts
                .iter()
                .map(|t| (Haystack::of(t), Quoting::of(t)))
                .collect()
        };
        let joined = joined(message);
        Self {
            plain: prepared(message),
            joined: match joined != message {
                true => prepared(&joined),
                false => Vec::new(),
            },
        }
    }

    /// Whether the message (values already replaced) still carries `value` or part of it.
    fn shows(&self, value: &str) -> bool {
        let forms = folded_forms(value);
        let parts = parts_of(value);
        let long = value.chars().count() >= QUOTED_RUN;
        let joined = self.joined.iter().filter(|_| long);
        self.plain
            .iter()
            .chain(joined)
            .any(|(text, quoting)| text.holds(value, &forms) || quoting.quotes(value, &parts))
    }
}

/// `text` without its whitespace and its escaped line breaks (`%0A`, `%0D`, `\n`, `\r`), the
/// [`SECRET`]s it holds kept apart.
fn joined(text: &str) -> String {
    text.split(SECRET)
        .map(|part| {
            let part = ["%0A", "%0a", "%0D", "%0d", "\\n", "\\r"]
                .iter()
                .fold(part.to_string(), |part, escape| part.replace(escape, ""));
            part.split_whitespace().collect::<String>()
        })
        .collect::<Vec<_>>()
        .join(&format!(" {SECRET} "))
}

/// `text` with each occurrence of `form` (of a value `length` long) replaced by [`SECRET`].
fn replaced(text: &str, form: &str, length: usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((start, end)) = occurrence(rest, form, length) {
        out.push_str(&rest[..start]);
        out.push_str(SECRET);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where the first occurrence of `form` (a form of a value `length` long) that counts starts
/// and ends: anywhere for long values, standing alone for 3 characters, quoted (or the whole
/// text) for 1 or 2.
fn occurrence(text: &str, form: &str, length: usize) -> Option<(usize, usize)> {
    if form.is_empty() {
        return None;
    }
    // ASCII case folding keeps every byte where it was, so positions found in the folded text
    // are positions in `text`.
    let (text, form) = (&text.to_ascii_lowercase(), &form.to_ascii_lowercase());
    if length >= ANYWHERE {
        return text.find(form).map(|start| (start, start + form.len()));
    }
    if text == form {
        return Some((0, text.len()));
    }
    let mut from = 0;
    while let Some(found) = text[from..].find(form) {
        let (start, end) = (from + found, from + found + form.len());
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let counts = match length >= ALONE {
            true => {
                !before.is_some_and(char::is_alphanumeric)
                    && !after.is_some_and(char::is_alphanumeric)
            }
            false => matches!(
                (before, after),
                (Some(a), Some(b)) if a == b && matches!(a, '\'' | '"' | '`')
            ),
        };
        if counts {
            return Some((start, end));
        }
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    None
}

/// What `text` may be an encoding of: the text with its `\uXXXX` escapes read, URL-decoded (`+`
/// read as a space, and as is), and every hex run (16 digits or more) and base64 run in it
/// decoded.
fn decoded(text: &str) -> Vec<String> {
    let mut plain = Vec::new();
    if text.contains("\\u") {
        plain.push(json_unescaped(text));
    }
    if text.contains("\\/") {
        plain.push(json_unescaped(&text.replace("\\/", "/")));
    }
    if text.contains('&') {
        plain.push(html_unescaped(text));
    }
    if text.contains('%') {
        let url = percent_encoding::percent_decode_str(text).decode_utf8_lossy();
        plain.push(url.to_string());
        let form = text.replace('+', " ");
        let form = percent_encoding::percent_decode_str(&form).decode_utf8_lossy();
        plain.push(form.to_string());
    }
    for run in text.split(|c: char| !c.is_ascii_hexdigit()) {
        if run.len() >= 2 * BASE64_RUN && run.len() % 2 == 0 {
            let bytes: Option<Vec<u8>> = (0..run.len())
                .step_by(2)
                .map(|at| u8::from_str_radix(&run[at..at + 2], 16).ok())
                .collect();
            if let Some(bytes) = bytes {
                plain.push(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
    }
    let base64_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '-' | '_');
    for run in text.split(|c: char| !base64_char(c) && c != '=') {
        let run = run.trim_end_matches('=');
        if run.len() < BASE64_RUN {
            continue;
        }
        // A run may end in the middle of a quantum; the bytes before it still decode.
        for cut in 0..4 {
            let Some(candidate) = run.get(..run.len() - cut) else {
                break;
            };
            let bytes = URL_SAFE_NO_PAD
                .decode(candidate.replace('+', "-").replace('/', "_"))
                .ok();
            if let Some(bytes) = bytes {
                plain.push(String::from_utf8_lossy(&bytes).into_owned());
                break;
            }
        }
    }
    plain
}

/// Whether `message` quotes part of `value`: a run of `QUOTED_RUN` characters of it with a
/// letter and a digit; a fragment of it next to an ellipsis (an echo cut short:
/// `'correc...staple'`); a quoted part of it of at least 4 characters; or an unquoted word that
/// is a long enough part of it (`partial_word`). A [`SECRET`] a value was replaced by is no
/// part of any.
pub fn quotes_part_of(message: &str, value: &str) -> bool {
    Quoting::of(message).quotes(value, &parts_of(value))
}

/// The parts of `value` a message may quote: its string leaves when it is a JSON document, else
/// the value itself.
fn parts_of(value: &str) -> Vec<String> {
    json_leaves(value).unwrap_or_else(|| vec![value.to_string()])
}

/// What [`quotes_part_of`] reads of a message, taken out of it once for the checks of every
/// value ([`SECRET`] read as a space).
struct Quoting {
    /// Every run of [`QUOTED_RUN`] characters of the message.
    runs: std::collections::HashSet<String>,
    /// The fragments before and after each ellipsis ([`elisions`]).
    elisions: Vec<(String, String)>,
    /// The words standing between two ellipses ([`middles`]).
    middles: Vec<String>,
    /// The quoted strings ([`quoted`]).
    quoted: Vec<String>,
    /// The unquoted words ([`unquoted_words`]).
    words: Vec<(String, usize)>,
}

impl Quoting {
    fn of(message: &str) -> Self {
        let message = &message.replace(SECRET, " ");
        let chars: Vec<char> = message.chars().collect();
        let runs = chars
            .windows(QUOTED_RUN)
            .map(|run| run.iter().collect())
            .collect();
        Self {
            runs,
            elisions: elisions(message),
            middles: middles(message),
            quoted: quoted(message),
            words: unquoted_words(message),
        }
    }

    /// Whether the message quotes part of `value`, whose [`parts_of`] are `parts`.
    fn quotes(&self, value: &str, parts: &[String]) -> bool {
        let chars: Vec<char> = value.chars().collect();
        if chars.len() < ANYWHERE {
            return false;
        }
        let long_run = chars.windows(QUOTED_RUN).any(|run| {
            run.iter().any(char::is_ascii_digit)
                && run.iter().any(char::is_ascii_alphabetic)
                && self.runs.contains(&run.iter().collect::<String>())
        });
        long_run
            || self.elided_part(value, parts)
            || self.quoted_part(parts)
            || self.partial_word(parts)
    }

    /// A fragment next to an ellipsis that starts the value (before it) or ends it (after it),
    /// as an echo cut short prints them, or that stands between two ellipses (a middle cut of
    /// a value, or of a string leaf of a JSON value). A fragment next to one ellipsis that is
    /// only somewhere inside the value does not count: field names a JSON value shares with a
    /// message (`private_key_id...`) would withhold messages that quote nothing.
    fn elided_part(&self, value: &str, parts: &[String]) -> bool {
        let shortest = shortest_fragment(value);
        let long_enough = |fragment: &str| fragment.chars().count() >= shortest;
        self.elisions.iter().any(|(before, after)| {
            (long_enough(before) && value.starts_with(before.as_str()))
                || (long_enough(after) && value.ends_with(after.as_str()))
        }) || self
            .middles
            .iter()
            .any(|middle| parts.iter().any(|part| part.contains(middle.as_str())))
    }

    /// A quoted string of the message, of at least [`ANYWHERE`] characters, that is a part of
    /// the value: however short a part of the value an echo quotes, it narrows the value down.
    /// A value that is a JSON document (a service account key) is looked at in its string
    /// leaves, not its field names: a message quoting the field it misses (`'private_key_id'
    /// is missing`) quotes nothing secret.
    fn quoted_part(&self, parts: &[String]) -> bool {
        self.quoted
            .iter()
            .any(|quoted| parts.iter().any(|part| part.contains(quoted.as_str())))
    }

    /// An unquoted word of the message that is part of the value (of a string leaf of a JSON
    /// value), in any letter case, of [`QUOTED_RUN`] characters or more, or of
    /// [`PARTIAL_WORD`] or more that are at least half of it.
    fn partial_word(&self, parts: &[String]) -> bool {
        let parts: Vec<(String, usize)> = parts
            .iter()
            .map(|part| (part.to_lowercase(), part.chars().count()))
            .filter(|(_, length)| *length >= ANYWHERE)
            .collect();
        self.words.iter().any(|(word, length)| {
            parts.iter().any(|(part, whole)| {
                (*length >= QUOTED_RUN || length * 2 >= *whole) && part.contains(word.as_str())
            })
        })
    }
}

/// The words of `text` (runs between whitespace, quotes and the punctuation around values
/// ([`ends_fragment`])), each with where it starts and ends.
fn words(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (at, c) in text.char_indices() {
        match (ends_fragment(c), start) {
            (true, Some(from)) => {
                out.push((from, at));
                start = None;
            }
            (false, None) => start = Some(at),
            _ => {}
        }
    }
    if let Some(from) = start {
        out.push((from, text.len()));
    }
    out
}

/// The unquoted words of `message` [`Quoting::partial_word`] reads: lowercased, of
/// [`PARTIAL_WORD`] characters or more, each with its length in characters. A trailing `.`,
/// `;`, `!` or `?` ends a sentence, not the word.
fn unquoted_words(message: &str) -> Vec<(String, usize)> {
    words(message)
        .into_iter()
        .map(|(start, end)| {
            let word = inner(message[start..end].trim_end_matches(['.', ';', '!', '?']));
            let word = word.to_lowercase();
            let length = word.chars().count();
            (word, length)
        })
        .filter(|(_, length)| *length >= PARTIAL_WORD)
        .collect()
}

/// `message` with every word masked around stars that gives away a value's ends replaced by
/// [`SECRET`]: at least [`MASK_RUN`] masking characters, the characters before them starting a
/// value or those after them ending it, 3 characters or more of it in all (any letter case).
fn star_masked(message: &str, values: &[&str]) -> String {
    let values: Vec<String> = values
        .iter()
        .filter(|value| value.chars().count() >= ANYWHERE)
        .map(|value| value.to_lowercase())
        .collect();
    let mut out = String::with_capacity(message.len());
    let mut shown_to = 0;
    for (start, end) in words(message) {
        let word = message[start..end].trim_end_matches(['.', ';', '!', '?']);
        let Some(run) = word.find(masks) else {
            continue;
        };
        let stars = word[run..].chars().take_while(|c| masks(*c)).count();
        if stars < MASK_RUN {
            continue;
        }
        let after = run
            + word[run..]
                .chars()
                .take(stars)
                .map(char::len_utf8)
                .sum::<usize>();
        let (prefix, suffix) = (word[..run].to_lowercase(), word[after..].to_lowercase());
        let revealed = values.iter().any(|value| {
            let before = match !prefix.is_empty() && value.starts_with(&prefix) {
                true => prefix.chars().count(),
                false => 0,
            };
            let behind = match !suffix.is_empty() && value.ends_with(&suffix) {
                true => suffix.chars().count(),
                false => 0,
            };
            before + behind >= ALONE
        });
        if revealed {
            out.push_str(&message[shown_to..start]);
            out.push_str(SECRET);
            shown_to = start + word.len();
        }
    }
    out.push_str(&message[shown_to..]);
    out
}

/// The shortest fragment of a value that counts as quoting it: half the value, at least 3 and
/// at most 6 characters.
fn shortest_fragment(value: &str) -> usize {
    (value.chars().count() / 2).clamp(ALONE, 6)
}

/// Characters that end a fragment: whitespace, quotes and the punctuation around a value.
fn ends_fragment(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\'' | '"' | '`' | '=' | ':' | '(' | ')' | '[' | ']' | '{' | '}' | ',' | '<' | '>'
        )
}

/// The fragments of `message` before and after each ellipsis (`...`, `…`), as
/// [`Quoting::elided_part`] compares them with a value's start and end.
fn elisions(message: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for marker in ["...", "…"] {
        for (at, _) in message.match_indices(marker) {
            let before = &message[..at];
            let before = &before[before.rfind(ends_fragment).map_or(0, |i| i + 1)..];
            let after = &message[at + marker.len()..];
            let after = after.trim_start_matches('.');
            let after = &after[..after.find(ends_fragment).unwrap_or(after.len())];
            found.push((before.to_string(), after.to_string()));
        }
    }
    found
}

/// The words of `message` between two ellipses (`...8b7c6d5e4f3...`), without them, of
/// [`PARTIAL_WORD`] characters or more: a middle cut of a value.
fn middles(message: &str) -> Vec<String> {
    words(message)
        .into_iter()
        .filter_map(|(start, end)| {
            let word = message[start..end].trim_end_matches([';', '!', '?']);
            let elided = |end: &str| word.starts_with(end) && word.ends_with(end);
            let middle = inner(word);
            ((elided("...") || elided("…")) && middle.chars().count() >= PARTIAL_WORD)
                .then(|| middle.to_string())
        })
        .collect()
}

/// `word` without the dots and ellipses an echo cut short puts around what it shows.
fn inner(word: &str) -> &str {
    word.trim_matches(['.', '…'])
}

/// The quoted strings of `message` (between `'`, `"` or `` ` ``), without the dots around
/// them, of [`ANYWHERE`] characters or more.
fn quoted(message: &str) -> Vec<String> {
    ['\'', '"', '`']
        .iter()
        .flat_map(|quote| message.split(*quote).skip(1).step_by(2))
        .map(inner)
        .filter(|quoted| quoted.chars().count() >= ANYWHERE)
        .map(str::to_string)
        .collect()
}

/// The string leaves of `value` when it is a JSON object or array.
fn json_leaves(value: &str) -> Option<Vec<String>> {
    fn collect(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s) => out.push(s.clone()),
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| collect(v, out)),
            other => out.push(other.to_string()),
        }
    }
    let document: serde_json::Value = serde_json::from_str(value.trim()).ok()?;
    if !(document.is_object() || document.is_array()) {
        return None;
    }
    let mut leaves = Vec::new();
    collect(&document, &mut leaves);
    Some(leaves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_past_the_bound_withhold_the_message_whole() {
        let values = vec!["x1".repeat(CONCEALED_BYTES / 2), "other-value".into()];
        assert_eq!(conceal("nothing secret here", &values), TOO_MANY_TO_CHECK);
        let values = vec!["x1".repeat(CONCEALED_BYTES / 4)];
        assert_eq!(
            conceal("nothing secret here", &values),
            "nothing secret here"
        );
    }

    /// The third fresh attack's echoes: parts and encodings of a value that got through.
    #[test]
    fn partial_and_encoded_echoes_are_withheld() {
        let key = "sk-live-4f9a8b7c6d5e4f3a2b1c".to_string();
        let values = [key.clone()];
        let part = &key[..27];
        for message in [
            format!("key {} rejected", STANDARD_NO_PAD.encode(part)),
            "key sk%2Dlive%2D4f9a8b7c6 rejected".to_string(),
            "key sk&#x2d;live&#x2d;4f9a8b7c6".to_string(),
            format!(
                "key {} rejected",
                key[..17]
                    .bytes()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            ),
            "key c2stbGl2ZS00ZjlhOGI3YzZkNW%0AU0ZjNhMmIxYw rejected".to_string(),
            "key sk-li ve-4f 9a8b 7c6d 5e4f 3a2b 1c rejected".to_string(),
            "key ...8b7c6d5e4f3... rejected".to_string(),
        ] {
            let shown = conceal(&message, &values);
            assert!(
                shown == WITHHELD || !shown.contains("4f9a") && shown.contains(SECRET),
                "{message} -> {shown}"
            );
        }
        let long = "sk-live-4f9a8b7c6d5e4f3a2b1c-0123456789abcdef-0123456789abcdef-ffff";
        let wrapped = STANDARD.encode(long);
        let message = format!("echo {}\n{}", &wrapped[..76], &wrapped[76..]);
        assert_eq!(
            conceal(&message, &[long.to_string()]),
            WITHHELD,
            "{message}"
        );
        let words = ["correct-horse-battery-staple".to_string()];
        for message in [
            "invalid key '...horse-battery-sta...'",
            "invalid key \"…horse-battery-sta…\"",
        ] {
            assert_eq!(conceal(message, &words), WITHHELD, "{message}");
        }
        // Ordinary messages still read.
        for message in [
            "the horse field is invalid...",
            "rate limited... retry in 30s",
            "config 8f14e45fceea167a5a36dedd4bea2543 not found",
            "key rejected: too short",
        ] {
            assert_eq!(conceal(message, &values), message);
            assert_eq!(conceal(message, &words), message);
        }
    }

    #[test]
    fn a_value_is_found_as_written_escaped_url_encoded_and_in_base64() {
        let value = "p@ss w/rd\"1";
        assert!(holds(&format!("x {value} y"), value));
        assert!(holds(r#"{"k":"p@ss w/rd\"1"}"#, value));
        assert!(holds("https://h/?q=p%40ss%20w%2Frd%221&x", value));
        assert!(holds("q=p%40ss+w%2Frd%221", value));
        assert!(holds(&format!("token {}", STANDARD.encode(value)), value));
        assert!(holds(&URL_SAFE_NO_PAD.encode(value), value));
        // An encoding of a longer text that holds the value: Basic auth, a URL with userinfo.
        let basic = STANDARD.encode(format!("user:{value}"));
        assert!(holds(&format!("Authorization: Basic {basic}"), value));
        assert!(holds("https%3A%2F%2Fu%3Ap%40ss%20w%2Frd%221%40h", value));
        assert!(!holds("nothing here", value));
        assert!(!holds("p@ss", value));
    }

    #[test]
    fn short_values_are_found_standing_alone_or_quoted_only() {
        assert!(holds("pin 123 rejected", "123"));
        assert!(holds("id=123,", "123"));
        assert!(!holds("HTTP 1234", "123"));
        assert!(!holds("a123", "123"));
        assert!(holds("7", "7"));
        assert!(holds("bad value '7'", "7"));
        assert!(holds(r#"{"pin":"ab"}"#, "ab"));
        assert!(!holds("HTTP 1 error at 7 places", "7"));
        assert!(!holds("about", "ab"));
        assert_eq!(
            conceal("pin 123 rejected for 1234", &["123"]),
            "pin <secret> rejected for 1234"
        );
        assert_eq!(
            conceal("value '7' at line 7", &["7"]),
            "value '<secret>' at line 7"
        );
    }

    #[test]
    fn encoded_echoes_are_concealed_or_withheld() {
        let value = "correct-horse-battery-staple".to_string();
        let url = "host https%3A%2F%2Fu%3Acorrect-horse-battery-staple%40h is bad";
        let out = conceal(url, std::slice::from_ref(&value));
        assert!(!out.contains("correct-horse"), "{out}");
        let encoded = STANDARD.encode(&value);
        let out = conceal(
            &format!("bad header {encoded}"),
            std::slice::from_ref(&value),
        );
        assert_eq!(out, "bad header <secret>");
        // An encoding of a longer text: replaced where its base64 lines up with the value's,
        // withheld where it does not.
        let aligned = STANDARD.encode(format!("me:{value}"));
        let out = conceal(
            &format!("Basic {aligned} refused"),
            std::slice::from_ref(&value),
        );
        assert_eq!(out, "Basic bWU6<secret> refused");
        let basic = STANDARD.encode(format!("user:{value}"));
        let out = conceal(
            &format!("Basic {basic} refused"),
            std::slice::from_ref(&value),
        );
        assert_eq!(out, WITHHELD);
    }

    /// Each of `messages` narrows `value` down: withheld whole.
    fn assert_withheld(value: &str, messages: &[&str]) {
        for message in messages {
            let shown = conceal(message, &[value.to_string()]);
            assert_eq!(shown, WITHHELD, "{message}");
        }
    }

    /// None of `messages` narrows `value` down: each reads as it is.
    /// Each of `echoes`, concealed against `value` alone, reads `concealed`.
    fn assert_concealed(value: &str, echoes: &[&str], concealed: &str) {
        for echo in echoes {
            let out = conceal(echo, &[value.to_string()]);
            assert_eq!(out, concealed, "{echo}");
        }
    }

    fn assert_kept(value: &str, messages: &[&str]) {
        for message in messages {
            let shown = conceal(message, &[value.to_string()]);
            assert_eq!(shown, *message, "{message}");
        }
    }

    const PASSPHRASE: &str = "correct-horse-battery-staple";
    const ACCOUNT: &str = r#"{"type": "service_account", "private_key_id": "3f9a0c1b7d"}"#;

    #[test]
    fn partial_quotes_short_and_all_letter_ones_too_withhold_the_message() {
        assert_withheld(
            PASSPHRASE,
            &[
                "{\"message\":\"bad value 'correc...staple'\"}",
                "input_value='correct-horse-battery-s...'",
            ],
        );
        assert_withheld("Tr0ub4dor&3", &["bad value 'Tr0ub4d'"]);
        // Prose that shares words with a value still reads.
        assert_kept(
            PASSPHRASE,
            &["failed to read the config: field is missing..."],
        );
        assert_kept(
            ACCOUNT,
            &[
                "vertex_service_account_json: 'private_key_id' is missing",
                "expected one of type, project_id, private_key_id...",
            ],
        );
    }

    /// A quote of 4 characters of a value, less than half of it, with no digit and no ellipsis,
    /// narrows the value down as well: withheld (attack on issue 27's concealment; before, a
    /// quote had to be half the value).
    #[test]
    fn short_partial_quotes_of_a_value_withhold_the_message() {
        assert_withheld(
            PASSPHRASE,
            &[
                "bad value near 'horse'",
                "unexpected \"batt\" in value",
                "token `staple` rejected",
            ],
        );
        assert_withheld("Tr0ub4dor&3xyz", &["bad value 'ub4d'"]);
        // Three characters are no quote of a value; nor is a quote the value does not hold.
        assert_kept(PASSPHRASE, &["bad value 'hor'", "field 'name' is required"]);
        // A JSON key file: its leaves count, its field names do not.
        assert_withheld(ACCOUNT, &["private_key_id '3f9a' does not match"]);
        assert_kept(ACCOUNT, &["'private_key_id' is missing"]);
    }

    /// Echoes an API may send back transformed: case changed, hex-encoded, with JSON `\u`
    /// escapes for non-ASCII or for every character. Each reached a message before (attack on
    /// issue 27's masking by value).
    #[test]
    fn transformed_echoes_case_hex_and_unicode_escapes_are_concealed() {
        let key = "sk-live-Q7vN2mX9pL4k".to_string();
        let upper = "invalid key SK-LIVE-Q7VN2MX9PL4K for tenant";
        assert_eq!(
            conceal(upper, std::slice::from_ref(&key)),
            "invalid key <secret> for tenant"
        );
        let lower = "invalid key sk-live-q7vn2mx9pl4k";
        assert!(holds(lower, &key));
        assert!(!conceal(lower, std::slice::from_ref(&key)).contains("q7vn2mx9"));
        let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
        let out = conceal(&format!("digest input {hex}"), std::slice::from_ref(&key));
        assert_eq!(out, "digest input <secret>");
        let hex_upper = format!("digest input {}", hex.to_uppercase());
        assert!(!conceal(&hex_upper, std::slice::from_ref(&key)).contains(&hex.to_uppercase()));
        let umlaut = "pässwört-geheim-9".to_string();
        let escaped = r#"{"detail":"bad value p\u00e4ssw\u00f6rt-geheim-9"}"#;
        assert!(holds(escaped, &umlaut), "{escaped}");
        let out = conceal(escaped, std::slice::from_ref(&umlaut));
        assert!(!out.contains("rt-geheim-9"), "{out}");
        let every: String = key
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        let echo = format!("{{\"detail\":\"bad key {every}\"}}");
        assert!(holds(&echo, &key), "{echo}");
        assert_eq!(conceal(&echo, std::slice::from_ref(&key)), WITHHELD);
        // Prose still reads.
        let prose = "Invalid API key for tenant acme";
        assert_eq!(conceal(prose, std::slice::from_ref(&key)), prose);
    }

    /// A value with a `/` echoed by an encoder that escapes it (`a\/b`, as PHP's and some Java
    /// encoders write JSON) reached a message whole (attack on issue 27's concealment).
    #[test]
    fn a_json_slash_escaped_echo_is_concealed() {
        let value = "tok/9Qz/abc".to_string();
        let echo = r#"{"error":"bad token tok\/9Qz\/abc for route"}"#;
        assert!(holds(echo, &value), "{echo}");
        let out = conceal(echo, std::slice::from_ref(&value));
        assert_eq!(out, r#"{"error":"bad token <secret> for route"}"#);
        let host = "https://u:pw@h.example/v1".to_string();
        let echo = r#"custom_host "https:\/\/u:pw@h.example\/v1" is not reachable"#;
        let out = conceal(echo, std::slice::from_ref(&host));
        assert!(!out.contains("pw@h"), "{out}");
    }

    /// An API that answers in HTML, or escapes its messages for HTML, writes a value's `/`, `&`,
    /// `"`, `'`, `<` and `>` as entities (`&#x2F;`, `&#47;`, `&amp;`, `&quot;`, …): such an echo
    /// reached a message whole (attack on issue 27's concealment).
    #[test]
    fn html_entity_echoes_are_concealed() {
        let value = "a/b&c\"d'e<f>-9xK".to_string();
        let echoes = [
            "bad value a&#x2F;b&amp;c&quot;d&#x27;e&lt;f&gt;-9xK here",
            "bad value a&#47;b&amp;c&quot;d&#39;e&lt;f&gt;-9xK here",
            "bad value a&#X2f;b&#38;c&#34;d&apos;e&lt;f&gt;-9xK here",
            "bad value a/b&amp;c&quot;d'e&lt;f&gt;-9xK here",
        ];
        for echo in echoes {
            assert!(holds(echo, &value), "{echo}");
        }
        assert_concealed(&value, &echoes, "bad value <secret> here");
        // Entities in a message that holds no value stay as they are.
        let plain = "field &quot;name&quot; is required";
        assert_eq!(conceal(plain, std::slice::from_ref(&value)), plain);
    }

    /// An API that masks what it echoes keeps a prefix and a suffix of the value around stars
    /// (`sk-abc12X**************xyz9`): both are parts of the value, and reached a message
    /// (attack on issue 27's concealment).
    #[test]
    fn a_star_masked_echo_of_a_value_is_concealed() {
        let key = "sk-abc12X7Qp4LmZr8Tw2xyz9".to_string();
        assert_concealed(
            &key,
            &[
                "invalid api key sk-abc12X**************xyz9 for workspace",
                "invalid api key sk-a****************xyz9 for workspace",
                "invalid api key ********************xyz9 for workspace",
                "invalid api key sk-abc12X•••••••• for workspace",
            ],
            "invalid api key <secret> for workspace",
        );
        // Stars with nothing of the value around them, or around text that is not the value's
        // start or end, stay.
        assert_kept(
            &key,
            &[
                "invalid api key ************ for workspace",
                "invalid api key pk-zz***********qqqq for workspace",
                "use ** for bold",
            ],
        );
    }

    /// An unquoted part of a value in a message: all letters (a passphrase cut short), or
    /// shorter than 12 characters (part of a short password). Neither was withheld (attack on
    /// issue 27's concealment); ordinary words a message shares with a value still read.
    #[test]
    fn unquoted_partial_runs_of_a_value_withhold_the_message() {
        assert_withheld(
            PASSPHRASE,
            &[
                "value too long: correct-horse-batt",
                "unknown token horse-battery in header",
                "expected hex, got CORRECT-HORSE-BATTERY",
            ],
        );
        assert_withheld(
            "Tr0ub4dor&3",
            &["bad value Tr0ub4d near", "bad value ub4dor&3 near"],
        );
        // Words of a message that a value also holds: too short, or not a whole word of the
        // message.
        assert_kept(
            PASSPHRASE,
            &[
                "the horse field is unknown",
                "correct the staple value and retry",
                "request to https://api.example failed",
                "custom_host must start with https://",
            ],
        );
        let host = "https://proxy.victim.example/v1?api-key=SECRETQ-9f3a7c";
        assert_kept(
            host,
            &[
                "custom_host must start with https://",
                "invalid api-key parameter",
                "path /v1 not found",
            ],
        );
        assert_withheld(host, &["cannot reach proxy.victim.example"]);
    }
}
