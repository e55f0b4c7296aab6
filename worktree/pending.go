package worktree

import (
	"encoding/json"
	"errors"
	"io/fs"
	"time"

	"github.com/swarmops/swarmops/core/objects"
)

// pendingFile records an update that writes conflict markers, from before
// its first write until its index is written. An update writes the index
// last, so a crash in between leaves the old index and files holding
// markers the index does not know: status would show them as the agent's
// own edits, a commit would record the markers, and an update run again
// would merge them as such (markers inside markers). With the record, the
// tree refuses to commit or switch (ErrUnresolved, Interrupted), and the
// update run again first puts back what each such file held before.
const pendingFile = MetaDir + "/update-pending"

// pendingUpdate is the record: the revision the update was bringing the
// tree onto, and each file it writes with markers.
type pendingUpdate struct {
	Onto  objects.ID    `json:"onto"`
	Paths []pendingPath `json:"paths"`
}

// pendingPath is one file an update writes with conflict markers: its
// content and mode before (Ours) and the id of what the update writes
// (Written), by which the update run again knows the file is still as
// the interrupted one left it.
type pendingPath struct {
	Path    string       `json:"path"`
	Mode    objects.Mode `json:"mode"`
	Ours    []byte       `json:"ours"`
	Written objects.ID   `json:"written"`
}

// recordPending writes the record for steps before any of them is
// written; an update that writes no markers needs none.
func (t *Tree) recordPending(onto objects.ID, steps []*step) error {
	p := pendingUpdate{Onto: onto}
	for _, st := range steps {
		if !st.write || !st.conflict {
			continue
		}
		ours, err := t.readMeta(st.s.path)
		if err != nil {
			return err
		}
		p.Paths = append(p.Paths, pendingPath{Path: st.s.path, Mode: st.o.e.Mode, Ours: ours, Written: objects.BlobID(st.data)})
	}
	if len(p.Paths) == 0 {
		return nil
	}
	return t.writeMeta(pendingFile, t.opts.Sync, func(time.Time) ([]byte, error) { return json.Marshal(p) })
}

// readPending returns the record, or nil when there is none or the index
// was written after it (the update finished).
func (t *Tree) readPending() (*pendingUpdate, error) {
	data, err := t.readMeta(pendingFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p pendingUpdate
	if err := json.Unmarshal(data, &p); err != nil {
		// Torn by a power loss: the record is synced with the files it
		// covers (Options.Sync) or not at all, and without Sync a power
		// loss leaves those files torn too; nothing here can be trusted,
		// and the next update removes it.
		return nil, nil
	}
	if t.idx != nil && t.idx.Base == p.Onto {
		return nil, nil
	}
	return &p, nil
}

// interrupted returns the paths an interrupted update left with markers
// the index does not record, or none.
func (t *Tree) interrupted() ([]string, error) {
	p, err := t.readPending()
	if p == nil || err != nil {
		return nil, err
	}
	ps := make([]string, len(p.Paths))
	for i, pp := range p.Paths {
		ps[i] = pp.Path
	}
	return ps, nil
}

// undoInterrupted puts back, before an update runs again, what each file
// an interrupted update wrote with markers held before, when the file
// still holds what that update wrote; a file edited since is left as it
// is. The update then merges as the interrupted one did.
func (t *Tree) undoInterrupted() error {
	p, err := t.readPending()
	if p == nil || err != nil {
		return err
	}
	made, touched := map[string]bool{}, map[string]bool{}
	for _, pp := range p.Paths {
		now, err := t.readMeta(pp.Path)
		if err != nil || objects.BlobID(now) != pp.Written {
			continue
		}
		if _, err := t.place(pp.Path, pp.Mode, pp.Ours, made, touched); err != nil {
			return err
		}
	}
	return t.clearPending()
}

// clearPending removes the record.
func (t *Tree) clearPending() error {
	if err := t.root.Remove(pendingFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
