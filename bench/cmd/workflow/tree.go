package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// TreeInfo describes the tree every system imports.
type TreeInfo struct {
	Source   string   `json:"source"`
	Files    int      `json:"files"`    // regular files
	Links    int      `json:"symlinks"` // symbolic links, added ones included
	Added    []string `json:"symlinks_added,omitempty"`
	Bytes    int64    `json:"bytes"` // content bytes of the regular files
	CatPath  string   `json:"cat_path"`
	EditPath string   `json:"edit_path"`
	TenPaths []string `json:"ten_paths"`
}

// copyTree copies src to dst with cp -a (modes, times and links kept).
func copyTree(src, dst string) error {
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", src, dst, err, firstLine(string(out)))
	}
	return nil
}

// scanTree lists the regular files of dir (slash-separated, sorted), and
// counts its links and content bytes. A directory named .git is skipped,
// as both systems skip it.
func scanTree(dir string) (files []string, links int, size int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			links++
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			size += fi.Size()
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(files)
	return files, links, size, err
}

// addLinks plants one symbolic link of each kind a real repository holds
// (relative to a file, relative to a directory, absolute, dangling) in a
// directory of its own, and returns their paths.
func addLinks(dir, aFile string) ([]string, error) {
	const sub = "workflow-links"
	if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
		return nil, err
	}
	parent := filepath.ToSlash(filepath.Dir(aFile))
	links := []struct{ name, target string }{
		{"to-file", "../" + aFile},
		{"to-dir", "../" + parent},
		{"absolute", "/etc/hostname"},
		{"dangling", "no-such-file"},
	}
	var out []string
	for _, l := range links {
		if err := os.Symlink(l.target, filepath.Join(dir, sub, l.name)); err != nil {
			return nil, err
		}
		out = append(out, sub+"/"+l.name)
	}
	return out, nil
}

// pickPaths chooses, from the sorted files, the file cat prints (the
// middle one), the file the one-file commits edit, and ten files spread
// over the tree for the two commits a switch moves between. Files under
// testdata are avoided: a test tree may hold files a .gitignore names.
func pickPaths(files []string) (cat, edit string, ten []string, err error) {
	var ok []string
	for _, f := range files {
		if !strings.Contains(f, "testdata/") && !strings.Contains(f, "/.") && !strings.HasPrefix(f, ".") {
			ok = append(ok, f)
		}
	}
	if len(ok) < 24 {
		return "", "", nil, fmt.Errorf("the tree has %d ordinary files; at least 24 are needed", len(ok))
	}
	n := len(ok)
	taken := map[int]bool{}
	for i := 0; i < 10; i++ {
		j := (2*i + 1) * n / 21
		taken[j] = true
		ten = append(ten, ok[j])
	}
	free := func(from int) int {
		for taken[from] {
			from++
		}
		taken[from] = true
		return from
	}
	cat, edit = ok[free(n/2)], ok[free(n/3)]
	return cat, edit, ten, nil
}

// agentPaths returns one distinct ordinary file per agent, none of them the
// files pickPaths chose.
func agentPaths(files []string, t *TreeInfo, agents int) ([]string, error) {
	taken := map[string]bool{t.CatPath: true, t.EditPath: true}
	for _, p := range t.TenPaths {
		taken[p] = true
	}
	var ok []string
	for _, f := range files {
		if !taken[f] && strings.HasSuffix(f, ".go") && !strings.Contains(f, "testdata/") {
			ok = append(ok, f)
		}
	}
	if len(ok) < agents {
		return nil, fmt.Errorf("the tree has %d .go files outside testdata; %d agents need one each", len(ok), agents)
	}
	out := make([]string, agents)
	for i := range out {
		out[i] = ok[(2*i+1)*len(ok)/(2*agents)]
	}
	return out, nil
}

// appendLine appends line to the file rel under dir.
func appendLine(dir, rel, line string) error {
	f, err := os.OpenFile(filepath.Join(dir, filepath.FromSlash(rel)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stamp is what a write changes in a directory entry.
type stamp struct {
	ino          uint64
	mtime, ctime int64
	size         int64
}

// stamps records the stat data of every non-directory under dir, except
// the metadata directories of the two systems (.git, .swarmops-tree).
func stamps(dir string) (map[string]stamp, error) {
	m := map[string]stamp{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir && (d.Name() == ".git" || d.Name() == ".swarmops-tree") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		m[p] = stamp{st.Ino, st.Mtim.Nano(), st.Ctim.Nano(), st.Size}
		return nil
	})
	return m, err
}

// touched counts the entries created, removed or rewritten between two
// stamps of the same directory.
func touched(before, after map[string]stamp) (written, removed int) {
	for p, a := range after {
		if b, ok := before[p]; !ok || a != b {
			written++
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			removed++
		}
	}
	return written, removed
}

// untrack removes the work-tree metadata that `commit --dir` of a plain
// directory leaves in it (it makes the directory a work tree of the new
// changeset), so the shared tree is the same for every system and run: git
// would otherwise commit it, and the next import would find a work tree of
// a store that no longer exists.
func (b *bench) untrack() error {
	return os.RemoveAll(filepath.Join(b.tree, ".swarmops-tree"))
}
