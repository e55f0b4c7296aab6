package props

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
)

// refPool is every ref name the properties use. None is hex, so a ref name
// never shadows an id prefix in Resolve.
var refPool = []string{"main", "dev", "release/agent-1", "release/agent-2"}

// missID is an id no test ever creates (it is not the id of any encoding
// the properties write).
var missID = objects.IDOf(objects.KindChangeset, []byte("props: an id nobody commits"))

// checkAgainstModel compares everything a reader can see through s with the
// model: refs and reflogs, every changeset with its parents, generation,
// metadata and whole tree, id and prefix resolution, delta lookups, misses,
// first-parent walks and the counts in Info. It returns the first
// difference, described got/want.
func checkAgainstModel(s *core.Store, m *storeModel) error {
	sn, err := s.Snapshot()
	if err != nil {
		return fmt.Errorf("Snapshot: %w", err)
	}
	if err := checkRefs(sn, m); err != nil {
		return err
	}
	if err := checkChangesets(sn, m); err != nil {
		return err
	}
	if err := checkMisses(sn, m); err != nil {
		return err
	}
	// First-parent walks from every ref and from the newest changeset.
	starts := m.refNames()
	for _, name := range starts {
		if err := checkLog(sn, m, m.refs[name]); err != nil {
			return fmt.Errorf("ref %q: %w", name, err)
		}
	}
	if n := len(m.order); n > 0 {
		if err := checkLog(sn, m, m.order[n-1]); err != nil {
			return err
		}
	}
	info, err := s.Info()
	if err != nil {
		return fmt.Errorf("Info: %w", err)
	}
	if info.Changesets != int64(len(m.order)) || info.Refs != len(m.refs) {
		return fmt.Errorf("Info counts %d changesets, %d refs; want %d, %d", info.Changesets, info.Refs, len(m.order), len(m.refs))
	}
	return nil
}

// checkRefs compares the ref list, each ref of the pool, and each reflog
// with the model.
func checkRefs(sn *core.Snapshot, m *storeModel) error {
	got, err := sn.Refs()
	if err != nil {
		return fmt.Errorf("Refs: %w", err)
	}
	gotRefs := map[string]core.ID{}
	for _, r := range got {
		if _, dup := gotRefs[r.Name]; dup {
			return fmt.Errorf("Refs lists %q twice", r.Name)
		}
		gotRefs[r.Name] = r.ID
	}
	if err := sameRefs(gotRefs, m.refs); err != nil {
		return fmt.Errorf("Refs: %w", err)
	}
	for _, name := range refPool {
		id, err := sn.Ref(name)
		want, ok := m.refs[name]
		switch {
		case ok && (err != nil || id != want):
			return fmt.Errorf("Ref(%q) = %s, %v; want %s", name, short(id), err, short(want))
		case !ok && !errors.Is(err, core.ErrNotFound):
			return fmt.Errorf("Ref(%q) = %s, %v; want ErrNotFound", name, short(id), err)
		}
		log, err := sn.RefLog(name)
		wantLog := m.reflog[name]
		if err != nil && !(len(wantLog) == 0 && errors.Is(err, core.ErrNotFound)) {
			return fmt.Errorf("RefLog(%q): %w", name, err)
		}
		if len(log) != len(wantLog) {
			return fmt.Errorf("RefLog(%q) has %d moves; want %d (%s)", name, len(log), len(wantLog), describeLog(wantLog))
		}
		for i, e := range log {
			if e.Old != wantLog[i].old || e.New != wantLog[i].new {
				return fmt.Errorf("RefLog(%q)[%d] = %s→%s; want %s→%s", name, i, short(e.Old), short(e.New), short(wantLog[i].old), short(wantLog[i].new))
			}
			if i > 0 && e.Seq <= log[i-1].Seq {
				return fmt.Errorf("RefLog(%q)[%d] sequence %d not after %d", name, i, e.Seq, log[i-1].Seq)
			}
		}
	}
	return nil
}

