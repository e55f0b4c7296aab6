package worktree

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/swarmops/swarmops/core/vfs"
)

// ExcludeFile is the name of the store-level ignore file, in the store's
// directory, in .gitignore syntax. Its patterns apply to every work tree of
// the store, below every .gitignore (as git's info/exclude does).
const ExcludeFile = "exclude"

// maxIgnoreFile bounds an ignore file read into memory; a larger one is
// refused, never truncated (that would ignore a different set of paths).
const maxIgnoreFile = 1 << 20

// rules are the ignore patterns in force in one directory of a walk, in
// increasing priority: the store's exclude file, then each .gitignore from
// the root down. Matching is go-git's gitignore matcher; the walk adds
// git's rule that nothing below an excluded directory is re-included, by
// never descending into one.
type rules struct {
	patterns []gitignore.Pattern
}

// parseIgnore reads patterns in .gitignore syntax; domain is the directory
// the file is in, as path components.
func parseIgnore(data []byte, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}

// readSmall reads a whole file of at most maxIgnoreFile bytes.
func readSmall(f io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxIgnoreFile {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("ignore file larger than 1 MiB")}
	}
	return data, nil
}

// baseRules reads the store's exclude file (none when the tree has no store
// directory or the file is missing), unless rules are off.
func (t *Tree) baseRules() (*rules, error) {
	r := &rules{}
	if t.opts.NoIgnore || t.opts.StoreDir == "" {
		return r, nil
	}
	name := path.Join(t.opts.StoreDir, ExcludeFile)
	f, err := t.fs.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readSmall(f, name)
	if err != nil {
		return nil, err
	}
	r.patterns = parseIgnore(data, nil)
	return r, nil
}

// child returns the rules in force in directory dir ("." is the root),
// adding its .gitignore. The file is read through the Root without
// following a link: a .gitignore that is a symbolic link is not read, as
// git does not read one either.
//
// fis, when not nil, is dir's listing: a directory with no .gitignore
// entry is not asked for one (a system call saved in nearly every
// directory of a tree).
func (t *Tree) childRules(r *rules, dir string, fis []fs.FileInfo) (*rules, error) {
	if t.opts.NoIgnore {
		return r, nil
	}
	if fis != nil && !hasGitignore(fis) {
		return r, nil
	}
	name := ".gitignore"
	var domain []string
	if dir != "." {
		name = dir + "/.gitignore"
		domain = strings.Split(dir, "/")
	}
	f, err := t.root.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, vfs.ErrNotBeneath) {
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return r, err
	}
	data, err := readSmall(f, name)
	if err != nil {
		return nil, err
	}
	ps := parseIgnore(data, domain)
	if len(ps) == 0 {
		return r, nil
	}
	return &rules{patterns: append(r.patterns[:len(r.patterns):len(r.patterns)], ps...)}, nil
}

// match reports whether the rules exclude p (its parent directories are
// not looked at: the walk never reaches a path below an excluded one).
func (r *rules) match(p string, isDir bool) bool {
	if len(r.patterns) == 0 {
		return false
	}
	return gitignore.NewMatcher(r.patterns).Match(strings.Split(p, "/"), isDir)
}

// Ignored reports whether the rules exclude path p, a file or a directory
// as isDir says: p or one of its parent directories is matched by the
// store's exclude file or a .gitignore. It says what a status or commit
// does with an untracked path (tracked paths are never ignored). The three
// paths no rule governs (.git, the metadata directory, the store's
// directory) are always reported ignored.
func (t *Tree) Ignored(p string, isDir bool) (bool, error) {
	if err := ValidatePath(p, t.storeRel); err != nil {
		if errors.Is(err, ErrReservedPath) {
			return true, nil
		}
		return false, err
	}
	r, err := t.baseRules()
	if err != nil {
		return false, err
	}
	comps := strings.Split(p, "/")
	dir := "."
	for i, c := range comps {
		if r, err = t.childRules(r, dir, nil); err != nil {
			return false, err
		}
		last := i == len(comps)-1
		sub := c
		if dir != "." {
			sub = dir + "/" + c
		}
		if r.match(sub, isDir || !last) {
			return true, nil
		}
		dir = sub
	}
	return false, nil
}

// hasGitignore reports whether a sorted listing holds a .gitignore.
func hasGitignore(fis []fs.FileInfo) bool {
	i := sort.Search(len(fis), func(i int) bool { return fis[i].Name() >= ".gitignore" })
	return i < len(fis) && fis[i].Name() == ".gitignore"
}
