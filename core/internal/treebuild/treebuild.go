// Package treebuild builds the objects of one commit, outside every lock:
// it reads the parents and the trees on the way to each changed path, edits
// them, and encodes and hashes every new tree, blob and the changeset,
// leaving out the objects the store already holds. The frame that carries
// them is appended later, under the writer lock, which then only checks
// and appends.
package treebuild

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/swarmops/swarmops/core/internal/errs"
	"github.com/swarmops/swarmops/core/internal/txn"
	"github.com/swarmops/swarmops/core/objects"
)

// Source is what a Builder reads of the store: the writer's view, every
// frame appended so far.
type Source interface {
	// Has reports whether the store holds the object id of kind k. Nearly
	// every object a commit adds is new, so this is a check for an id
	// expected absent.
	Has(id objects.ID, k objects.Kind) bool
	// Read returns the encoding of object id of kind k, checked against
	// its id, catching up on other processes' frames if it is not there
	// yet.
	Read(id objects.ID, k objects.Kind) ([]byte, error)
}

// Change is one path change of a commit. Package core exports it as
// core.Change, whose documentation is the callers' contract.
type Change struct {
	Path   string
	Delete bool
	Data   []byte
	Mode   objects.Mode // 0: objects.ModeFile
	// Open returns the content when Data is nil: it is called once per
	// build, when the change is applied, so the bytes are held only until
	// their chunk is written (Stream).
	Open func() ([]byte, error)
}

// Flush writes blobs ahead of a commit's frame: objs as the frame
// objects they are (loose ones without Data), lo the loose ones with
// their Data. It returns once they are durable.
type Flush func(objs, lo []txn.Obj) error

// Builder collects the objects of one commit.
type Builder struct {
	src    Source
	inline int // blobs larger than this are loose objects
	objs   []txn.Obj
	seen   map[objects.ID]bool
	loose  []txn.Obj // with Data, for loose.Write
	// chunk bounds the blob bytes held (objs' and loose's Data) before
	// flush writes them (0: never); held counts them.
	chunk   int64
	held    int64
	flush   Flush
	flushed int // chunks flushed
	// changed is how many paths the last Build changed in its first
	// parent's tree.
	changed int
}

// Changed returns how many paths the last Build changed in its first
// parent's tree: 0 for changes that leave it as it is.
func (b *Builder) Changed() int { return b.changed }

// New returns a builder reading from src; blobs larger than
// inlineThreshold become loose objects.
func New(src Source, inlineThreshold int) *Builder {
	return &Builder{src: src, inline: inlineThreshold, seen: map[objects.ID]bool{}}
}

// Stream makes the builder hand its blobs to flush whenever the bytes it
// holds reach chunk (0: never), so that a commit of any size holds about
// chunk bytes of content at once. The commit's own frame then carries
// only the blobs of the last chunk, its trees and its changeset; the
// blobs flushed before are in earlier frames, durable before it is
// appended. A build that fails after a flush leaves those blobs in the
// store, named by no changeset, as a crash between the frames would.
func (b *Builder) Stream(chunk int64, flush Flush) { b.chunk, b.flush = chunk, flush }

// Flushed returns how many chunks the build flushed ahead of its frame.
func (b *Builder) Flushed() int { return b.flushed }

// spill flushes the blobs held once they reach the chunk. During apply
// the objects collected are all blobs: trees and the changeset are added
// after every change is applied.
func (b *Builder) spill() error {
	if b.chunk <= 0 || b.held < b.chunk || len(b.objs) == 0 {
		return nil
	}
	if err := b.flush(b.objs, b.loose); err != nil {
		return err
	}
	b.objs, b.loose, b.held = nil, nil, 0
	b.flushed++
	return nil
}

// Objects returns the objects the commit's frame carries, the changeset
// last (once Build has returned).
func (b *Builder) Objects() []txn.Obj { return b.objs }

// Loose returns the blobs that must become loose objects, durable before
// the frame.
func (b *Builder) Loose() []txn.Obj { return b.loose }

