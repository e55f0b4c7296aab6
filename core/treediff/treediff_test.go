package treediff

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/swarmops/swarmops/core/objects"
)

func entry(name string, mode objects.Mode, id byte) objects.Entry {
	return objects.Entry{Name: name, Mode: mode, ID: objects.ID{id}}
}

// record lists what Entries reports, one line a call.
func record(a, b []objects.Entry) ([]string, error) {
	var got []string
	err := Entries(a, b, Visitor{
		Dir: func(name string, x, y objects.ID) error {
			got = append(got, fmt.Sprintf("dir %s %x %x", name, x[:1], y[:1]))
			return nil
		},
		File: func(name string, op Op, old, new objects.Entry) error {
			got = append(got, fmt.Sprintf("%s %s %x %x", op, name, old.ID[:1], new.ID[:1]))
			return nil
		},
	})
	return got, err
}

func TestEntriesReportsEachDifferenceOnceInNameOrder(t *testing.T) {
	a := []objects.Entry{
		entry("gone", objects.ModeFile, 1),
		entry("olddir", objects.ModeDir, 2),
		entry("same", objects.ModeFile, 3),
		entry("sub", objects.ModeDir, 4),
		entry("swap", objects.ModeDir, 5),
		entry("text", objects.ModeFile, 6),
	}
	b := []objects.Entry{
		entry("newdir", objects.ModeDir, 7),
		entry("same", objects.ModeFile, 3),
		entry("sub", objects.ModeDir, 8),
		entry("swap", objects.ModeFile, 9),
		entry("text", objects.ModeFile, 10),
	}
	got, err := record(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"delete gone 01 00",
		"dir newdir 00 07",
		"dir olddir 02 00",
		"dir sub 04 08",
		"dir swap 05 00",
		"add swap 00 09",
		"modify text 06 0a",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}

func TestEntriesSkipsAnEqualEntryAndStopsAtTheFirstError(t *testing.T) {
	same := []objects.Entry{entry("a", objects.ModeFile, 1), entry("d", objects.ModeDir, 2)}
	if got, err := record(same, same); err != nil || len(got) != 0 {
		t.Fatalf("equal directories: %q, %v; want nothing", got, err)
	}
	stop := errors.New("stop")
	calls := 0
	err := Entries(nil, same, Visitor{
		Dir:  func(string, objects.ID, objects.ID) error { calls++; return stop },
		File: func(string, Op, objects.Entry, objects.Entry) error { calls++; return stop },
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Entries returned %v after %d calls; want stop after 1", err, calls)
	}
}
