package core

import (
	"sort"

	"github.com/swarmops/swarmops/core/objects"
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
	// side lists every file of one subtree as added or deleted.
	side := func(e objects.Entry, add bool) error {
		p := prefix + e.Name
		switch {
		case e.Mode.IsDir() && add:
			return sn.diffTrees(p+"/", ID{}, e.ID, out)
		case e.Mode.IsDir():
			return sn.diffTrees(p+"/", e.ID, ID{}, out)
		case add:
			*out = append(*out, PathChange{Path: p, Op: "add", New: e})
		default:
			*out = append(*out, PathChange{Path: p, Op: "delete", Old: e})
		}
		return nil
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		switch {
		case j == len(eb) || (i < len(ea) && ea[i].Name < eb[j].Name):
			if err := side(ea[i], false); err != nil {
				return err
			}
			i++
		case i == len(ea) || eb[j].Name < ea[i].Name:
			if err := side(eb[j], true); err != nil {
				return err
			}
			j++
		default:
			x, y := ea[i], eb[j]
			i, j = i+1, j+1
			switch {
			case x.Mode == y.Mode && x.ID == y.ID:
			case x.Mode.IsDir() && y.Mode.IsDir():
				if err := sn.diffTrees(prefix+x.Name+"/", x.ID, y.ID, out); err != nil {
					return err
				}
			case x.Mode.IsDir() || y.Mode.IsDir():
				if err := side(x, false); err != nil {
					return err
				}
				if err := side(y, true); err != nil {
					return err
				}
			default:
				*out = append(*out, PathChange{Path: prefix + x.Name, Op: "modify", Old: x, New: y})
			}
		}
	}
	return nil
}
