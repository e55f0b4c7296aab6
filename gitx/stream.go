package gitx

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/objects"
)

// errPipe marks a failure to write to fast-import, whose exit status and
// message then say what happened.
var errPipe = errors.New("gitx: writing to git fast-import")

// streamer writes the fast-import stream of an export: blobs once each,
// then commits, parents first, all on the scratch ref.
type streamer struct {
	sn *core.Snapshot
	m  *exportMap
	w  *bufio.Writer
	// werr is the first write error; later writes are skipped.
	werr error
	// branch is the git ref every new commit is written on (scratchRef).
	branch      string
	nextMark    int
	blobMarks   map[core.ID]int
	commitMarks map[core.ID]int
	markCommit  map[int]core.ID
	// commits and blobs count what was handed to fast-import.
	commits, blobs int
}

func newStreamer(sn *core.Snapshot, m *exportMap) *streamer {
	return &streamer{sn: sn, m: m, blobMarks: map[core.ID]int{}, commitMarks: map[core.ID]int{},
		markCommit: map[int]core.ID{}}
}

// out directs the stream to w.
func (s *streamer) out(w io.Writer) { s.w = bufio.NewWriterSize(&pipeWriter{w: w}, 256<<10) }

// pipeWriter marks its write errors with errPipe.
type pipeWriter struct{ w io.Writer }

func (p *pipeWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if err != nil {
		err = fmt.Errorf("%w: %w", errPipe, err)
	}
	return n, err
}

func (s *streamer) printf(format string, args ...any) {
	if s.werr == nil {
		_, s.werr = fmt.Fprintf(s.w, format, args...)
	}
}

func (s *streamer) write(b []byte) {
	if s.werr == nil {
		_, s.werr = s.w.Write(b)
	}
}

func (s *streamer) flush() error {
	if s.werr == nil {
		s.werr = s.w.Flush()
	}
	return s.werr
}

// writeAll writes every commit of order and "done"; after is called
// after each commit with the number written.
func (s *streamer) writeAll(order []core.ID, after func(int)) error {
	for i, id := range order {
		if err := s.commit(id); err != nil {
			return err
		}
		if s.werr != nil {
			return s.werr
		}
		after(i + 1)
	}
	s.printf("done\n")
	return s.werr
}

// ref is the data reference of an exported changeset's commit: its mark
// when this export writes it, else its commit id.
func (s *streamer) ref(id core.ID) string {
	if mk, ok := s.commitMarks[id]; ok {
		return ":" + strconv.Itoa(mk)
	}
	return s.m.commits[id]
}

// fileChange is one path a commit sets or deletes.
type fileChange struct {
	path  string
	del   bool
	entry objects.Entry
}

// commit writes changeset id's new blobs and then its commit: a full tree
// for a changeset without parents, else the changes against the first
// parent, deletions first.
func (s *streamer) commit(id core.ID) error {
	cs, err := s.sn.Changeset(id)
	if err != nil {
		return fmt.Errorf("export: changeset %s: %w", id, err)
	}
	if strings.IndexByte(cs.Message, 0) >= 0 {
		return fmt.Errorf("%w: %w: changeset %s: its message holds a NUL byte, which git refuses in a commit",
			core.ErrInvalid, ErrUnrepresentable, id)
	}
	changes, err := s.changes(id, cs)
	if err != nil {
		return err
	}
	marks := make([]int, len(changes))
	for i, c := range changes {
		if c.del {
			continue
		}
		if err := checkExportPath(id, c.path); err != nil {
			return err
		}
		if marks[i], err = s.blob(c.entry.ID); err != nil {
			return err
		}
	}
	s.nextMark++
	mk := s.nextMark
	s.commitMarks[id], s.markCommit[mk] = mk, id
	name, email := Ident(cs.Agent)
	date := gitDate(cs.Time)
	if len(cs.Parents) == 0 {
		s.printf("reset %s\n", s.branch)
	}
	s.printf("commit %s\nmark :%d\nauthor %s <%s> %s\ncommitter %s <%s> %s\ndata %d\n",
		s.branch, mk, name, email, date, name, email, date, len(cs.Message))
	s.write([]byte(cs.Message))
	s.write([]byte{'\n'})
	for i, p := range cs.Parents {
		if i == 0 {
			s.printf("from %s\n", s.ref(p))
		} else {
			s.printf("merge %s\n", s.ref(p))
		}
	}
	for i, c := range changes {
		if c.del {
			s.printf("D %s\n", quotePath(c.path))
		} else {
			s.printf("M %06o :%d %s\n", uint32(c.entry.Mode), marks[i], quotePath(c.path))
		}
	}
	s.write([]byte{'\n'})
	s.commits++
	return nil
}