// checkChangesets compares every changeset (parents, generation, metadata,
// tree and blobs), its resolution by full id and by prefix, and the delta
// hash index with the model.
func checkChangesets(sn *core.Snapshot, m *storeModel) error {
	deltas := map[objects.Hash][]core.ID{}
	byKey := map[string]objects.Hash{}
	for _, id := range m.order {
		want := m.changesets[id]
		cs, err := sn.Changeset(id)
		if err != nil {
			return fmt.Errorf("Changeset(%s): %w", short(id), err)
		}
		if !slices.Equal(cs.Parents, want.parents) {
			return fmt.Errorf("Changeset(%s).Parents = %s; want %s", short(id), shorts(cs.Parents), shorts(want.parents))
		}
		if cs.Generation != want.gen {
			return fmt.Errorf("Changeset(%s).Generation = %d; want %d", short(id), cs.Generation, want.gen)
		}
		if cs.Agent != want.agent || cs.Message != want.message || !cs.Time.Equal(want.time) {
			return fmt.Errorf("Changeset(%s) metadata = %q %q %v; want %q %q %v", short(id), cs.Agent, cs.Message, cs.Time, want.agent, want.message, want.time)
		}
		if err := checkTree(sn, id, want.files); err != nil {
			return err
		}
		deltas[cs.Delta] = append(deltas[cs.Delta], id)
		if h, ok := byKey[want.changeKey]; ok && h != cs.Delta {
			return fmt.Errorf("Changeset(%s) makes the same change as another changeset but has delta %s, not %s", short(id), cs.Delta.String()[:12], h.String()[:12])
		}
		byKey[want.changeKey] = cs.Delta

		// Resolution by full id and by a prefix whose length depends on
		// the id, so every length from 4 to 11 is exercised.
		if r, err := sn.Resolve(id.String()); err != nil || r != id {
			return fmt.Errorf("Resolve(full %s) = %s, %v", short(id), short(r), err)
		}
		prefix := id.String()[:4+int(id[31]%8)]
		if err := checkPrefix(sn, m, prefix); err != nil {
			return err
		}
	}
	if len(byKey) != len(deltas) {
		return fmt.Errorf("%d distinct changes have %d distinct delta hashes", len(byKey), len(deltas))
	}
	for h, ids := range deltas {
		got, err := sn.ByDelta(h)
		if err != nil {
			return fmt.Errorf("ByDelta(%s): %w", h.String()[:12], err)
		}
		if !sameIDSet(got, ids) {
			return fmt.Errorf("ByDelta(%s) = %s; want %s", h.String()[:12], shorts(got), shorts(ids))
		}
	}
	return nil
}

// checkMisses checks that an id, a delta hash and a prefix nobody made are
// not found.
func checkMisses(sn *core.Snapshot, m *storeModel) error {
	if _, err := sn.Changeset(missID); !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("Changeset(missing id): %v; want ErrNotFound", err)
	}
	if got, err := sn.ByDelta(objects.Hash(missID)); err != nil && !errors.Is(err, core.ErrNotFound) || len(got) != 0 {
		return fmt.Errorf("ByDelta(missing hash) = %s, %v; want nothing", shorts(got), err)
	}
	missPrefix := missID.String()[:6]
	if len(m.withPrefix(missPrefix)) == 0 {
		if r, err := sn.Resolve(missPrefix); !errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("Resolve(missing prefix %s) = %s, %v; want ErrNotFound", missPrefix, short(r), err)
		}
	}
	return nil
}

// checkTree compares the flattened tree of changeset id, and every blob in
// it, with the model's files.
func checkTree(sn *core.Snapshot, id core.ID, want map[string]file) error {
	flat, err := sn.Flatten(id)
	if err != nil {
		return fmt.Errorf("Flatten(%s): %w", short(id), err)
	}
	if len(flat) != len(want) {
		return fmt.Errorf("Flatten(%s) has paths %s; want %s", short(id), pathList(flat), pathListFiles(want))
	}
	for p, f := range want {
		e, ok := flat[p]
		if !ok {
			return fmt.Errorf("Flatten(%s) lacks %q; has %s", short(id), p, pathList(flat))
		}
		if e.Mode != f.mode || e.ID != objects.BlobID(f.data) {
			return fmt.Errorf("Flatten(%s)[%q] = mode %o id %s; want mode %o id %s", short(id), p, e.Mode, short(e.ID), f.mode, short(objects.BlobID(f.data)))
		}
		data, err := sn.Blob(e.ID)
		if err != nil {
			return fmt.Errorf("Blob(%s) of %s:%q: %w", short(e.ID), short(id), p, err)
		}
		if !bytes.Equal(data, f.data) {
			return fmt.Errorf("Blob(%s) of %s:%q = %d bytes %x; want %d bytes %x", short(e.ID), short(id), p, len(data), head(data), len(f.data), head(f.data))
		}
	}
	return nil
}

