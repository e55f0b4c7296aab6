package worktree

import (
	"container/heap"
	"io/fs"
	"runtime"
	"strings"
	"sync"

	"github.com/swarmops/swarmops/core/vfs"
)

// prefetcher lists directories ahead of a walk, on a few goroutines each
// with its own Root (a Root is not safe for concurrent use). Listing a
// directory is an lstat of every entry, nearly all of a status's time; the
// kernel serves those in parallel as git's preloaded index does, while the
// walk itself stays in path order and sees each listing once.
//
// The workers do not wait for the walk to reach a directory before they
// list what lies below it: each listing queues the subdirectories that
// hold tracked paths (expand), which the walk enters whatever the ignore
// rules say, and the workers take the queue in the walk's order. Other
// directories are queued by the walk as it decides to enter them (ahead).
// At most maxHeld listings are made and not yet taken, so a walk of a
// huge tree holds a bounded part of it; a directory the walk reaches
// before a worker started on it is listed by the walk itself.
type prefetcher struct {
	on     bool // workers run
	expand func(dir string, fis []fs.FileInfo) []dirJob
	job    func(dir string, fi fs.FileInfo) dirJob
	wg     sync.WaitGroup

	mu      sync.Mutex
	cond    sync.Cond // more work, a slot freed, or stop
	pending dirQueue  // queued, not started, the walk's order first
	byDir   map[string]*listing
	held    int // started by a worker and not yet taken by the walk
	stopped bool
}

// maxHeld bounds the listings made ahead of the walk (a variable so a
// test can make it small).
var maxHeld = 1024

// dirJob is a directory to list: by reading it, or, when a directory
// record vouches that it holds exactly its tracked names, by lstat'ing
// those names alone.
type dirJob struct {
	dir     string
	names   []string
	byNames bool
}

// list lists j's directory with root.
func (j dirJob) list(root vfs.Root) ([]fs.FileInfo, error) {
	if j.byNames {
		return root.LstatNames(j.dir, j.names)
	}
	return root.ReadDir(j.dir)
}

// listing is one directory's entries, ready when done is closed.
type listing struct {
	job     dirJob
	key     string // dir with '/' as the lowest byte: the walk's order
	index   int    // in pending while queued
	started bool
	done    chan struct{}
	fis     []fs.FileInfo
	err     error
}

// prefetchWorkers is how many goroutines list ahead: one a core. More
// only add hand-offs (Go's src on 2 cores, medians of 21 whole-process runs:
// status 40-41 ms with 2 workers, 42-45 with 3, 43-46 with 4 or 6).
func prefetchWorkers() int { return runtime.GOMAXPROCS(0) }

// newPrefetcher starts the workers on roots of dir, expand naming the
// subdirectories of a listed directory to list next. Only a filesystem
// that resolves beneath a root itself (the real OS) gets workers: on the
// faultfs wrappers and MemFS every listing is made by the walk, so the
// sequence of filesystem calls, which crash tests number, stays the same
// from run to run.
func newPrefetcher(fsys vfs.FS, dir string, expand func(dir string, fis []fs.FileInfo) []dirJob, job func(dir string, fi fs.FileInfo) dirJob) *prefetcher {
	p := &prefetcher{expand: expand, job: job, byDir: map[string]*listing{}}
	p.cond.L = &p.mu
	if _, ok := fsys.(vfs.Rooter); !ok {
		return p
	}
	for i := 0; i < prefetchWorkers(); i++ {
		root, err := vfs.OpenRoot(fsys, dir)
		if err != nil {
			break
		}
		p.on = true
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer root.Close()
			for l := p.next(); l != nil; l = p.next() {
				p.make(root, l)
			}
		}()
	}
	return p
}

// next waits for a queued listing and a free slot, and starts it; nil
// once the walk is over.
func (p *prefetcher) next() *listing {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.stopped && (len(p.pending) == 0 || p.held >= maxHeld) {
		p.cond.Wait()
	}
	if p.stopped {
		return nil
	}
	l := heap.Pop(&p.pending).(*listing)
	l.started = true
	p.held++
	return l
}

// make lists l's directory, and queues the subdirectories to list next
// before it says l is done, so the walk never reaches one of them
// unqueued and lists it twice.
func (p *prefetcher) make(root vfs.Root, l *listing) {
	l.fis, l.err = l.job.list(root)
	if l.err == nil && p.expand != nil {
		subs := p.expand(l.job.dir, l.fis)
		p.mu.Lock()
		for _, d := range subs {
			p.queueLocked(d)
		}
		p.mu.Unlock()
	}
	close(l.done)
}

// ahead asks for dir, whose lstat is fi, to be listed ahead of the walk.
func (p *prefetcher) ahead(dir string, fi fs.FileInfo) {
	if !p.on {
		return
	}
	p.mu.Lock()
	_, queued := p.byDir[dir]
	p.mu.Unlock()
	if queued {
		return
	}
	j := p.job(dir, fi)
	p.mu.Lock()
	p.queueLocked(j)
	p.mu.Unlock()
}

func (p *prefetcher) queueLocked(j dirJob) {
	if _, ok := p.byDir[j.dir]; ok {
		return
	}
	l := &listing{job: j, key: strings.ReplaceAll(j.dir, "/", "\x00"), done: make(chan struct{})}
	p.byDir[j.dir] = l
	heap.Push(&p.pending, l)
	p.cond.Signal()
}

// list returns dir's entries and how they were listed: the listing a
// worker made or is making, or one made now with root as mk says.
func (p *prefetcher) list(root vfs.Root, dir string, mk func() dirJob) (dirJob, []fs.FileInfo, error) {
	p.mu.Lock()
	l := p.byDir[dir]
	delete(p.byDir, dir)
	switch {
	case l == nil:
	case l.started:
		p.held--
		p.cond.Signal()
	default:
		heap.Remove(&p.pending, l.index)
		l = nil
	}
	p.mu.Unlock()
	if l == nil {
		j := mk()
		fis, err := j.list(root)
		return j, fis, err
	}
	<-l.done
	return l.job, l.fis, l.err
}

// stop ends the workers; a listing in progress is finished and dropped.
func (p *prefetcher) stop() {
	p.mu.Lock()
	p.stopped = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

// dirQueue is a heap of queued listings, the one the walk reaches first
// on top: keyed with each '/' as a NUL, which no name holds, a directory's
// subtree sorts after it and before its next sibling, as the walk goes.
type dirQueue []*listing

func (q dirQueue) Len() int           { return len(q) }
func (q dirQueue) Less(i, j int) bool { return q[i].key < q[j].key }
func (q dirQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *dirQueue) Push(x any) {
	l := x.(*listing)
	l.index = len(*q)
	*q = append(*q, l)
}
func (q *dirQueue) Pop() any {
	old := *q
	l := old[len(old)-1]
	*q = old[:len(old)-1]
	return l
}
