package worktree

import (
	"io/fs"
	"runtime"
	"sync"

	"github.com/swarmops/swarmops/core/vfs"
)

// prefetcher lists directories ahead of a walk, on a few goroutines each
// with its own Root (a Root is not safe for concurrent use). Listing a
// directory is an lstat of every entry, nearly all of a status's time; the
// kernel serves those in parallel as git's preloaded index does, while the
// walk itself stays in path order and sees each listing once.
type prefetcher struct {
	on   bool // workers run
	jobs chan *listing
	wg   sync.WaitGroup
	mu   sync.Mutex
	byID map[string]*listing
}

// listing is one directory's entries, ready when done is closed.
type listing struct {
	dir  string
	done chan struct{}
	fis  []fs.FileInfo
	err  error
}

// prefetchWorkers bounds the goroutines listing ahead: more than the
// cores, since each spends its time in system calls.
func prefetchWorkers() int { return min(8, 2*runtime.GOMAXPROCS(0)) }

// newPrefetcher starts the workers on roots of dir. Only a filesystem that
// resolves beneath a root itself (the real OS) gets workers: on the
// faultfs wrappers and MemFS every listing is made by the walk, so the
// sequence of filesystem calls, which crash tests number, stays the same
// from run to run. With no workers every listing is made by the walk.
func newPrefetcher(fsys vfs.FS, dir string) *prefetcher {
	p := &prefetcher{jobs: make(chan *listing, 1024), byID: map[string]*listing{}}
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
			for l := range p.jobs {
				l.fis, l.err = root.ReadDir(l.dir)
				close(l.done)
			}
		}()
	}
	return p
}

// ahead asks for dir to be listed, if a worker can take it now; a full
// queue leaves it to the walk.
func (p *prefetcher) ahead(dir string) {
	if !p.on {
		return
	}
	l := &listing{dir: dir, done: make(chan struct{})}
	select {
	case p.jobs <- l:
		p.mu.Lock()
		p.byID[dir] = l
		p.mu.Unlock()
	default:
	}
}

// list returns dir's entries: the prefetched listing when there is one,
// else one made now with root.
func (p *prefetcher) list(root vfs.Root, dir string) ([]fs.FileInfo, error) {
	p.mu.Lock()
	l := p.byID[dir]
	delete(p.byID, dir)
	p.mu.Unlock()
	if l == nil {
		return root.ReadDir(dir)
	}
	<-l.done
	return l.fis, l.err
}

// stop ends the workers once the queued listings are made.
func (p *prefetcher) stop() {
	close(p.jobs)
	p.wg.Wait()
}
