package contention

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// Record kinds (Record.Ev).
const (
	// EvCall is written just before a ref operation (read, CAS, advance)
	// starts. A call without a matching EvOp record is an operation whose
	// writer died in flight: its outcome is unknown.
	EvCall = "call"
	// EvOp is written when an operation has returned, with its outcome.
	EvOp = "op"
	// EvGo is written when the writer has seen the go file.
	EvGo = "go"
	// EvDone is written when the writer finished its whole workload.
	EvDone = "done"
)

// Operation kinds (Record.Kind).
const (
	KindCommit  = "commit"  // Commit without Advance
	KindAdvance = "advance" // Commit with Advance: a changeset and a ref CAS in one frame
	KindCAS     = "cas"     // UpdateRefs with one RefUpdate
	KindRead    = "read"    // Snapshot().Ref
)

// Error classes (Record.Err).
const (
	ErrClassBusy     = "busy"
	ErrClassConflict = "conflict"
)

// Record is one JSON line of a writer's report. Times are wall-clock Unix
// nanoseconds, comparable across the processes of one host.
type Record struct {
	Ev     string `json:"ev"`
	W      int    `json:"w"`             // writer number
	Seq    int64  `json:"seq,omitempty"` // writer-local operation number, links EvCall to EvOp
	I      int    `json:"i,omitempty"`   // publish (or commit) index within the writer's workload
	Kind   string `json:"kind,omitempty"`
	Ref    string `json:"ref,omitempty"`
	Old    string `json:"old,omitempty"` // CAS expectation (hex; empty = absent)
	New    string `json:"new,omitempty"` // CAS new value, or the changeset a commit made
	Cur    string `json:"cur,omitempty"` // the ref's value a read saw, or a conflict reported
	Parent string `json:"parent,omitempty"`
	Msg    string `json:"msg,omitempty"`
	Start  int64  `json:"start,omitempty"`
	End    int64  `json:"end,omitempty"`
	WaitNS int64  `json:"wait_ns,omitempty"` // time spent in the writer lock's Lock during the operation
	Locks  int64  `json:"locks,omitempty"`   // writer lock acquisitions during the operation
	// Acq holds, for each writer lock acquisition during the operation,
	// when the writer took its place in the queue (its ticket) and when it
	// got the lock (Unix ns).
	Acq [][2]int64 `json:"acq,omitempty"`
	Err string     `json:"err,omitempty"` // "", ErrClassBusy, ErrClassConflict or a message
}

// Sink writes records as JSON lines, one write call per line, so a writer
// killed with SIGKILL leaves only whole lines behind (the file is opened
// O_APPEND and a line is far below the pipe and page size).
type Sink struct {
	mu sync.Mutex
	w  io.Writer
}

// NewSink returns a Sink over w.
func NewSink(w io.Writer) *Sink { return &Sink{w: w} }

// Emit writes one record.
func (s *Sink) Emit(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("contention: encode record: %w", err)
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("contention: write record: %w", err)
	}
	return nil
}

// ReadRecords reads every "*.jsonl" file in dir. A torn last line (a writer
// killed mid-write) is impossible by Sink's construction and is reported as
// an error rather than skipped.
func ReadRecords(dir string) ([]Record, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Record
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		line := 0
		for sc.Scan() {
			line++
			var r Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return nil, fmt.Errorf("contention: %s line %d: %w", filepath.Base(name), line, err)
			}
			out = append(out, r)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("contention: %s: %w", filepath.Base(name), err)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("contention: no records in " + filepath.Base(dir))
	}
	return out, nil
}