// Build makes the changeset whose tree is parents[0]'s tree (an empty tree
// if none) with changes applied, and every object it adds; it returns the
// changeset's id and its time, which is when() once the tree is built.
// Errors: ErrInvalid for a bad path, mode or changeset; ErrNotFound for a
// missing parent or a delete of a missing path; the store's read errors.
func (b *Builder) Build(parents []objects.ID, changes []Change, agent, message string, when func() time.Time) (objects.ID, time.Time, error) {
	var gen uint64
	var base objects.ID
	for i, p := range parents {
		cs, err := b.changeset(p)
		if err != nil {
			return objects.ID{}, time.Time{}, err
		}
		gen = max(gen, cs.Generation)
		if i == 0 {
			base = cs.Root
		}
	}
	root, delta, err := b.apply(base, changes)
	if err != nil {
		return objects.ID{}, time.Time{}, err
	}
	b.changed = len(delta)
	t := when().UTC()
	cs := &objects.Changeset{Parents: parents, Root: root, Delta: objects.DeltaHash(delta),
		Generation: gen + 1, Agent: agent, Message: message, Time: t}
	enc, id, err := cs.EncodeID()
	if err != nil {
		return objects.ID{}, time.Time{}, fmt.Errorf("%w: %w", errs.ErrInvalid, err)
	}
	b.add(objects.KindChangeset, id, enc)
	return id, t, nil
}

// known reports whether the store already holds the object id of kind k,
// which then need not travel in the frame. Nearly every object a commit
// adds is new, so this is a check for an id expected absent: it searches
// one table per run and lets the runs' filters answer once checks have
// paid for loading them (proj.RunIdx.Has). A lookup of any kind, two tables a
// run without filters, made a fresh process's first commit read each of 4
// runs 4 times per new object (the W4 recovery's first commit).
func (b *Builder) known(id objects.ID, k objects.Kind) bool {
	return b.seen[id] || b.src.Has(id, k)
}

// add records an object of the commit, unless the store or the commit
// holds it already; a large blob goes to the loose objects.
func (b *Builder) add(k objects.Kind, id objects.ID, enc []byte) {
	if b.known(id, k) {
		return
	}
	b.seen[id] = true
	if k == objects.KindBlob {
		b.held += int64(len(enc))
	}
	o := txn.Obj{Kind: k, ID: id, Data: enc, Size: int64(len(enc))}
	if k == objects.KindBlob && len(enc) > b.inline {
		b.loose = append(b.loose, o)
		o.Loose, o.Data = true, nil
	}
	b.objs = append(b.objs, o)
}

// changeset reads a changeset from the writer's view (every appended
// frame), catching up first if it is not there yet.
func (b *Builder) changeset(id objects.ID) (*objects.Changeset, error) {
	data, err := b.src.Read(id, objects.KindChangeset)
	if err != nil {
		return nil, err
	}
	return DecodeChangeset(id, data)
}

func (b *Builder) tree(id objects.ID) (*objects.Tree, error) {
	data, err := b.src.Read(id, objects.KindTree)
	if err != nil {
		return nil, err
	}
	return DecodeTree(id, data)
}

// DecodeChangeset decodes a stored changeset; bytes that fail to decode
// are corruption of the object named id.
func DecodeChangeset(id objects.ID, data []byte) (*objects.Changeset, error) {
	cs, err := objects.DecodeChangeset(data)
	if err != nil {
		return nil, fmt.Errorf("%w: changeset %s: %w", errs.ErrCorrupt, id, err)
	}
	return cs, nil
}

// DecodeTree decodes a stored tree, as DecodeChangeset does a changeset.
func DecodeTree(id objects.ID, data []byte) (*objects.Tree, error) {
	t, err := objects.DecodeTree(data)
	if err != nil {
		return nil, fmt.Errorf("%w: tree %s: %w", errs.ErrCorrupt, id, err)
	}
	return t, nil
}

