package worktree

import (
	"encoding/json"
	"errors"
	"fmt"
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
func (t *Tree) clearPending() error { return t.removeMeta(pendingFile) }

// removeMeta removes the metadata file name, if it is there.
func (t *Tree) removeMeta(name string) error {
	if err := t.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// switchFile records a switch of a work tree, from before its first write
// until its index is written. A switch writes the index last, so a crash
// in between leaves the old base with some paths already switched: status
// shows them as the agent's own changes, a commit would record them, and
// a checkout of the old base would find nothing to do. With the record,
// status names the switch (Status.Switching), a commit and an update
// refuse the tree (*SwitchError), and a switch to any revision first
// finishes the interrupted one.
const switchFile = MetaDir + "/switch-pending"

// pendingSwitch is the record: the base the switch started from and the
// revision it was going to. It holds only while the index still names
// From: the switch's own index write ends it, and a commit or an update,
// which move the base only when no switch is pending, remove a record
// a crash after that write left behind.
type pendingSwitch struct {
	From objects.ID `json:"from"`
	Onto objects.ID `json:"onto"`
}

// SwitchError is a commit or an update of a work tree whose switch to
// Onto stopped before it finished.
type SwitchError struct {
	Onto objects.ID
}

func (e *SwitchError) Error() string {
	return fmt.Sprintf("worktree: a switch of the tree to %s stopped before it finished", e.Onto.String()[:12])
}

// FinishError is a switch refused because the switch to Onto that stopped
// before it could not be finished first (Err: local changes in its way,
// or what it failed on). A commit is refused too (*SwitchError): a forced
// switch is the way on.
type FinishError struct {
	Onto objects.ID
	Err  error
}

func (e *FinishError) Error() string {
	return fmt.Sprintf("worktree: finishing the switch to %s that stopped: %v", e.Onto.String()[:12], e.Err)
}

// Unwrap returns Err.
func (e *FinishError) Unwrap() error { return e.Err }

// recordSwitch writes the record of a switch to onto, before its first
// write. It is synced even without Options.Sync: after a power loss the
// files the switch renamed into place may be there while a record that
// was not synced is empty, and status, which then reads every file, would
// show them as the agent's edits with nothing to say a switch stopped.
func (t *Tree) recordSwitch(onto objects.ID) error {
	p := pendingSwitch{From: t.idx.Base, Onto: onto}
	return t.writeMeta(switchFile, true, func(time.Time) ([]byte, error) { return json.Marshal(p) })
}

// switching returns the revision an interrupted switch was going to, or
// the zero id when no switch is pending.
func (t *Tree) switching() (objects.ID, error) {
	onto, _, err := t.readSwitch()
	return onto, err
}

// readSwitch is switching, and whether a record is there at all (one a
// finished or torn switch left too).
func (t *Tree) readSwitch() (onto objects.ID, present bool, err error) {
	data, err := t.readMeta(switchFile)
	if errors.Is(err, fs.ErrNotExist) {
		return objects.ZeroID, false, nil
	}
	if err != nil {
		return objects.ZeroID, false, err
	}
	var p pendingSwitch
	if json.Unmarshal(data, &p) != nil {
		// Synced before the switch wrote anything (recordSwitch), so only
		// a crash while it was written tears it: nothing was switched.
		return objects.ZeroID, true, nil
	}
	if t.idx == nil || t.idx.Base != p.From || p.Onto == p.From {
		return objects.ZeroID, true, nil
	}
	return p.Onto, true, nil
}

// refuseSwitching is the check of a commit and an update: a pending
// switch is a *SwitchError, and a record a finished or torn one left is
// removed, so that no later base equal to its From revives it.
func (t *Tree) refuseSwitching() error {
	onto, present, err := t.readSwitch()
	switch {
	case err != nil || !present:
		return err
	case !onto.IsZero():
		return &SwitchError{Onto: onto}
	}
	return t.clearSwitch()
}

// clearSwitch removes the record.
func (t *Tree) clearSwitch() error { return t.removeMeta(switchFile) }
