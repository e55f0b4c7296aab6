package props

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
)

// file is one path of a model tree.
type file struct {
	data []byte
	mode objects.Mode
}

// csModel is what the model knows about one acknowledged changeset: what the
// caller asked for, and the whole tree that request implies.
type csModel struct {
	id      core.ID
	parents []core.ID
	files   map[string]file // path -> content
	gen     uint64
	agent   string
	message string
	time    time.Time
	// changeKey is the canonical text of the net path changes against the
	// first parent; two changesets with the same key make the same change and
	// must share a delta hash.
	changeKey string
}

// refMove is one reflog entry of the model.
type refMove struct{ old, new core.ID }

// storeModel is the list of acknowledged transactions, projected: the
// changesets (with their parents and trees) and the refs with their moves.
// It is a plain value; nothing in it talks to the store.
type storeModel struct {
	changesets map[core.ID]*csModel
	order      []core.ID // acknowledgement order
	refs       map[string]core.ID
	reflog     map[string][]refMove
}

func newStoreModel() *storeModel {
	return &storeModel{
		changesets: map[core.ID]*csModel{},
		refs:       map[string]core.ID{},
		reflog:     map[string][]refMove{},
	}
}

// tree returns the files of id, or an empty tree for the zero id.
func (m *storeModel) tree(id core.ID) map[string]file {
	if id.IsZero() {
		return map[string]file{}
	}
	return m.changesets[id].files
}

// apply returns parent's tree with the changes applied, and the canonical key
// of the net change against the parent.
func applyChanges(parent map[string]file, changes []core.Change) (map[string]file, string) {
	out := make(map[string]file, len(parent)+len(changes))
	for p, f := range parent {
		out[p] = f
	}
	for _, c := range changes {
		if c.Delete {
			delete(out, c.Path)
			continue
		}
		mode := c.Mode
		if mode == 0 {
			mode = objects.ModeFile
		}
		out[c.Path] = file{data: append([]byte(nil), c.Data...), mode: mode}
	}
	return out, changeKey(parent, out)
}

// changeKey is the sorted list of paths whose entry differs between a and b,
// with the new content, as text.
func changeKey(a, b map[string]file) string {
	paths := map[string]bool{}
	for p := range a {
		paths[p] = true
	}
	for p := range b {
		paths[p] = true
	}
	var keys []string
	for p := range paths {
		fa, ina := a[p]
		fb, inb := b[p]
		switch {
		case ina && !inb:
			keys = append(keys, fmt.Sprintf("D %q", p))
		case !ina && inb:
			keys = append(keys, fmt.Sprintf("A %q %o %x", p, fb.mode, objects.BlobID(fb.data)))
		case ina && inb && (fa.mode != fb.mode || !bytes.Equal(fa.data, fb.data)):
			keys = append(keys, fmt.Sprintf("M %q %o %x", p, fb.mode, objects.BlobID(fb.data)))
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, "\n")
}

// generation is 1 + the largest generation among parents.
func (m *storeModel) generation(parents []core.ID) uint64 {
	var g uint64
	for _, p := range parents {
		if pg := m.changesets[p].gen; pg > g {
			g = pg
		}
	}
	return g + 1
}

// firstParentLog is the model's log: from, its first parent, and so on, at
// most n ids.
func (m *storeModel) firstParentLog(from core.ID, n int) []core.ID {
	var out []core.ID
	for id := from; !id.IsZero() && len(out) < n; {
		out = append(out, id)
		cs := m.changesets[id]
		if len(cs.parents) == 0 {
			break
		}
		id = cs.parents[0]
	}
	return out
}

// moveRef records an acknowledged move of name from old to new (zero new:
// delete).
func (m *storeModel) moveRef(name string, old, new core.ID) {
	if new.IsZero() {
		delete(m.refs, name)
	} else {
		m.refs[name] = new
	}
	m.reflog[name] = append(m.reflog[name], refMove{old, new})
}

// sortedIDs returns the model's changeset ids in acknowledgement order.
func (m *storeModel) ids() []core.ID { return m.order }

// refNames lists the model's refs in order.
func (m *storeModel) refNames() []string {
	return slices.Sorted(maps.Keys(m.refs))
}

// withPrefix lists the model's changesets whose hex id starts with prefix.
func (m *storeModel) withPrefix(prefix string) []core.ID {
	var out []core.ID
	for _, id := range m.order {
		if strings.HasPrefix(id.String(), prefix) {
			out = append(out, id)
		}
	}
	return out
}

// isConflict reports whether err is a ref conflict naming ref with the
// current value cur.
func isConflict(err error, ref string, cur core.ID) error {
	var ce *core.ConflictError
	if !errors.As(err, &ce) {
		return fmt.Errorf("got %v, want a *core.ConflictError for %q (current %s)", err, ref, short(cur))
	}
	if !errors.Is(err, core.ErrConflict) {
		return fmt.Errorf("conflict error %v does not satisfy errors.Is(err, core.ErrConflict)", err)
	}
	if ce.Ref != ref || ce.Current != cur {
		return fmt.Errorf("conflict names ref %q current %s; want ref %q current %s", ce.Ref, short(ce.Current), ref, short(cur))
	}
	return nil
}

func short(id core.ID) string {
	if id.IsZero() {
		return "(absent)"
	}
	return id.String()[:12]
}