// tnode is a directory being edited.
type tnode struct {
	entries map[string]objects.Entry
	kids    map[string]*tnode
}

func (b *Builder) node(id objects.ID) (*tnode, error) {
	n := &tnode{entries: map[string]objects.Entry{}, kids: map[string]*tnode{}}
	if id.IsZero() {
		return n, nil
	}
	t, err := b.tree(id)
	if err != nil {
		return nil, err
	}
	for _, e := range t.Entries {
		n.entries[e.Name] = e
	}
	return n, nil
}

// apply edits the tree base with changes and returns the new root id and
// the path changes for the delta hash.
func (b *Builder) apply(base objects.ID, changes []Change) (objects.ID, []objects.PathChange, error) {
	root, err := b.node(base)
	if err != nil {
		return objects.ID{}, nil, err
	}
	var delta []objects.PathChange
	paths := map[string]bool{}
	for _, c := range deletesFirst(changes) {
		p, err := objects.CleanPath(c.Path)
		if err != nil {
			return objects.ID{}, nil, fmt.Errorf("%w: %w", errs.ErrInvalid, err)
		}
		if paths[p] {
			return objects.ID{}, nil, fmt.Errorf("%w: path %q changed twice", errs.ErrInvalid, p)
		}
		paths[p] = true
		mode, err := modeOf(c, p)
		if err != nil {
			return objects.ID{}, nil, err
		}
		comps := strings.Split(p, "/")
		n, err := b.parent(root, comps, p, c.Delete)
		if err != nil {
			return objects.ID{}, nil, err
		}
		name := comps[len(comps)-1]
		old, had := n.entries[name]
		if kid, isKid := n.kids[name]; isKid || (had && old.Mode == objects.ModeDir) {
			// A directory whose every file the changes deleted may
			// become a file, as git replaces one (deletions apply first).
			if c.Delete || !isKid || !emptied(kid) {
				return objects.ID{}, nil, fmt.Errorf("%w: path %q is a directory", errs.ErrInvalid, p)
			}
			delete(n.kids, name)
			delete(n.entries, name)
			old, had = objects.Entry{}, false
		}
		if c.Delete {
			if !had {
				return objects.ID{}, nil, fmt.Errorf("%w: path %q to delete is not in the parent", errs.ErrNotFound, p)
			}
			delete(n.entries, name)
			delta = append(delta, objects.PathChange{Path: p, Op: objects.OpDelete})
			continue
		}
		data, err := content(c)
		if err != nil {
			return objects.ID{}, nil, err
		}
		id := objects.BlobID(data)
		if had && old.ID == id && old.Mode == mode {
			continue
		}
		if err := b.addBlob(id, data); err != nil {
			return objects.ID{}, nil, err
		}
		n.entries[name] = objects.Entry{Name: name, Mode: mode, ID: id}
		op := objects.OpAdd
		if had {
			op = objects.OpModify
		}
		delta = append(delta, objects.PathChange{Path: p, Op: op, Mode: mode, ID: id})
	}
	id, _, err := b.write(root, true)
	return id, delta, err
}

// deletesFirst orders changes with every deletion before every put, each
// kind in its own order: a directory whose files are all deleted may then
// become a file, and a deleted file a directory, whatever order the caller
// listed them in (a merge lists paths sorted, "d" before "d/x"). The delta
// hash does not depend on the order. A list already so ordered (a work
// tree's, most change lists) is returned as it is: the commit path copies
// nothing.
func deletesFirst(changes []Change) []Change {
	put := false
	for _, c := range changes {
		if c.Delete && put {
			return reordered(changes)
		}
		put = put || !c.Delete
	}
	return changes
}

// reordered is changes with every deletion moved before every put.
func reordered(changes []Change) []Change {
	out := make([]Change, 0, len(changes))
	for _, c := range changes {
		if c.Delete {
			out = append(out, c)
		}
	}
	for _, c := range changes {
		if !c.Delete {
			out = append(out, c)
		}
	}
	return out
}