// changes lists what commit id sets: every file of its tree when it has no
// parents, else its changes against its first parent with the deletions
// first, so that a file can replace a directory and the reverse.
func (s *streamer) changes(id core.ID, cs *objects.Changeset) ([]fileChange, error) {
	var out []fileChange
	if len(cs.Parents) == 0 {
		flat, err := s.sn.Flatten(id)
		if err != nil {
			return nil, fmt.Errorf("export: changeset %s: %w", id, err)
		}
		for p, e := range flat {
			out = append(out, fileChange{path: p, entry: e})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
		return out, nil
	}
	diff, err := s.sn.Diff(cs.Parents[0], id)
	if err != nil {
		return nil, fmt.Errorf("export: changeset %s: %w", id, err)
	}
	for _, d := range diff {
		if d.Op == "delete" {
			out = append(out, fileChange{path: d.Path, del: true})
		}
	}
	for _, d := range diff {
		if d.Op != "delete" {
			out = append(out, fileChange{path: d.Path, entry: d.New})
		}
	}
	return out, nil
}

// blob returns the mark of blob id, writing the blob first if this export
// has not.
func (s *streamer) blob(id core.ID) (int, error) {
	if mk, ok := s.blobMarks[id]; ok {
		return mk, nil
	}
	data, err := s.sn.Blob(id)
	if err != nil {
		return 0, fmt.Errorf("export: blob %s: %w", id, err)
	}
	s.nextMark++
	mk := s.nextMark
	s.blobMarks[id] = mk
	s.printf("blob\nmark :%d\ndata %d\n", mk, len(data))
	s.write(data)
	s.write([]byte{'\n'})
	s.blobs++
	return mk, nil
}

// checkExportPath refuses a path with a component git takes for ".git".
func checkExportPath(id core.ID, p string) error {
	for _, c := range strings.Split(p, "/") {
		if isDotGit(c) {
			return fmt.Errorf("%w: %w: changeset %s: path %q: git refuses %q as a name in a tree",
				core.ErrInvalid, ErrUnrepresentable, id, p, c)
		}
	}
	return nil
}

// readMarks reads fast-import's marks file and records the commit of every
// changeset written in the map.
func (s *streamer) readMarks(name string) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return fmt.Errorf("%w: marks file: %w", core.ErrIO, err)
	}
	found := 0
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		mk, sha, ok := strings.Cut(string(line), " ")
		if !ok || !strings.HasPrefix(mk, ":") {
			continue
		}
		n, err := strconv.Atoi(mk[1:])
		if err != nil {
			continue
		}
		if id, ok := s.markCommit[n]; ok {
			if _, _, err := parseMapLine([]byte(id.String()+" "+sha), true); err != nil {
				return fmt.Errorf("%w: %w: git fast-import's marks file: %w", core.ErrIO, ErrGitFailed, err)
			}
			s.m.add(id, sha)
			found++
		}
	}
	if found != len(s.markCommit) {
		return fmt.Errorf("%w: %w: git fast-import's marks file names %d of the %d commits written",
			core.ErrIO, ErrGitFailed, found, len(s.markCommit))
	}
	return nil
}
