package worktree

import (
	"fmt"
	"io"
	"os"

	"lukechampine.com/blake3"

	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/treediff"
)

// Source is where trees and blobs come from: a *core.Snapshot. Everything
// it returns is treated as untrusted input: every entry of every tree is
// validated before anything of it is written.
type Source interface {
	Changeset(id objects.ID) (*objects.Changeset, error)
	Tree(id objects.ID) (*objects.Tree, error)
	Blob(id objects.ID) ([]byte, error)
}

// change is one path whose entry differs between two trees; a zero Mode on
// a side means the path is absent there.
type change struct {
	path     string
	old, new objects.Entry
}

// rootOf returns changeset cs's root tree (the zero id for the zero id).
func rootOf(src Source, cs objects.ID) (objects.ID, error) {
	if cs.IsZero() {
		return objects.ZeroID, nil
	}
	c, err := src.Changeset(cs)
	if err != nil {
		return objects.ZeroID, err
	}
	return c.Root, nil
}

func entriesOf(src Source, id objects.ID) ([]objects.Entry, error) {
	if id.IsZero() {
		return nil, nil
	}
	tr, err := src.Tree(id)
	if err != nil {
		return nil, err
	}
	return tr.Entries, nil
}

// changesBetween lists the file-level changes from changeset a to
// changeset b (a zero id is the empty tree), as diffTrees finds them from
// the root: checkout, Record and Adopt each compare two whole changesets.
func (t *Tree) changesBetween(src Source, a, b objects.ID, ci bool) ([]change, error) {
	ra, err := rootOf(src, a)
	if err != nil {
		return nil, err
	}
	rb, err := rootOf(src, b)
	if err != nil {
		return nil, err
	}
	var chs []change
	if err := t.diffTrees(src, "", ra, rb, ci, &chs); err != nil {
		return nil, err
	}
	return chs, nil
}

// diffTrees appends the file-level changes from tree a to tree b under
// prefix. It skips every subtree the two share, so it costs what differs,
// and it validates every entry of each directory of b it reads (and, when
// ci is set, refuses names colliding on a case-insensitive filesystem)
// before returning any change of it.
func (t *Tree) diffTrees(src Source, prefix string, a, b objects.ID, ci bool, out *[]change) error {
	if a == b {
		return nil
	}
	ea, err := entriesOf(src, a)
	if err != nil {
		return err
	}
	eb, err := entriesOf(src, b)
	if err != nil {
		return err
	}
	for i, e := range eb {
		if err := t.checkEntry(prefix+e.Name, e); err != nil {
			return err
		}
		if i > 0 && eb[i-1].Name >= e.Name {
			return &UnsafeTreeError{Path: prefix + e.Name, Reason: "tree entries unsorted or repeated"}
		}
	}
	if ci {
		if err := checkCollisions(prefix, eb); err != nil {
			return err
		}
	}
	return treediff.Entries(ea, eb, treediff.Visitor{
		Dir: func(name string, a, b objects.ID) error { return t.diffTrees(src, prefix+name+"/", a, b, ci, out) },
		File: func(name string, _ treediff.Op, old, new objects.Entry) error {
			*out = append(*out, change{path: prefix + name, old: old, new: new})
			return nil
		},
	})
}

// hashFile returns the blob id of the file p's content, streaming it, and
// the file's stat data as of the read; stable is false when the file
// changed while it was read (its stat then means nothing).
func (t *Tree) hashFile(p string) (id objects.ID, st Stat, stable bool, err error) {
	h := blake3.New(32, nil)
	h.Write([]byte{byte(objects.KindBlob)})
	st, stable, err = t.readStable(p, func(f io.Reader, _ int64) (int64, error) { return io.Copy(h, f) })
	if err != nil {
		return id, Stat{}, false, err
	}
	h.Sum(id[:0])
	return id, st, stable, nil
}

// readWork returns the content of p as a blob: a file's bytes or a link's
// target, with its mode and stat data (stable as for hashFile).
func (t *Tree) readWork(p string, mode objects.Mode) (data []byte, st Stat, stable bool, err error) {
	if mode == objects.ModeSymlink {
		// The stat before and after the readlink: a link replaced in
		// between is not stable, so its stat data never vouches for the
		// target read.
		before, err := t.root.Lstat(p)
		if err != nil {
			return nil, st, false, err
		}
		target, err := t.root.Readlink(p)
		if err != nil {
			return nil, st, false, err
		}
		after, err := t.root.Lstat(p)
		if err != nil {
			return nil, st, false, err
		}
		st = statOf(before)
		return []byte(target), st, st == statOf(after), nil
	}
	st, stable, err = t.readStable(p, func(f io.Reader, size int64) (int64, error) {
		b, err := readAll(f, size)
		data = b
		return int64(len(b)), err
	})
	if err != nil {
		return nil, Stat{}, false, err
	}
	return data, st, stable, nil
}

// readStable opens the file p and hands it to read with its size, and
// returns its stat data as of before the read and whether that is stable:
// the stat after the read is the same and read took exactly that many
// bytes, so nothing wrote the file meanwhile as far as its stat can tell.
// A read counts one file hashed and the bytes it took, even when it fails.
func (t *Tree) readStable(p string, read func(f io.Reader, size int64) (int64, error)) (st Stat, stable bool, err error) {
	f, err := t.root.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return st, false, err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return st, false, err
	}
	n, err := read(f, before.Size())
	t.stats.Hashed++
	t.stats.BytesRead += n
	if err != nil {
		return st, false, err
	}
	after, err := f.Stat()
	if err != nil {
		return st, false, err
	}
	st = statOf(before)
	return st, st == statOf(after) && n == st.Size, nil
}

// workEntry returns the mode and blob id p holds on disk (fi its lstat),
// with its stat data and whether that is stable. A special file or
// directory has mode 0.
func (t *Tree) workEntry(p string, mode objects.Mode) (objects.ID, Stat, bool, error) {
	switch mode {
	case objects.ModeSymlink:
		data, st, stable, err := t.readWork(p, mode)
		return objects.BlobID(data), st, stable, err
	case objects.ModeFile, objects.ModeExec:
		return t.hashFile(p)
	}
	return objects.ZeroID, Stat{}, false, fmt.Errorf("worktree: %q: not a file or link", p)
}

// readAll reads r to its end into a buffer of size bytes, the file's size
// at its stat, and grows it only if the file grew: io.ReadAll's doubling
// would leave up to twice each file's size behind as garbage.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size < 0 || size > 1<<30 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
