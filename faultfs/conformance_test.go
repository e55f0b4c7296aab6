package faultfs_test

import (
	"testing"

	"github.com/swarmops/swarmops/core/vfs"
	"github.com/swarmops/swarmops/faultfs"
	"github.com/swarmops/swarmops/faultfs/fstest"
)

func memDir(wrap func(vfs.FS) vfs.FS) fstest.NewFS {
	return func() (vfs.FS, string) {
		m := faultfs.NewMem()
		if err := m.MkdirAll("/t", 0o755); err != nil {
			panic(err)
		}
		return wrap(m), "/t"
	}
}

// TestConformance runs the conformance suite over MemFS and each wrapper
// over MemFS, alone and stacked.
func TestConformance(t *testing.T) {
	for name, wrap := range map[string]func(vfs.FS) vfs.FS{
		"mem":      func(f vfs.FS) vfs.FS { return f },
		"counting": func(f vfs.FS) vfs.FS { return faultfs.NewCounting(f) },
		"crashing": func(f vfs.FS) vfs.FS { return faultfs.NewCrashing(f, 0) },
		"crashexit": func(f vfs.FS) vfs.FS {
			return faultfs.NewCrashExit(f, 1<<62)
		},
		"injecting": func(f vfs.FS) vfs.FS {
			// A rule that never matches: the wrapper must be transparent.
			return faultfs.NewInjecting(f, faultfs.MustParseRule("op=write,path=/never/*,err=eio"))
		},
		"stacked": func(f vfs.FS) vfs.FS {
			return faultfs.NewCounting(faultfs.NewInjecting(faultfs.NewCrashing(f, 0)))
		},
	} {
		t.Run(name, func(t *testing.T) { fstest.Run(t, memDir(wrap)) })
	}
}
