package core

import "testing"

// MustCreate creates a store in dir with o and closes it when the test
// (or benchmark run) ends.
func MustCreate(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	return closedAtEnd(t, "Create", Create, dir, o)
}

// MustOpen opens the store in dir with o and closes it when the test (or
// benchmark run) ends.
func MustOpen(t testing.TB, dir string, o Options) *Store {
	t.Helper()
	return closedAtEnd(t, "Open", Open, dir, o)
}

// DeepClean fails t unless a deep verify of s runs and finds nothing,
// reporting the first three problems it finds.
func DeepClean(t testing.TB, s *Store) {
	t.Helper()
	vr, err := s.Verify(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range vr.Problems {
		if i < 3 {
			t.Errorf("deep verify: %v", p)
		}
	}
}

func closedAtEnd(t testing.TB, what string, open func(string, Options) (*Store, error), dir string, o Options) *Store {
	t.Helper()
	s, err := open(dir, o)
	if err != nil {
		t.Fatalf("%s %s: %v", what, dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// PendingCommits returns how many transactions wait in s's commit pipeline
// (for tests that hold a batch's sync until the next batch has formed).
func PendingCommits(s *Store) int {
	return s.pipe.Pending()
}

// FramesApplied returns how many frames s's projection has applied since it
// was loaded from a checkpoint (open, reload or the last checkpoint swap
// leave it counting from there).
func FramesApplied(s *Store) int64 {
	s.view.mu.Lock()
	defer s.view.mu.Unlock()
	return s.view.proj.Frames
}
