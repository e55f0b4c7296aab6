package core_test

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/afero"

	"github.com/swarmops/swarmops/core"
	"github.com/swarmops/swarmops/core/vfs"
)

// historyWriters is how many goroutines build a history (each its own chain
// and ref, like the peer comparison's W5 load).
const historyWriters = 32

// historyRequest is the transaction of the peer comparison (bench/engine's
// swarmRequest): one 24-byte file in the writer's directory, an agent, a
// 100-byte message and a time, advancing the writer's ref. i is the
// changeset's position in writer w's chain.
func historyRequest(w, i int, parent core.ID) core.CommitRequest {
	data := make([]byte, 24)
	binary.LittleEndian.PutUint64(data[0:], uint64(w))
	binary.LittleEndian.PutUint64(data[8:], uint64(i))
	binary.LittleEndian.PutUint64(data[16:], uint64(w)*1e9+uint64(i))
	msg := []byte(fmt.Sprintf("agent-%02d: change %d of its chain; ", w, i))
	for len(msg) < 100 {
		msg = append(msg, 'a'+byte((len(msg)+i)%26))
	}
	req := core.CommitRequest{
		Changes: []core.Change{{Path: fmt.Sprintf("w%02d/f", w), Data: data}},
		Agent:   fmt.Sprintf("agent-%02d", w),
		Message: string(msg),
		Time:    time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second),
		Advance: fmt.Sprintf("agents/w%02d", w),
	}
	if i > 0 {
		req.Parents = []core.ID{parent}
	}
	return req
}

// buildHistory creates a store at dir holding n changesets, built through
// the public API and the real commit path: historyWriters goroutines each
// commit their own chain with Store.Commit, every commit durable (no
// weakening; group commit shares the data syncs of concurrent frames) and
// advancing its writer's ref. It returns the changeset ids in commit order
// per writer, interleaved (ids[i] belongs to writer i % historyWriters).
//
// Only the checkpoint interval differs from a default store while it is
// built: it is about n/6, so the history ends in at most seven index runs
// without a compaction merging the whole history again every eight
// checkpoints (which at K = 1,024 makes a 1M build quadratic); the
// interval is not part of the store's format. settleHistory then writes the
// checkpoint covering the whole history.
func buildHistory(tb testing.TB, o core.Options, dir string, n int) []core.ID {
	tb.Helper()
	bo := o
	bo.CheckpointEvery = max(n/6+1, 1024)
	bo.InlineCheckpoint = false
	s, err := core.Create(dir, bo)
	if err != nil {
		tb.Fatal(err)
	}
	chains := make([][]core.ID, historyWriters)
	errs := make([]error, historyWriters)
	var wg sync.WaitGroup
	for w := 0; w < historyWriters; w++ {
		m := n / historyWriters
		if w < n%historyWriters {
			m++
		}
		wg.Add(1)
		go func(w, m int) {
			defer wg.Done()
			var head core.ID
			for i := 0; i < m; i++ {
				id, err := s.Commit(historyRequest(w, i, head))
				if err != nil {
					errs[w] = fmt.Errorf("writer %d, changeset %d: %w", w, i, err)
					return
				}
				chains[w] = append(chains[w], id)
				head = id
			}
		}(w, m)
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			tb.Fatal(err)
		}
	}
	ids := make([]core.ID, 0, n)
	for i := 0; len(ids) < n; i++ {
		for w := 0; w < historyWriters && len(ids) < n; w++ {
			if i < len(chains[w]) {
				ids = append(ids, chains[w][i])
			}
		}
	}
	return ids
}

// settleHistory writes a checkpoint covering every frame of a store built
// by buildHistory, through the public core.Recover (what `swarmops recover`
// does), so the store is left as one whose last frame was a checkpoint's.
func settleHistory(tb testing.TB, o core.Options, dir string) {
	tb.Helper()
	if _, err := core.Recover(dir, o); err != nil {
		tb.Fatal(err)
	}
}

// storeBytes sums the sizes of the store's files by part (journal, index,
// objects, checkpoint, reflog, other), as stat reports them.
func storeBytes(tb testing.TB, fsys vfs.FS, dir string) map[string]int64 {
	tb.Helper()
	out := map[string]int64{}
	err := afero.Walk(fsys, dir, func(p string, fi fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return nil
		}
		out[storePart(dir, p)] += fi.Size()
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// storePart names the part of the store at dir that the file p is in:
// journal, index or objects (a file below that directory), checkpoint or
// reflog (that file), or other.
func storePart(dir, p string) string {
	part, _, below := strings.Cut(strings.TrimPrefix(p, dir+"/"), "/")
	switch {
	case below && (part == "journal" || part == "index" || part == "objects"):
		return part
	case !below && (part == "checkpoint" || part == "reflog"):
		return part
	}
	return "other"
}

// describeBytes formats storeBytes per changeset, parts sorted.
func describeBytes(b map[string]int64, n int) string {
	var parts []string
	for k := range b {
		parts = append(parts, k)
	}
	sort.Strings(parts)
	var sb strings.Builder
	for _, k := range parts {
		fmt.Fprintf(&sb, " %s %.1f", k, float64(b[k])/float64(n))
	}
	return strings.TrimSpace(sb.String())
}
