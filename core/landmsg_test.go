package core

import (
	"testing"

	"github.com/swarmops/swarmops/core/internal/errs"
)

// TestALandsMergeMessageCarriesTheChangesSubject: a land that merges, with
// no message given, names the change, the target and the first non-blank
// line of the change's own message, so the target's first-parent history
// says what landed.
func TestALandsMergeMessageCarriesTheChangesSubject(t *testing.T) {
	s, m0 := newLandStore(t)
	advanceMain(t, s, puts("main", 1))
	ch, err := s.Commit(CommitRequest{Parents: []ID{m0}, Changes: puts("side", 1), Message: "\n  fix the parser  \n\nIt read past the end.\n"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Land(ch, "main", LandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sn, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sn.Changeset(r.Changeset)
	if err != nil {
		t.Fatal(err)
	}
	if want := "land " + errs.Short(ch) + " onto main: fix the parser"; cs.Message != want {
		t.Errorf("merge message %q, want %q", cs.Message, want)
	}
}

func TestLandMessageOfAChangeWithoutAMessageNamesOnlyTheChange(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{"", "land agent/3 onto main"},
		{" \n\t\n", "land agent/3 onto main"},
		{"one\ntwo", "land agent/3 onto main: one"},
	} {
		if got := LandMessage("agent/3", "main", c.msg); got != c.want {
			t.Errorf("LandMessage(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}
