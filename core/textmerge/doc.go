// Package textmerge is the line-level text machinery of SwarmOps: a
// three-way merge with git merge-file's semantics and diff3-style conflict
// markers, unified diffs in git diff's format, and git's test for binary
// content. It works on byte slices only and imports nothing else from the
// store, so land, update, diff and show can all share it.
//
// # Lines
//
// A text is cut after every "\n"; each line keeps its terminator, so the
// lines joined give the text back byte for byte. Only the last line may
// lack a "\n", and then it differs from the same line with one: removing
// or adding the final newline is a change of the last line, as in git. A
// "\r" before the "\n" is part of the line, so a CRLF text diffs and
// merges as git sees it without eol conversion.
//
// IsBinary is git's rule: a NUL byte in the first 8000 bytes. Binary
// content never merges or diffs by lines. Merge then decides per file
// (clean when at most one side changed, or both sides made the same change;
// otherwise a conflict with no merged bytes), and Unified reports only that
// the versions differ.
//
// # The two-way diff
//
// A merge is built on two diffs, base to ours and base to theirs, so the
// diff decides where each side's changes sit. It is framed the way xdiff,
// git's diff engine, frames it, in four steps:
//
//  1. Equal lines get one class number; from here on lines are compared by
//     class.
//  2. The common prefix and suffix are trimmed. In what is left, lines that
//     do not occur in the other text are set aside as changed, and so are
//     lines that occur in it very often (about sqrt(n) times) when they sit
//     in a stretch that is mostly such unmatched lines: a "}" or a blank
//     line inside a rewritten block is not worth keeping as a match.
//  3. The remaining lines are coded one rune per class and handed to
//     sergi/go-diff (diffmatchpatch), whose Myers search returns a shortest
//     edit script. It runs without a deadline: with one, it may cut the
//     search short or take a non-minimal shortcut, and a merge must not
//     depend on the clock. Its answer is checked as it is read back (kept
//     runs must pair equal lines and cover both texts); a bad answer, or
//     more distinct shared lines than there are runes (about 1.1 million),
//     makes the whole middle one change, a coarse but correct diff.
//  4. Compaction makes the script canonical. A group of changed lines can
//     often slide (deleting the first or the second of two equal lines is
//     the same edit); each group slides as far up, then as far down as it
//     can, merging with groups it touches, and then sits level with a
//     changed group of the other text if it can, else at its lowest place.
//
// # The merge
//
// The merge walks the two scripts in base order, with the rules of xdiff's
// "eager" level, the one git uses for diff3-style output:
//
//   - A change of one side that ends strictly before the other side's next
//     change begins is taken as it is.
//   - Changes of the two sides that overlap, or touch (one ends on the base
//     line where the other begins, an insertion at that point included),
//     conflict, unless both replaced the same base lines with the same
//     lines: an identical change is taken once. So edits of two adjacent
//     lines conflict, while edits with one unchanged line between them
//     merge.
//   - A region that touches the previous one in ours or in theirs is fused
//     with it, and a fusion of different kinds is a conflict.
//
// The result is ours with those regions applied. When one side made no
// change at all, the result is the other side, byte for byte.
//
// # Conflict markers
//
// Each conflict is written in diff3 style, as `git merge-file --diff3 -L
// OURS -L BASE -L THEIRS` writes it:
//
//	<<<<<<< OURS
//	lines of ours
//	||||||| BASE
//	lines of base
//	=======
//	lines of theirs
//	>>>>>>> THEIRS
//
// The labels come from MergeOptions; an empty label gives a bare marker,
// and a label with a line break is ErrBadOption. A side whose last line in
// the block has no "\n" gets one, so that each marker starts a line. The
// markers end in "\r\n" when the text is CRLF around the conflict (base's
// first line ends in "\r\n", and so do, where they have them, the lines of
// ours and theirs just before the block), else in "\n", as git decides it.
// Result.Conflicts describes each block for
// JSON: its line span in the merged text, and the span and lines of base,
// ours and theirs there.
//
// # Unified diffs
//
// Unified groups the script into hunks with the given context (git's
// default is DefaultContext); changes no more than twice the context apart
// share a hunk. Headers are git's ("@@ -start,count +start,count @@", a
// count of 1 left out, an empty range starting at the line before it), and
// so are the headings after them: the nearest line above the hunk, in the
// old text, that starts with a letter, "_" or "$", cut to 80 bytes. A last
// line without newline is followed by "\ No newline at end of file".
// FileDiff.Format writes the "---" and "+++" lines and the hunks; the
// "diff --git" line and anything about modes belong to the caller.
//
// # Differences from git
//
// These are deliberate. The property tests compare with git and excuse
// only the first, counting and logging each excused case.
//
//   - The search is the library's Myers, not xdiff's. Both find a shortest
//     edit script of the cleaned-up lines, but where several exist that
//     are not slides of one another (base "a b" to "b a" keeps either
//     line), they may pick different ones, and a merge that depends on the
//     choice can then differ: one may conflict where the other merges. The
//     tests check that such a diff costs exactly what git's does. This is
//     rare on real text; on the random few-line texts of the property tests
//     about one merge in a hundred differs for it.
//   - xdiff gives up on a minimal diff when one would cost too much (large,
//     heavily edited files), and returns a longer one; this package always
//     searches to the end. The hunks can then differ from git's, and the
//     worst-case time is that of Myers, proportional to the text length
//     times the number of changed lines.
//   - Past about 1.1 million distinct lines shared by both texts, the diff
//     is one change over the middle (see above), where git would still
//     align lines. A merge of such texts conflicts if both sides changed
//     the middle.
//   - Unified applies no indent heuristic: its hunks are those of git diff
//     --no-indent-heuristic (git diff uses the heuristic by default; git
//     merge-file does not, so merges are unaffected). Headings use git's
//     default rule only, never a gitattributes diff driver.
//   - git merge-file refuses binary files; Merge resolves them per file.
//   - Only the diff3 style at git's default marker size is written; git's
//     marker-size, zdiff3 and ours/theirs/union options are not offered.
package textmerge
