package core

import (
	"sort"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/treediff"
)

// Diff lists the file changes from changeset a to changeset b, sorted by
// path. a may be the zero id (an empty tree).
//
// It walks the two trees side by side and skips every subtree whose id the
// two share, so its cost follows the size of the difference (times the size
// of the directories on the way to it), not the size of the trees.
func (sn *Snapshot) Diff(a, b ID) ([]PathChange, error) {
	var ra ID
	if !a.IsZero() {
		ca, err := sn.Changeset(a)
		if err != nil {
			return nil, err
		}
		ra = ca.Root
	}
	cb, err := sn.Changeset(b)
	if err != nil {
		return nil, err
	}
	var out []PathChange
	if err := sn.diffTrees("", ra, cb.Root, &out); err != nil {
		return nil, err
	}
	// Tree order puts "a/b" before "a.txt"; the contract is byte order.
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// entries returns a tree's entries; the zero id is the empty tree.
func (sn *Snapshot) entries(id ID) ([]objects.Entry, error) {
	if id.IsZero() {
		return nil, nil
	}
	t, err := sn.Tree(id)
	if err != nil {
		return nil, err
	}
	return t.Entries, nil
}

// diffTrees appends the file changes from tree a to tree b, both under
// prefix (either may be the zero id, an empty tree).
func (sn *Snapshot) diffTrees(prefix string, a, b ID, out *[]PathChange) error {
	if a == b {
		return nil
	}
	ea, err := sn.entries(a)
	if err != nil {
		return err
	}
	eb, err := sn.entries(b)
	if err != nil {
		return err
	}
	return treediff.Entries(ea, eb, treediff.Visitor{
		Dir: func(name string, a, b ID) error { return sn.diffTrees(prefix+name+"/", a, b, out) },
		File: func(name string, op treediff.Op, old, new objects.Entry) error {
			*out = append(*out, PathChange{Path: prefix + name, Op: op.String(), Old: old, New: new})
			return nil
		},
	})
}