// parent returns the node of the directory that holds path p (split into
// comps), walking into the directories above it and making the missing
// ones, unless del: a path to delete must exist.
func (b *Builder) parent(root *tnode, comps []string, p string, del bool) (*tnode, error) {
	n := root
	for i, comp := range comps[:len(comps)-1] {
		kid, ok := n.kids[comp]
		if !ok {
			e, exists := n.entries[comp]
			var err error
			switch {
			case exists && e.Mode != objects.ModeDir:
				if del {
					return nil, fmt.Errorf("%w: path %q to delete is not in the parent", errs.ErrNotFound, p)
				}
				what := "a file"
				if e.Mode == objects.ModeSymlink {
					what = "a symbolic link"
				}
				return nil, fmt.Errorf("%w: path %q: %q is %s", errs.ErrInvalid, p, strings.Join(comps[:i+1], "/"), what)
			case exists:
				if kid, err = b.node(e.ID); err != nil {
					return nil, err
				}
			case del:
				return nil, fmt.Errorf("%w: path %q to delete is not in the parent", errs.ErrNotFound, p)
			default:
				kid, _ = b.node(objects.ID{})
			}
			n.kids[comp] = kid
		}
		n = kid
	}
	return n, nil
}

// emptied reports whether n, a directory being edited, holds no file any
// more: every entry left is a directory emptied too.
func emptied(n *tnode) bool {
	for name, e := range n.entries {
		kid, ok := n.kids[name]
		if e.Mode != objects.ModeDir || !ok || !emptied(kid) {
			return false
		}
	}
	for name, kid := range n.kids {
		if _, ok := n.entries[name]; !ok && !emptied(kid) {
			return false
		}
	}
	return true
}

// modeOf returns the mode change c gives path p: 0 for a delete, a
// file's mode otherwise (ModeFile when c names none).
func modeOf(c Change, p string) (objects.Mode, error) {
	mode := c.Mode
	if mode == 0 {
		mode = objects.ModeFile
	}
	if c.Delete {
		return 0, nil
	}
	if mode != objects.ModeFile && mode != objects.ModeExec && mode != objects.ModeSymlink {
		return 0, fmt.Errorf("%w: path %q: mode %o is not a file mode", errs.ErrInvalid, p, mode)
	}
	return mode, nil
}

// content returns c's bytes, read through Open when it has no Data.
func content(c Change) ([]byte, error) {
	if c.Data != nil || c.Open == nil {
		return c.Data, nil
	}
	return c.Open()
}

// addBlob adds a blob of the commit and flushes the chunk it fills.
func (b *Builder) addBlob(id objects.ID, data []byte) error {
	b.add(objects.KindBlob, id, data)
	return b.spill()
}

// write encodes n and its edited subdirectories bottom-up. An empty
// subdirectory disappears; the root may be empty.
func (b *Builder) write(n *tnode, isRoot bool) (objects.ID, bool, error) {
	for name, kid := range n.kids {
		id, empty, err := b.write(kid, false)
		if err != nil {
			return objects.ID{}, false, err
		}
		if empty {
			delete(n.entries, name)
		} else {
			n.entries[name] = objects.Entry{Name: name, Mode: objects.ModeDir, ID: id}
		}
	}
	if len(n.entries) == 0 && !isRoot {
		return objects.ID{}, true, nil
	}
	t := &objects.Tree{Entries: make([]objects.Entry, 0, len(n.entries))}
	for _, e := range n.entries {
		t.Entries = append(t.Entries, e)
	}
	sort.Slice(t.Entries, func(i, j int) bool { return t.Entries[i].Name < t.Entries[j].Name })
	enc, id, err := t.EncodeID()
	if err != nil {
		return objects.ID{}, false, fmt.Errorf("%w: %w", errs.ErrInvalid, err)
	}
	b.add(objects.KindTree, id, enc)
	return id, false, nil
}
