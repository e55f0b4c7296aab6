package core

// PendingCommits returns how many transactions wait in s's commit pipeline
// (for tests that hold a batch's sync until the next batch has formed).
func PendingCommits(s *Store) int {
	s.pipeMu.Lock()
	defer s.pipeMu.Unlock()
	return len(s.pending)
}
