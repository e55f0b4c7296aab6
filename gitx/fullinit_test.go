package gitx

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/swarmops/swarmops/core"
)

// TestAnInitThatRanOutOfSpaceTakesAwayWhatItMade: git init on a
// full disk leaves a half-made repository, which the retry took for a
// directory of someone else's files (E_USAGE, to be removed by hand). The
// export answers E_NO_SPACE and takes away what init made, and only that.
// A git that fails as a full disk makes it fail.
func TestAnInitThatRanOutOfSpaceTakesAwayWhatItMade(t *testing.T) {
	bin := t.TempDir()
	// It also plays a process that put a file of its own there meanwhile.
	fake := "#!/bin/sh\nfor a; do d=$a; done\nmkdir -p \"$d/objects\" && echo half > \"$d/description\" && echo mine > \"$d/theirs\"\n" +
		"echo \"error: unable to write file: No space left on device\" >&2\nexit 128\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	root := t.TempDir()
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(root, "missing"), empty} {
		_, _, err := openOrInit(dir)
		if !errors.Is(err, core.ErrNoSpace) {
			t.Fatalf("%s: %v, want ErrNoSpace", dir, err)
		}
		ents, rerr := os.ReadDir(dir)
		if rerr != nil || len(ents) != 1 || ents[0].Name() != "theirs" {
			t.Fatalf("%s holds %v after the failed init (%v), want only the file another process put there", dir, ents, rerr)
		}
	}
}
