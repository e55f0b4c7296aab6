// Package treediff compares two directories of a tree, entry by entry: the
// one step that the store's Diff (changeset to changeset) and a work
// tree's checkout and update (base to target) both repeat down two trees.
//
// Entries equal in mode and id are skipped without being read, so a walk
// that recurses only through Dir costs what differs between the trees,
// not their size.
package treediff

import "github.com/swarmops/swarmops/core/objects"

// Op is what happened to a file from the old tree to the new one.
type Op uint8

// The file changes.
const (
	Added Op = iota + 1
	Deleted
	Modified
)

// String returns the name the CLI and the store's PathChange use.
func (o Op) String() string {
	switch o {
	case Added:
		return "add"
	case Deleted:
		return "delete"
	case Modified:
		return "modify"
	}
	return "op?"
}

// Visitor receives what Entries finds.
type Visitor struct {
	// Dir is a pair of subtrees to compare under name; a is the zero id
	// where the subtree is new, b where it is gone.
	Dir func(name string, a, b objects.ID) error
	// File is one file change under name; the side that does not exist
	// (old for Added, new for Deleted) is the zero Entry.
	File func(name string, op Op, old, new objects.Entry) error
}

// Entries walks a and b, one directory's entries in the old and the new
// tree, each sorted by name, side by side. A name only one side has is
// added or deleted (a whole subtree through Dir); a name whose entries
// differ is a modified file, a pair of subtrees, or, where a directory and
// a file swap, the old one's deletion and then the new one's addition. It
// stops at the first error a Visitor function returns.
func Entries(a, b []objects.Entry, v Visitor) error {
	side := func(e objects.Entry, add bool) error {
		switch {
		case e.Mode.IsDir() && add:
			return v.Dir(e.Name, objects.ZeroID, e.ID)
		case e.Mode.IsDir():
			return v.Dir(e.Name, e.ID, objects.ZeroID)
		case add:
			return v.File(e.Name, Added, objects.Entry{}, e)
		default:
			return v.File(e.Name, Deleted, e, objects.Entry{})
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var err error
		switch {
		case j == len(b) || (i < len(a) && a[i].Name < b[j].Name):
			err = side(a[i], false)
			i++
		case i == len(a) || b[j].Name < a[i].Name:
			err = side(b[j], true)
			j++
		default:
			x, y := a[i], b[j]
			i, j = i+1, j+1
			switch {
			case x.Mode == y.Mode && x.ID == y.ID:
			case x.Mode.IsDir() && y.Mode.IsDir():
				err = v.Dir(x.Name, x.ID, y.ID)
			case x.Mode.IsDir() || y.Mode.IsDir():
				if err = side(x, false); err == nil {
					err = side(y, true)
				}
			default:
				err = v.File(x.Name, Modified, x, y)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
