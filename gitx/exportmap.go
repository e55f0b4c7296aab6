package gitx

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/afero"
	"golang.org/x/sys/unix"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
	"github.com/swarmops/swarmops/core/vfs"
)

// File names in the (common) git directory.
const (
	mapName     = "swarmops-export.map"
	lockName    = "swarmops-export.lock"
	marksPrefix = "swarmops-export.marks-"
)

// mapHeader is the first line of the mapping file.
var mapHeader = fmt.Sprintf("swarmops-export-map 1 ident=%d\n", identVersion)

// exportMap is the mapping from exported changesets to their commits, as
// loaded from the mapping file and extended by an export.
type exportMap struct {
	fs      vfs.FS // where the mapping file is read and saved (nil: the OS)
	commits map[core.ID]string
	order   []core.ID // file order, then the order of additions
	// note says why a file present was not used ("" when it was, or when
	// there was none).
	note string
}

// loadMap reads the mapping file of the repository. A missing file is an
// empty map; an unreadable or malformed one, or one from another mapping
// version, is an empty map with a note: the mapping only saves time.
func loadMap(fsys vfs.FS, gitDir string) *exportMap {
	m := &exportMap{fs: fsys, commits: map[core.ID]string{}}
	data, err := afero.ReadFile(fsys, filepath.Join(gitDir, mapName))
	if errors.Is(err, fs.ErrNotExist) {
		return m
	}
	if err != nil {
		m.note = "mapping file unreadable, rebuilt: " + err.Error()
		return m
	}
	m = parseMap(data)
	m.fs = fsys
	return m
}

// parseMap decodes a mapping file's content; see loadMap.
func parseMap(data []byte) *exportMap {
	m := &exportMap{commits: map[core.ID]string{}}
	if !bytes.HasPrefix(data, []byte(mapHeader)) {
		m.note = "mapping file from another version, rebuilt"
		return m
	}
	rest := data[len(mapHeader):]
	for n := 2; len(rest) > 0; n++ {
		line, tail, ok := bytes.Cut(rest, []byte{'\n'})
		rest = tail
		cs, sha, err := parseMapLine(line, ok)
		if err != nil {
			*m = exportMap{commits: map[core.ID]string{}, note: fmt.Sprintf("mapping file line %d: %v, rebuilt", n, err)}
			return m
		}
		if _, dup := m.commits[cs]; !dup {
			m.order = append(m.order, cs)
		}
		m.commits[cs] = sha
	}
	return m
}

// parseMapLine parses "<changeset hex> <commit hex>"; terminated says the
// line ended with a newline (a torn last line did not).
func parseMapLine(line []byte, terminated bool) (core.ID, string, error) {
	if !terminated {
		return core.ID{}, "", fmt.Errorf("unterminated")
	}
	a, b, ok := strings.Cut(string(line), " ")
	if !ok {
		return core.ID{}, "", fmt.Errorf("no space")
	}
	cs, err := objects.ParseID(a)
	if err != nil {
		return core.ID{}, "", err
	}
	if len(b) != 40 && len(b) != 64 {
		return core.ID{}, "", fmt.Errorf("commit id of %d characters", len(b))
	}
	if _, err := hex.DecodeString(b); err != nil || strings.ToLower(b) != b {
		return core.ID{}, "", fmt.Errorf("commit id %q is not lowercase hex", b)
	}
	return cs, b, nil
}

// add records that changeset cs is commit sha.
func (m *exportMap) add(cs core.ID, sha string) {
	if _, ok := m.commits[cs]; !ok {
		m.order = append(m.order, cs)
	}
	m.commits[cs] = sha
}

// drop forgets every changeset whose commit is in gone.
func (m *exportMap) drop(gone map[string]bool) {
	keep := m.order[:0]
	for _, cs := range m.order {
		if gone[m.commits[cs]] {
			delete(m.commits, cs)
			continue
		}
		keep = append(keep, cs)
	}
	m.order = keep
}

