//! A line diff with a few lines of context, for showing how a config document changes. Myers'
//! algorithm (the `similar` crate): memory linear in the documents' size, time bounded by a
//! deadline (past it the diff is coarser, never wrong). Documents past `MAX_LINES` are only
//! said to have changed.

use std::time::{Duration, Instant};

use similar::{Algorithm, DiffTag, capture_diff_slices_deadline, group_diff_ops};

/// Lines of unchanged context kept around each change.
const CONTEXT: usize = 3;

/// The most lines (both sides together) diffed line by line; a CRD object holds at most 1.5
/// MiB, about 100 000 lines of pretty JSON.
const MAX_LINES: usize = 200_000;

/// How long the diff may search for the shortest edit before it settles for a longer one.
const DEADLINE: Duration = Duration::from_secs(5);

/// Unified-style lines: `  same`, `- removed`, `+ added`, and `  …` where unchanged lines were
/// left out. Empty when the texts are equal; one line saying so for texts too large to diff.
pub fn diff(old: &str, new: &str) -> Vec<String> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a == b {
        return Vec::new();
    }
    if a.len() + b.len() > MAX_LINES {
        return vec![format!(
            "  … document changed ({} lines → {} lines; too large to show line by line)",
            a.len(),
            b.len()
        )];
    }
    let deadline = Instant::now() + DEADLINE;
    let ops = capture_diff_slices_deadline(Algorithm::Myers, &a, &b, Some(deadline));
    let mut out = Vec::new();
    let mut shown_to = 0;
    for group in group_diff_ops(ops, CONTEXT) {
        let Some(first) = group.first() else {
            continue;
        };
        if first.old_range().start > shown_to || (shown_to == 0 && first.old_range().start > 0) {
            out.push("  …".to_string());
        }
        for op in &group {
            let (tag, old_range, new_range) = op.as_tag_tuple();
            match tag {
                DiffTag::Equal => out.extend(a[old_range.clone()].iter().map(|l| format!("  {l}"))),
                DiffTag::Delete => {
                    out.extend(a[old_range.clone()].iter().map(|l| format!("- {l}")))
                }
                DiffTag::Insert => out.extend(b[new_range].iter().map(|l| format!("+ {l}"))),
                DiffTag::Replace => {
                    out.extend(a[old_range.clone()].iter().map(|l| format!("- {l}")));
                    out.extend(b[new_range].iter().map(|l| format!("+ {l}")));
                }
            }
            shown_to = old_range.end;
        }
    }
    if shown_to < a.len() {
        out.push("  …".to_string());
    }
    out
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
        assert_eq!(diff("a\n", "a\nb\n"), ["  a", "+ b"]);
        let far = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";
        let changed = "x\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ny\n";
        assert_eq!(
            diff(far, changed),
            [
                "- 1", "+ x", "  2", "  3", "  4", "  …", "  9", "  10", "  11", "- 12", "+ y"
            ]
        );
    }

    /// A one-line change to a 20 000-line document (100 targets of 200 parameters, within the
    /// CRD's bounds) is diffed line by line in linear memory: the quadratic table it replaced
    /// needed 1.6 GB here. `peak` counts what the diff allocates at most at once.
    #[test]
    fn a_large_document_is_diffed_in_linear_memory() {
        let old: String = (0..20_000)
            .map(|n| format!("    \"p{n}\": {n},\n"))
            .collect();
        let new = old.replace("\"p12345\": 12345,", "\"p12345\": 54321,");
        let (lines, peak) = peak::measure(|| diff(&old, &new));
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with('-') || l.starts_with('+'))
                .count(),
            2,
            "{lines:?}"
        );
        assert!(lines.contains(&"+     \"p12345\": 54321,".to_string()));
        assert!(
            peak < 64 << 20,
            "the diff of two 20 000-line documents peaked at {} MiB",
            peak >> 20
        );
        let huge: String = "x\n".repeat(MAX_LINES);
        assert_eq!(diff(&huge, "y\n").len(), 1);
    }
}

/// A counting allocator for the memory test: the peak of bytes allocated at once on this
/// thread while a closure runs.
#[cfg(test)]
pub(crate) mod peak {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static COUNTING: Cell<bool> = const { Cell::new(false) };
        static NOW: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    /// The result of `f` and the most bytes it held allocated at once.
    pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
        NOW.with(|n| n.set(0));
        PEAK.with(|p| p.set(0));
        COUNTING.with(|c| c.set(true));
        let out = f();
        COUNTING.with(|c| c.set(false));
        (out, PEAK.with(Cell::get).max(0) as usize)
    }

    fn count(delta: isize) {
        let _ = COUNTING.try_with(|c| {
            if c.get() {
                let now = NOW.with(|n| {
                    n.set(n.get() + delta);
                    n.get()
                });
                PEAK.with(|p| p.set(p.get().max(now)));
            }
        });
    }

    pub struct Counting;

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count(layout.size() as isize);
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            count(-(layout.size() as isize));
            unsafe { System.dealloc(ptr, layout) }
        }
    }
}
