//! A line diff (longest common subsequence) with a few lines of context, for showing how a
//! config document changes. Documents are small; the quadratic table is fine.

/// Lines of unchanged context kept around each change.
const CONTEXT: usize = 3;

/// Unified-style lines: `  same`, `- removed`, `+ added`, and `  …` where unchanged lines were
/// left out. Empty when the texts are equal.
pub fn diff(old: &str, new: &str) -> Vec<String> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = operations(&a, &b);
    if ops.iter().all(|(tag, _)| *tag == ' ') {
        return Vec::new();
    }
    let near_change = |i: usize| {
        let lo = i.saturating_sub(CONTEXT);
        let hi = (i + CONTEXT).min(ops.len() - 1);
        ops[lo..=hi].iter().any(|(tag, _)| *tag != ' ')
    };
    let mut out = Vec::new();
    let mut skipped = false;
    for (i, (tag, line)) in ops.iter().enumerate() {
        if *tag == ' ' && !near_change(i) {
            if !skipped {
                out.push("  …".to_string());
                skipped = true;
            }
            continue;
        }
        skipped = false;
        out.push(format!("{tag} {line}"));
    }
    out
}

fn operations<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<(char, &'a str)> {
    // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut ops = Vec::with_capacity(a.len() + b.len());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changed_lines_and_their_context_are_shown() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\ni\n";
        let expected = [
            "  …", "  b", "  c", "  d", "- e", "+ E", "  f", "  g", "  h", "  …",
        ];
        assert_eq!(diff(old, new), expected);
        assert!(diff(old, old).is_empty());
    }
}
