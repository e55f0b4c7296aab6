package core

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