// checkPrefix resolves prefix and compares with the model's changesets that
// carry it: one is an answer, several are an ambiguity listing them all.
func checkPrefix(sn *core.Snapshot, m *storeModel, prefix string) error {
	cands := m.withPrefix(prefix)
	r, err := sn.Resolve(prefix)
	switch len(cands) {
	case 0:
		if !errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("Resolve(%s) = %s, %v; want ErrNotFound", prefix, short(r), err)
		}
	case 1:
		if err != nil || r != cands[0] {
			return fmt.Errorf("Resolve(%s) = %s, %v; want %s", prefix, short(r), err, short(cands[0]))
		}
	default:
		var ae *core.AmbiguousError
		if !errors.As(err, &ae) || !errors.Is(err, core.ErrAmbiguous) {
			return fmt.Errorf("Resolve(%s) = %s, %v; want *AmbiguousError listing %s", prefix, short(r), err, shorts(cands))
		}
		if !sameIDSet(ae.Candidates, cands) {
			return fmt.Errorf("Resolve(%s) candidates %s; want %s", prefix, shorts(ae.Candidates), shorts(cands))
		}
	}
	return nil
}

// checkLog compares the store's first-parent walk from id with the model's,
// both whole and cut short.
func checkLog(sn *core.Snapshot, m *storeModel, from core.ID) error {
	want := m.firstParentLog(from, len(m.order)+1)
	for _, n := range []int{len(want) + 1, 1 + len(want)/2} {
		got, err := sn.Log(from, n)
		if err != nil {
			return fmt.Errorf("Log(%s, %d): %w", short(from), n, err)
		}
		w := want
		if len(w) > n {
			w = w[:n]
		}
		if !slices.Equal(got, w) {
			return fmt.Errorf("Log(%s, %d) = %s; want %s", short(from), n, shorts(got), shorts(w))
		}
	}
	return nil
}

// dumpStore renders everything a reader can see through s for the ids the
// caller names, as text, so that two stores opened from the same bytes can be
// compared whole.
func dumpStore(s *core.Store, ids []core.ID) (string, error) {
	var b strings.Builder
	sn, err := s.Snapshot()
	if err != nil {
		return "", fmt.Errorf("Snapshot: %w", err)
	}
	refs, err := sn.Refs()
	if err != nil {
		return "", fmt.Errorf("Refs: %w", err)
	}
	for _, r := range refs {
		fmt.Fprintf(&b, "ref %s %s\n", r.Name, r.ID)
		log, err := sn.RefLog(r.Name)
		if err != nil {
			return "", fmt.Errorf("RefLog(%q): %w", r.Name, err)
		}
		for _, e := range log {
			fmt.Fprintf(&b, "  move %d %s %s %s\n", e.Seq, e.Old, e.New, e.Time.UTC().Format("2006-01-02T15:04:05.999999999"))
		}
	}
	for _, id := range ids {
		cs, err := sn.Changeset(id)
		if err != nil {
			fmt.Fprintf(&b, "cs %s: %v\n", id, err)
			continue
		}
		fmt.Fprintf(&b, "cs %s %v root %s delta %s gen %d\n", id, shorts(cs.Parents), cs.Root, cs.Delta, cs.Generation)
	}
	info, err := s.Info()
	if err != nil {
		return "", fmt.Errorf("Info: %w", err)
	}
	fmt.Fprintf(&b, "info %+v\n", *info)
	return b.String(), nil
}

func sameRefs(got, want map[string]core.ID) error {
	for n, id := range want {
		if got[n] != id {
			return fmt.Errorf("%q = %s; want %s", n, short(got[n]), short(id))
		}
	}
	for n, id := range got {
		if _, ok := want[n]; !ok {
			return fmt.Errorf("unexpected ref %q = %s", n, short(id))
		}
	}
	return nil
}

// sameIDSet reports whether a and b hold the same ids, in any order.
func sameIDSet(a, b []core.ID) bool {
	byBytes := func(x, y core.ID) int { return bytes.Compare(x[:], y[:]) }
	return slices.Equal(slices.SortedFunc(slices.Values(a), byBytes), slices.SortedFunc(slices.Values(b), byBytes))
}

func shorts(ids []core.ID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = short(id)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func describeLog(l []refMove) string {
	s := make([]string, len(l))
	for i, mv := range l {
		s[i] = short(mv.old) + "→" + short(mv.new)
	}
	return strings.Join(s, ", ")
}

func pathList(flat map[string]objects.Entry) string {
	var ps []string
	for p := range flat {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return fmt.Sprint(ps)
}

func pathListFiles(files map[string]file) string {
	var ps []string
	for p := range files {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return fmt.Sprint(ps)
}

func head(b []byte) []byte {
	if len(b) > 16 {
		return b[:16]
	}
	return b
}