// testHookBeforeMapRename, when set by a test, runs after the new mapping
// file is written and synced and before it is renamed into place; an error
// it returns fails the export there, as a crash at that point would.
var testHookBeforeMapRename func() error

// save replaces the mapping file: a temporary file in the git directory,
// written, fsynced and closed, renamed over the old one, and the directory
// fsynced, so that after any crash the file is the old one or the new one,
// whole.
func (m *exportMap) save(gitDir string) (err error) {
	if m.fs == nil {
		m.fs = vfs.OS()
	}
	tmp := filepath.Join(gitDir, fmt.Sprintf("%s.tmp-%d-%d", mapName, os.Getpid(), rand.Uint64()))
	f, err := m.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("%w: mapping file: %w", core.ErrIO, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			m.fs.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 64<<10)
	io.WriteString(w, mapHeader)
	for _, cs := range m.order {
		fmt.Fprintf(w, "%s %s\n", cs, m.commits[cs])
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("%w: mapping file: %w", core.ErrIO, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: mapping file: %w", core.ErrIO, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: mapping file: %w", core.ErrIO, err)
	}
	if testHookBeforeMapRename != nil {
		if err := testHookBeforeMapRename(); err != nil {
			return err
		}
	}
	if err := m.fs.Rename(tmp, filepath.Join(gitDir, mapName)); err != nil {
		return fmt.Errorf("%w: mapping file: %w", core.ErrIO, err)
	}
	return syncDir(m.fs, gitDir)
}

// syncDir fsyncs a directory, making the entries created or renamed in it
// durable.
func syncDir(fsys vfs.FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("%w: sync %s: %w", core.ErrIO, dir, err)
	}
	return nil
}

// syncFile fsyncs a file.
func syncFile(fsys vfs.FS, name string) error {
	f, err := fsys.Open(name)
	if err != nil {
		return fmt.Errorf("%w: sync %s: %w", core.ErrIO, name, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: sync %s: %w", core.ErrIO, name, err)
	}
	return nil
}

// lockRepo takes the export lock of a repository, waiting for an export
// that holds it; the returned function releases it. The lock is an flock
// on a file that is never removed, so a crashed holder releases it with
// its process.
func lockRepo(fsys vfs.FS, gitDir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(gitDir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: export lock: %w", core.ErrIO, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: export lock: %w", core.ErrIO, err)
	}
	removeLeftovers(fsys, gitDir)
	return func() { f.Close() }, nil
}

// leftoverPatterns match the temporary files of an export. Only an export
// that died leaves them, and none can be running while the lock is held.
var leftoverPatterns = []string{mapName + ".tmp-*", marksPrefix + "*"}

// removeLeftovers removes what exports that died left in gitDir. It is
// best effort: a leftover costs space, never correctness.
func removeLeftovers(fsys vfs.FS, gitDir string) {
	for _, pat := range leftoverPatterns {
		names, _ := afero.Glob(fsys, filepath.Join(gitDir, pat))
		for _, n := range names {
			fsys.Remove(n)
		}
	}
}

// packFiles lists the file names in the repository's pack directory.
func packFiles(fsys vfs.FS, packDir string) (map[string]bool, error) {
	ents, err := afero.ReadDir(fsys, packDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", core.ErrIO, err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out, nil
}

// syncNewPacks fsyncs every file of the pack directory that was not in
// before, then the directory: the objects an export wrote are durable
// before the mapping names them, whatever the repository's core.fsync
// says.
func syncNewPacks(fsys vfs.FS, packDir string, before map[string]bool) error {
	after, err := packFiles(fsys, packDir)
	if err != nil {
		return err
	}
	n := 0
	for name := range after {
		if before[name] || strings.HasPrefix(name, "tmp_") {
			continue
		}
		if err := syncFile(fsys, filepath.Join(packDir, name)); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return nil
	}
	return syncDir(fsys, packDir)
}
